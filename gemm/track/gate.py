"""The gate's screen: which series of the newest commit may be slower (or are wrong, or
missing)? Pure: rows in, rows out. The screen only picks candidates; gemm.track.confirm
decides each candidate ("drop?") by an A/B on this GPU (gemm.track.decision's rule), and
gemm.cli.regress is the command.

For every kernel x size, each gated metric (gemm.core.metrics: TFLOPS and % of cuBLAS, higher
is better) of the new run is compared with two references on the same asv machine:

  the recent history   centre = median of the last `window` earlier runs (other commits)
  the anchor           the run of an anchor commit (gemm.track.anchor), if one is named, so
                       that many small steps, each under the screen, add up to a candidate

    screen = max(screen(size class), k * within-run sigma)
    "drop?" when centre - new > screen * centre, or anchor - new > screen * anchor

(within-run sigma: the median of the runs' (q75 - q25) / 1.349, asv's recorded quartiles,
relative to the centre.) The history's own spread is not part of the screen: the history was
recorded on several GPUs of one name that differ by up to ~2 %, and a screen that wide could
not see a 1 % drop. That is why every candidate goes to the A/B, which measures code against
code on one GPU; the history alone never fails a commit where a GPU is present.

Size classes (by M*N*K): large >= 2048^3, medium >= 1000^3, small below. Defaults: screen
0.5 / 1.5 / 3 %, minimum effect (the smallest drop the A/B must call a DROP) 1 / 3 / 5 %;
both configurable per class.

A kernel that fails (asv records null) fails the gate. A series that the history has and the
current suite still defines, but the new run lacks, is MISSING and fails the gate, unless the
judgement was narrowed on purpose to kernels or sizes that exclude it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core import metrics, stats
from ..core.problem import Problem
from .history import HistoryError, finite

FAILING = ("DROP", "FAILED", "MISSING")
CLASSES = (("large", 2048 ** 3), ("medium", 1000 ** 3), ("small", 0))
SCREEN = {"large": 0.005, "medium": 0.015, "small": 0.03}
MIN_EFFECT = {"large": 0.01, "medium": 0.03, "small": 0.05}


def size_class(size: str) -> str:
    p = Problem.parse(size)
    vol = p.M * p.N * p.K
    return next(name for name, floor in CLASSES if vol >= floor)


@dataclass(frozen=True)
class GateConfig:
    k: float = 4.0
    window: int = 10
    screen: dict = field(default_factory=lambda: dict(SCREEN))
    min_effect: dict = field(default_factory=lambda: dict(MIN_EFFECT))
    alpha: float = 1e-3          # family-wise error rate of one commit's A/B
    min_rounds: int = 1          # A B B A rounds before the first decision
    max_rounds: int = 8          # then UNRESOLVED (5 until 2026-11-30; ci/probes/power_sim.py
                                 # on 8a5f5c3's A/A: 07@2048 at +1 % 0.45 by 5 rounds, 0.91 by 8)
    confirm: bool = True
    strict: bool = False         # UNRESOLVED fails the gate too
    budget_s: float = 180.0      # A/B wall time; its rounds are planned to fit (gemm.track.plan)
    robust: bool = True          # the A/B decides by Huber locations where the series' own
                                 # calibration shows a heavy tail (calibration.robust_prior:
                                 # 07 at 2048 today), by means elsewhere; False: means only
    overtime_s: float = 60.0     # past budget_s, what is on course for a DROP (its estimate
                                 # past the margin: decision.on_course) is measured on, alone,
                                 # for up to this long more, within max_rounds; 0: all stop

    def decide(self, ref_rounds, new_rounds, delta: float, family: int, prior, robust_prior):
        """The A/B's effect and verdict for one series: decision.effect_robust with the
        series' robust prior where `robust` is on and it has one (a heavy tail), else
        decision.effect_rounds (the mean rule) with its calibrated noise."""
        from . import decision
        if self.robust and robust_prior is not None:
            return decision.effect_robust(ref_rounds, new_rounds, delta, self.alpha, family,
                                          robust_prior)
        return decision.effect_rounds(ref_rounds, new_rounds, delta, self.alpha, family, prior)

    def trial_settings(self) -> dict:
        """The settings a calibration's detection trials are made under (kept in its file, so
        trials join only trials of the same procedure). A rule added later is named only when
        on, so tables made before it keep their settings as they were."""
        out = {"screen": self.screen, "min_effect": self.min_effect, "alpha": self.alpha,
               "min_rounds": self.min_rounds, "max_rounds": self.max_rounds,
               "budget_s": self.budget_s}
        if self.robust:
            out["robust"] = True
        if self.overtime_s:
            out["overtime_s"] = self.overtime_s
        return out

    def validate(self) -> None:
        if self.k <= 0 or self.window < 1:
            raise ValueError("k > 0 and window >= 1")
        names = {n for n, _ in CLASSES}
        for what, d in (("screen", self.screen), ("min_effect", self.min_effect)):
            if set(d) != names or not all(0 < v < 1 for v in d.values()):
                raise ValueError(f"{what} needs a value in (0, 1) for each size class "
                                 f"({', '.join(sorted(names))}), got {d}")
        if not 0 < self.alpha < 1 or not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError("0 < alpha < 1 and 1 <= min_rounds <= max_rounds")
        if self.budget_s <= 0:
            raise ValueError("the A/B time budget must be positive")
        if self.overtime_s < 0:
            raise ValueError("the A/B overtime must be 0 (none) or positive")

    def screen_for(self, size: str) -> float:
        return self.screen[size_class(size)]

    def effect_for(self, size: str) -> float:
        return self.min_effect[size_class(size)]

    def failing(self) -> tuple:
        return FAILING + (("UNRESOLVED",) if self.strict else ())


@dataclass(frozen=True)
class Narrowing:
    """Judge only these kernels / sizes (empty: all); the report says so."""
    kernels: tuple = ()
    sizes: tuple = ()

    def __bool__(self) -> bool:
        return bool(self.kernels or self.sizes)

    def admits(self, kernel: str, size: str) -> bool:
        return ((not self.kernels or kernel in self.kernels)
                and (not self.sizes or size in self.sizes))

    def __str__(self) -> str:
        parts = [f"kernels {', '.join(self.kernels)}"] if self.kernels else []
        parts += [f"sizes {', '.join(self.sizes)}"] if self.sizes else []
        return "; ".join(parts) or "everything"


@dataclass
class Row:
    kernel: str
    size: str
    metric: str                # metric key (gemm.core.metrics)
    n_hist: int
    centre: float | None
    new: float | None
    change: float | None       # relative, (new - centre) / centre
    bound: float | None        # the screen: relative drop that makes a candidate
    verdict: str               # ok | improved | drop? | DROP | noise | UNRESOLVED | FAILED | MISSING | new | skipped
    note: str = ""
    remeasured: float | None = None
    reference: str | None = None      # the newest earlier commit with this series (the A/B's)
    ref_value: float | None = None    # its recorded value
    ab_reference: float | None = None  # A/B: median of the reference code's process values ...
    ab_new: float | None = None        # ... and of the new code's, measured here
    anchor: str | None = None         # the anchor commit, where its run has this series
    anchor_value: float | None = None
    anchor_change: float | None = None  # relative, (new - anchor) / anchor
    min_effect: float | None = None   # the smallest drop the A/B must call a DROP
    against: list = field(default_factory=list)   # the commits the A/B compares with
    effects: list = field(default_factory=list)   # the A/B's decision per compared commit
    changepoints: list = field(default_factory=list)  # where the series stepped (gemm.track.anchor)

    @property
    def label(self) -> str:
        return metrics.get(self.metric).label


def judge(history: list, new, screen: float, k: float = 4.0):
    """(verdict, centre, relative change, relative screen) for one series; higher is better."""
    hist = [p for p in history if finite(p.value)]
    if new is None or new.value is None:
        return "FAILED", None, None, None
    if not finite(new.value):
        return "skipped", None, None, None
    if not hist:
        return "new", None, None, None
    centre = stats.median([p.value for p in hist])
    iqrs = [(p.q75 - p.q25) / 1.349 for p in hist + [new]
            if p.q25 is not None and p.q75 is not None]
    sig_run = stats.median(iqrs) if iqrs else 0.0
    rel_bound = max(screen, k * sig_run / abs(centre)) if centre else screen
    change = (new.value - centre) / centre if centre else 0.0
    if -change > rel_bound:
        return "drop?", centre, change, rel_bound
    if change > rel_bound:
        return "improved", centre, change, rel_bound
    return "ok", centre, change, rel_bound


def reference(history: list[tuple[str, object]]) -> tuple[str | None, float | None]:
    """(commit, value) of the newest earlier run with a value: the code the A/B measures the
    new code against. One commit for (nearly) every series, so one A/B serves them all; a
    slow drift over several commits is the anchor's to catch."""
    for commit, p in reversed(history):
        if finite(p.value):
            return commit, p.value
    return None, None


