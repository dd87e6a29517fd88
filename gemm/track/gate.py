"""The gate's rule: is the newest commit slower (or wrong, or missing) anywhere, against the
recorded history? Pure: rows in, rows out; gemm.track.confirm decides flagged rows on a GPU and
gemm.cli.regress is the command.

For every kernel x size, each gated metric (gemm.core.metrics: TFLOPS and % of cuBLAS, higher
is better) of the new run is compared with the same series on the same machine over the last
`window` earlier commits:

    centre = median(history)        noise = max(1.4826 * MAD(history), within-run sigma)
    (MAD over two points is half their distance: a history that disagrees with itself widens the
    bound instead of being trusted.)
    drop   = centre - new           flagged ("drop?") when drop > max(k * noise, min_rel * centre)

(within-run sigma: the median of the runs' (q75 - q25) / 1.349, asv's recorded quartiles.)

A kernel that fails (asv records null) fails the gate. A series that the history has and the
current suite still defines, but the new run lacks, is MISSING and fails the gate, unless the
judgement was narrowed on purpose to kernels or sizes that exclude it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core import metrics, stats
from .history import HistoryError, finite

FAILING = ("DROP", "FAILED", "MISSING")


@dataclass(frozen=True)
class GateConfig:
    k: float = 4.0
    min_rel: float = 0.02
    window: int = 10
    confirm_runs: int = 2
    confirm: bool = True

    def validate(self) -> None:
        if self.k <= 0 or not 0 <= self.min_rel < 1 or self.window < 1 or self.confirm_runs < 1:
            raise ValueError("k > 0, 0 <= min_rel < 1, window >= 1, confirm_runs >= 1")


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
    bound: float | None        # relative drop that would be flagged
    verdict: str               # ok | improved | drop? | DROP | noise | FAILED | MISSING | new | skipped
    note: str = ""
    remeasured: float | None = None
    reference: str | None = None      # commit of the earlier run nearest the history median
    ref_value: float | None = None    # its recorded value
    ab_reference: float | None = None  # A/B medians measured here: the reference code ...
    ab_new: float | None = None        # ... and the new code

    @property
    def label(self) -> str:
        return metrics.get(self.metric).label


def judge(history: list, new, cfg: GateConfig) -> tuple[str, float | None, float | None, float | None]:
    """(verdict, centre, relative change, relative bound) for one series; higher is better."""
    hist = [p for p in history if finite(p.value)]
    if new is None or new.value is None:
        return "FAILED", None, None, None
    if not finite(new.value):
        return "skipped", None, None, None
    if not hist:
        return "new", None, None, None
    vals = [p.value for p in hist]
    centre = stats.median(vals)
    sig_hist = stats.robust_sigma(vals)  # 0 for one point; 0.74 |a - b| for two
    iqrs = [(p.q75 - p.q25) / 1.349 for p in hist + [new]
            if p.q25 is not None and p.q75 is not None]
    sig_run = stats.median(iqrs) if iqrs else 0.0
    noise = max(sig_hist, sig_run)
    bound = max(cfg.k * noise, cfg.min_rel * abs(centre))
    change = (new.value - centre) / centre if centre else 0.0
    rel_bound = bound / abs(centre) if centre else 0.0
    if centre - new.value > bound:
        return "drop?", centre, change, rel_bound
    if new.value - centre > bound:
        return "improved", centre, change, rel_bound
    return "ok", centre, change, rel_bound


def reference(history: list[tuple[str, object]], centre: float) -> tuple[str | None, float | None]:
    """(commit, value) of the earlier run nearest the history median; the latest on a tie."""
    best = None
    for i, (commit, p) in enumerate(history):
        if finite(p.value):
            key = (abs(p.value - centre), -i)
            if best is None or key < best[0]:
                best = (key, commit, p.value)
    return (best[1], best[2]) if best else (None, None)


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
             narrow: Narrowing = Narrowing()) -> tuple[list[Row], object]:
    new_run, earlier = select(runs, commit)
    earlier = earlier[-cfg.window:]
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
        verdict, centre, change, bound = judge(hist, new, cfg)
        ref, ref_value = reference(pairs, centre) if centre is not None else (None, None)
        rows.append(Row(key.target, key.size, key.metric, n_hist, centre, new.value, change,
                        bound, verdict, reference=ref, ref_value=ref_value))
    return rows, new_run


def measured_nothing(new_run, narrow: Narrowing = Narrowing()) -> bool:
    return not any(finite(p.value) or p.value is None for k, p in new_run.points.items()
                   if not k.baseline and narrow.admits(k.target, k.size))


def failed(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.verdict in FAILING]
