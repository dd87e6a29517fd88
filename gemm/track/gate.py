"""The gate's screen: which series of the judged commit may be slower, wrong or missing?"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..core import metrics, stats
from ..core.problem import Problem, SizeClass
from ..store.history import HistoryError, finite
from . import decision


class Verdict(StrEnum):
    """A series' verdict in a gate report (a str: reports and kept files read as before)."""
    OK = "ok"
    IMPROVED = "improved"
    CANDIDATE = "drop?"        # past the screen, for the A/B to decide
    DROP = "DROP"              # confirmed by the A/B (or unconfirmed where none could run)
    NOISE = "noise"            # the A/B dismissed it
    UNRESOLVED = "UNRESOLVED"  # the A/B could not decide it
    FAILED = "FAILED"          # the kernel failed
    MISSING = "MISSING"        # in the history, not in this run
    NEW = "new"                # no history yet


FAILING = (Verdict.DROP, Verdict.FAILED, Verdict.MISSING)
NO_VALUE = ("no value in this run's record: the kernel failed there, or every sample was dropped "
            "as throttled (the record's sweep document and log say which)")
MIN_EFFECT = {SizeClass.LARGE: 0.01, SizeClass.MEDIUM: 0.03, SizeClass.SMALL: 0.05}


@dataclass(frozen=True)
class GateConfig:
    window: int = 10             # earlier commits the screen's median is taken over
    min_effect: dict = field(default_factory=lambda: dict(MIN_EFFECT))   # floors per class
    alpha: float = 1e-3          # family-wise error rate of one commit's A/B
    min_rounds: int = 1          # rounds before the first decision (a DROP: DROP_MIN_ROUNDS)
    max_rounds: int = 8          # then UNRESOLVED
    confirm: bool = True
    strict: bool = False         # UNRESOLVED fails the gate too
    budget_s: float = 180.0      # A/B wall time, its rounds planned to fit (gemm.track.plan)
    robust: bool = True          # trimmed means where the calibration shows a heavy tail
    overtime_s: float = 60.0     # past budget_s, how long more a likely DROP is measured
    carry_commits: int = 3       # a series UNRESOLVED this many commits running fails

    def decide(self, ref_rounds, new_rounds, delta: float, family: int, prior, robust_prior,
               ks=None):
        """The robust rule where on and the series has a robust prior, else the mean rule."""
        e = decision.effect_trimmed(ref_rounds, new_rounds, delta, self.alpha, family,
                                    robust_prior) if self.robust else None
        return e or decision.effect_rounds(ref_rounds, new_rounds, delta, self.alpha, family,
                                           prior, ks)

    def validate(self) -> None:
        if self.window < 1:
            raise ValueError("window >= 1")
        names = set(SizeClass)
        if set(self.min_effect) != names or not all(0 < v < 1 for v in self.min_effect.values()):
            raise ValueError(f"min_effect needs a value in (0, 1) for each size class "
                             f"({', '.join(sorted(names))}), got {self.min_effect}")
        if not 0 < self.alpha < 1 or not 1 <= self.min_rounds <= self.max_rounds:
            raise ValueError("0 < alpha < 1 and 1 <= min_rounds <= max_rounds")
        if self.max_rounds < decision.DROP_MIN_ROUNDS:
            raise ValueError(f"max_rounds >= {decision.DROP_MIN_ROUNDS}: no DROP rests on fewer "
                             "rounds")
        if self.budget_s <= 0:
            raise ValueError("the A/B time budget must be positive")
        if self.overtime_s < 0:
            raise ValueError("the A/B overtime must be 0 (none) or positive")
        if self.carry_commits < 1:
            raise ValueError("carry_commits >= 1")

    def effect_for(self, size: str, prior: decision.Noise | None = None) -> float:
        """Its size class's floor, or wider where `prior` cannot decide that in max_rounds."""
        floor = self.min_effect[Problem.parse(size).size_class]
        if prior is None:
            return floor
        return max(floor, decision.detectable(prior.sigma, prior.dof_for(self.max_rounds - 1),
                                              self.alpha, self.max_rounds))


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
    verdict: Verdict
    note: str = ""
    reference: str | None = None       # the newest earlier commit with this series
    ref_value: float | None = None
    ab_reference: float | None = None  # the A/B's median process values: the reference's ...
    ab_new: float | None = None        # ... and the new code's
    anchor: str | None = None          # the anchor commit, where its run has this series
    anchor_value: float | None = None
    anchor_change: float | None = None  # relative, (new - anchor) / anchor
    min_effect: float | None = None    # the smallest drop the A/B must call a DROP
    against: list = field(default_factory=list)   # the commits the A/B compares with
    effects: list = field(default_factory=list)   # its decision per compared commit
    open: list = field(default_factory=list)      # what it left open (abreport.left_open)
    changepoints: list = field(default_factory=list)   # where the series stepped
    unconfirmed: bool = False          # a DROP only because no A/B could be made here
    carried: list = field(default_factory=list)   # earlier commits it was UNRESOLVED at
    carried_rounds: dict = field(default_factory=dict)  # against -> rounds kept there
    identical: list = field(default_factory=list)  # flagged against, same code: no A/B
    code_changed: bool = False         # large, its kernel's code or build changed

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kernel, self.size, self.metric

    @property
    def label(self) -> str:
        return metrics.get(self.metric).label

    def add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text