def select(runs, commit: str | None):
    """(the run judged, the earlier runs of other commits)."""
    if not runs:
        raise HistoryError("the results hold no runs for this machine")
    if commit:
        hits = [i for i, r in enumerate(runs) if r.commit.startswith(commit)]
        if not hits:
            raise HistoryError(f"no recorded run for commit {commit}")
        idx = hits[-1]
    else:
        idx = len(runs) - 1
    new_run = runs[idx]
    return new_run, [r for r in runs[:idx] if r.commit != new_run.commit]


def evaluate(runs, suite, cfg: GateConfig, commit: str | None = None,
             narrow: Narrowing = Narrowing(), anchor: str | None = None
             ) -> tuple[list[Row], object]:
    """Screen the run of `commit` (default: the newest) against the history before it and,
    if given, against the anchor commit's run."""
    new_run, before = select(runs, commit)
    earlier = before[-cfg.window:]
    anchor_run = None
    if anchor and not new_run.commit.startswith(anchor):
        hits = [r for r in before if r.commit.startswith(anchor)]
        if not hits:
            raise HistoryError(f"the anchor {anchor[:10]} has no recorded run before "
                               f"{new_run.commit[:10]} on this machine")
        anchor_run = hits[-1]
    gated = {m.key for m in metrics.GATED}
    keys = sorted({k for r in earlier + [new_run] for k in r.points
                   if not k.baseline and k.metric in gated and narrow.admits(k.target, k.size)})
    rows = []
    for key in keys:
        pairs = [(r.commit, r.points[key]) for r in earlier if key in r.points]
        hist = [p for _, p in pairs]
        n_hist = len([p for p in hist if finite(p.value)])
        new = new_run.points.get(key)
        skipped = new is not None and new.value is not None and not finite(new.value)
        if new is None or skipped:   # absent, or recorded as skipped (NaN: asv -b left it out)
            if n_hist and key in suite.series:
                rows.append(Row(key.target, key.size, key.metric, n_hist, None, None, None,
                                None, "MISSING", "in the history, not measured in this run"))
            continue  # else: no longer part of the suite (kernel or size removed)
        screen = cfg.screen_for(key.size)
        verdict, centre, change, bound = judge(hist, new, screen, cfg.k)
        ref, ref_value = reference(pairs) if centre is not None else (None, None)
        row = Row(key.target, key.size, key.metric, n_hist, centre, new.value, change,
                  bound, verdict, reference=ref, ref_value=ref_value,
                  min_effect=cfg.effect_for(key.size))
        a = anchor_run.points.get(key) if anchor_run is not None else None
        if a is not None and finite(a.value) and a.value and finite(new.value):
            row.anchor, row.anchor_value = anchor_run.commit, a.value
            row.anchor_change = (new.value - a.value) / a.value
            if -row.anchor_change > (bound or screen) and verdict in ("ok", "improved", "new"):
                row.verdict = "drop?"
                row.note = (f"{100 * row.anchor_change:+.2f} % against the anchor "
                            f"{anchor_run.commit[:10]}")
        rows.append(row)
    return rows, new_run


def candidates_against(row: Row) -> list[str]:
    """The commits a candidate's A/B compares with: the history's reference where the recent
    history flagged it, the anchor where the anchor did (either or both)."""
    out = []
    if row.change is not None and row.bound is not None and -row.change > row.bound and row.reference:
        out.append(row.reference)
    if (row.anchor and row.anchor_change is not None and -row.anchor_change > (row.bound or 0)
            and row.anchor not in out):
        out.append(row.anchor)
    return out


def measured_nothing(new_run, narrow: Narrowing = Narrowing()) -> bool:
    return not any(finite(p.value) or p.value is None for k, p in new_run.points.items()
                   if not k.baseline and narrow.admits(k.target, k.size))


def failed(rows: list[Row], cfg: GateConfig = GateConfig()) -> list[Row]:
    return [r for r in rows if r.verdict in cfg.failing()]
