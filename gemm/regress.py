"""The gate: is the newest commit slower (or wrong) anywhere, against the recorded history?

For every kernel x size, TFLOPS and % of cuBLAS (higher is better) of the new run are compared
with the history of the same series on the same machine (the last `window` earlier commits):

    centre = median(history)        noise = max(1.4826 * MAD(history), within-run sigma)
    (MAD over two points is half their distance: a history that disagrees with itself widens the
    bound instead of being trusted.)
    drop   = centre - new           flagged when drop > max(k * noise, min_rel * centre)

(within-run sigma: the median of the runs' (q75 - q25) / 1.349, asv's recorded quartiles.)
A flagged drop is re-measured on the GPU (`confirm_runs` fresh sweeps of just those kernels and
sizes, same policy as the recorded run) and fails the gate only if the median re-measurement
still drops past the bound; without a GPU it fails as unconfirmed. A kernel that fails (asv
records null) where it had succeeded fails the gate too. Exit: 0 pass, 1 drop or failure,
2 bad input (missing or malformed results).
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

from . import stats
from .history import HistoryError, finite, load_runs, resolve_machine

GATED = {"track_tflops": "TFLOPS", "track_pct_of_cublas": "% of cuBLAS"}
SUITE_CLASS = "Kernels"


@dataclass(frozen=True)
class GateConfig:
    k: float = 4.0
    min_rel: float = 0.02
    window: int = 10
    confirm_runs: int = 2
    confirm: bool = True


@dataclass
class Row:
    kernel: str
    size: str
    metric: str
    n_hist: int
    centre: float | None
    new: float | None
    change: float | None       # relative, (new - centre) / centre
    bound: float | None        # relative drop that would be flagged
    verdict: str               # ok | improved | drop? | DROP | noise | FAILED | new | skipped
    note: str = ""
    remeasured: float | None = None


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


def evaluate(runs, cfg: GateConfig, commit: str | None = None) -> tuple[list[Row], object]:
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
    earlier = [r for r in runs[:idx] if r.commit != new_run.commit][-cfg.window:]
    keys = sorted({k for r in runs[: idx + 1] for k in r.points
                   if k[0].split(".")[-1] in GATED and k[0].split(".")[-2] == SUITE_CLASS})
    rows = []
    for name, params in keys:
        if len(params) != 2:
            continue
        kernel, size = params
        hist = [r.points[(name, params)] for r in earlier if (name, params) in r.points]
        new = new_run.points.get((name, params))
        if new is None:
            continue  # no longer benchmarked (kernel or size removed)
        verdict, centre, change, bound = judge(hist, new, cfg)
        rows.append(Row(kernel, size, GATED[name.split(".")[-1]],
                        len([p for p in hist if finite(p.value)]), centre, new.value,
                        change, bound, verdict))
    return rows, new_run


def confirm(rows: list[Row], cfg: GateConfig, log=print) -> None:
    """Re-measure flagged series on the GPU; mark them DROP (confirmed) or noise."""
    cands = [r for r in rows if r.verdict == "drop?"]
    if not cands:
        return
    from .device import probe
    ok, why = probe() if cfg.confirm else (False, "confirmation disabled")
    if not ok:
        for r in cands:
            r.verdict, r.note = "DROP", f"unconfirmed: {why}"
        return
    from .sweep import derived, problems_from_sizes, sweep
    from .track import POLICY
    by_kernel: dict[str, list[str]] = {}
    for r in cands:
        by_kernel.setdefault(r.kernel, [])
        if r.size not in by_kernel[r.kernel]:
            by_kernel[r.kernel].append(r.size)
    got: dict[tuple, list] = {}
    for i in range(cfg.confirm_runs):
        for kernel, sizes in by_kernel.items():
            log(f"regress: re-measuring {kernel} at {', '.join(sizes)} ({i + 1}/{cfg.confirm_runs})")
            res = sweep([kernel], problems_from_sizes(sizes), POLICY)
            for rec in res["records"]:
                d = derived(rec)
                got.setdefault((kernel, rec["size"], "TFLOPS"), []).append(d["tflops"])
                got.setdefault((kernel, rec["size"], "% of cuBLAS"), []).append(d["pct"])
    for r in cands:
        vals = [v for v in got.get((r.kernel, r.size, r.metric), []) if v is not None]
        if not vals:
            r.verdict, r.note = "FAILED", "re-measurement failed"
            continue
        v = stats.median(vals)
        r.remeasured = v
        if r.centre - v > r.bound * abs(r.centre):
            r.verdict, r.note = "DROP", f"confirmed: re-measured {v:.4g}"
        else:
            r.verdict, r.note = "noise", f"not confirmed: re-measured {v:.4g}"


def render(rows: list[Row], new_run) -> str:
    from .report import table

    def f(x, pct=False):
        if x is None:
            return "-"
        return f"{100 * x:+.2f} %" if pct else f"{x:.4g}"

    body = [[r.kernel, r.size, r.metric, f"{f(r.centre)} (n={r.n_hist})", f(r.new),
             f(r.change, True), f(None if r.bound is None else -r.bound, True),
             r.verdict, r.note] for r in rows]
    head = f"gemm regress: commit {new_run.commit[:10]} against the history before it\n"
    return head + table(["kernel", "size", "metric", "history median", "new", "change",
                         "flag at", "verdict", "note"], body, "llllrrrll")


def add_arguments(p) -> None:
    p.add_argument("--results", default="results", help="asv results directory")
    p.add_argument("--machine", default=None, help="machine name (default: the only one)")
    p.add_argument("--commit", default=None, help="commit to judge (default: the newest run)")
    p.add_argument("--k", type=float, default=GateConfig.k, help="noise multiple (default 4)")
    p.add_argument("--min-rel", type=float, default=GateConfig.min_rel,
                   help="smallest relative drop flagged (default 0.02)")
    p.add_argument("--window", type=int, default=GateConfig.window,
                   help="earlier commits in the history (default 10)")
    p.add_argument("--confirm-runs", type=int, default=GateConfig.confirm_runs)
    p.add_argument("--no-confirm", action="store_true", help="fail on flagged drops unmeasured")
    p.add_argument("--json", help="write the verdicts here")
    p.add_argument("--all", action="store_true", help="show every series, not only changes")


def main(args) -> int:
    from pathlib import Path
    if args.k <= 0 or not 0 <= args.min_rel < 1 or args.window < 1 or args.confirm_runs < 1:
        print("gemm regress: --k > 0, 0 <= --min-rel < 1, --window >= 1, --confirm-runs >= 1",
              file=sys.stderr)
        return 2
    cfg = GateConfig(args.k, args.min_rel, args.window, args.confirm_runs, not args.no_confirm)
    try:
        machine = resolve_machine(args.results, args.machine)
        runs, _ = load_runs(args.results, machine)
        rows, new_run = evaluate(runs, cfg, args.commit)
    except HistoryError as exc:
        print(f"gemm regress: {exc}", file=sys.stderr)
        return 2
    confirm(rows, cfg, log=lambda s: print(s, file=sys.stderr, flush=True))
    shown = rows if args.all else [r for r in rows if r.verdict not in ("ok",)]
    print(render(shown, new_run) if shown else
          f"gemm regress: commit {new_run.commit[:10]}: every series within noise of its history")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    print(f"\n{len(rows)} series on {machine}: "
          + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    if args.json:
        Path(args.json).write_text(json.dumps({"commit": new_run.commit, "machine": machine,
                                               "config": asdict(cfg),
                                               "rows": [asdict(r) for r in rows]}, indent=1))
    failed = [r for r in rows if r.verdict in ("DROP", "FAILED")]
    for r in failed:
        print(f"REGRESSION: {r.kernel} at {r.size}: {r.metric} {r.verdict} "
              f"({'' if r.change is None else f'{100 * r.change:+.2f} %'} {r.note})".rstrip())
    return 1 if failed else 0