def judge(history: list, new, screen: float):
    """(verdict, centre, relative change) of one series against its history's median."""
    hist = [p.value for p in history if finite(p.value)]
    if new.value is None:   # evaluate() leaves out what is absent or skipped (NaN)
        return Verdict.FAILED, None, None
    if not hist:
        return Verdict.NEW, None, None
    centre = stats.median(hist)
    change = (new.value - centre) / centre if centre else 0.0
    if -change > screen:
        return Verdict.CANDIDATE, centre, change
    return (Verdict.IMPROVED if change > screen else Verdict.OK), centre, change


def select(runs, commit: str | None):
    """(the run judged, the earlier runs of other commits)."""
    if not runs:
        raise HistoryError("the results hold no runs for this machine")
    idx = len(runs) - 1
    if commit:
        hits = [i for i, r in enumerate(runs) if r.commit.startswith(commit)]
        if not hits:
            raise HistoryError(f"no recorded run for commit {commit}")
        idx = hits[-1]
    new_run = runs[idx]
    return new_run, [r for r in runs[:idx] if r.commit != new_run.commit]


def evaluate(runs, suite, cfg: GateConfig, commit: str | None = None,
             narrow: Narrowing = Narrowing(), anchor: str | None = None, cal=None
             ) -> tuple[list[Row], object]:
    """Screen the run of `commit` (None: the newest) against its history and the anchor's."""
    new_run, before = select(runs, commit)
    earlier = before[-cfg.window:]
    anchor_run = None
    if anchor and not new_run.commit.startswith(anchor):
        anchor_run = next((r for r in reversed(before) if r.commit.startswith(anchor)), None)
        if anchor_run is None:
            raise HistoryError(f"the anchor {anchor[:10]} has no recorded run before "
                               f"{new_run.commit[:10]} on this machine")
    gated = {m.key for m in metrics.GATED}
    keys = sorted({k for r in earlier + [new_run] for k in r.points
                   if not k.baseline and k.metric in gated and narrow.admits(k.target, k.size)})
    rows = []
    for key in keys:
        pairs = [(r.commit, r.points[key]) for r in earlier if key in r.points]
        valued = [(c, p.value) for c, p in pairs if finite(p.value)]
        new = new_run.points.get(key)
        if new is None or (new.value is not None and not finite(new.value)):
            # absent, or recorded as skipped (NaN: asv -b left it out)
            if valued and key in suite.series:
                rows.append(Row(key.target, key.size, key.metric, len(valued), None, None, None,
                                None, Verdict.MISSING, "in the history, not measured in this run"))
            continue  # else: no longer part of the suite (kernel or size removed)
        effect = cfg.effect_for(key.size, cal.prior(*key[:3]) if cal else None)
        screen = effect / 2
        verdict, centre, change = judge([p for _, p in pairs], new, screen)
        ref, ref_value = valued[-1] if centre is not None else (None, None)   # the A/B's
        row = Row(key.target, key.size, key.metric, len(valued), centre, new.value, change,
                  None if centre is None else screen, verdict, reference=ref,
                  ref_value=ref_value, min_effect=effect,
                  note=NO_VALUE if verdict == Verdict.FAILED else "")
        a = anchor_run.points.get(key) if anchor_run is not None else None
        if a is not None and finite(a.value) and a.value and finite(new.value):
            row.anchor, row.anchor_value = anchor_run.commit, a.value
            row.anchor_change = (new.value - a.value) / a.value
            if -row.anchor_change > screen and verdict in (Verdict.OK, Verdict.IMPROVED,
                                                           Verdict.NEW):
                row.verdict, row.bound = Verdict.CANDIDATE, screen
                row.note = (f"{100 * row.anchor_change:+.2f} % against the anchor "
                            f"{anchor_run.commit[:10]}")
        rows.append(row)
    return rows, new_run


def candidates_against(row: Row) -> list[str]:
    """The commits a candidate's A/B compares with (reference, anchor or both: docs/gate.md)."""
    out = []
    if row.reference and (_past_history(row) or row.code_changed
                          or (row.carried and not row.anchor)):
        out.append(row.reference)
    if row.anchor and row.anchor not in out and (past_anchor(row) or row.carried):
        out.append(row.anchor)
    return out


def _past_history(row: Row) -> bool:
    return row.change is not None and row.bound is not None and -row.change > row.bound


def past_anchor(row: Row) -> bool:
    return row.anchor_change is not None and -row.anchor_change > (row.bound or 0)


def past_screen(row: Row) -> bool:
    """Did the screen flag this row (against the history or the anchor)?"""
    return _past_history(row) or past_anchor(row)


def screened_large(row: Row) -> bool:
    """A large series the screen passed or flagged: the A/B may measure it unflagged."""
    return (Problem.parse(row.size).size_class == SizeClass.LARGE
            and row.verdict in (Verdict.OK, Verdict.IMPROVED, Verdict.CANDIDATE))


def failed(rows: list[Row], cfg: GateConfig = GateConfig()) -> list[Row]:
    """The failing rows: DROP, FAILED, MISSING, UNRESOLVED at carry_commits running (or strict)."""
    return [r for r in rows if r.verdict in FAILING or (r.verdict == Verdict.UNRESOLVED and (
        cfg.strict or len(r.carried) + 1 >= cfg.carry_commits))]
