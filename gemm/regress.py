"""The gate: is the newest commit slower (or wrong) anywhere, against the recorded history?

For every kernel x size, TFLOPS and % of cuBLAS (higher is better) of the new run are compared
with the history of the same series on the same machine (the last `window` earlier commits):

    centre = median(history)        noise = max(1.4826 * MAD(history), within-run sigma)
    (MAD over two points is half their distance: a history that disagrees with itself widens the
    bound instead of being trusted.)
    drop   = centre - new           flagged when drop > max(k * noise, min_rel * centre)

(within-run sigma: the median of the runs' (q75 - q25) / 1.349, asv's recorded quartiles.)

A flagged drop may be the code or the machine (the history was recorded on other GPUs of the
same name). Where a GPU is present it is confirmed by an A/B (gemm.abtest): the new commit's
code against the code of the reference commit (the earlier run nearest the history median),
both measured here, alternately, `confirm_runs` times each; it fails the gate only if the new
code is slower than the reference code by more than the same bound. Where no A/B can be made
(no git checkout of the reference) the new code alone is re-measured against the history.
Without a GPU, a verdict recorded by an earlier confirming run for this exact value
(gemm.verdicts) is used; otherwise the drop fails as unconfirmed. A kernel that fails (asv
records null) where it had succeeded fails the gate too. Exit: 0 pass, 1 drop or failure,
2 bad input (missing or malformed results).
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass

from . import stats, verdicts
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
    reference: str | None = None      # commit of the earlier run nearest the history median
    ref_value: float | None = None    # its recorded value
    ab_reference: float | None = None  # A/B medians measured here: the reference code ...
    ab_new: float | None = None        # ... and the new code


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
        pairs = [(r.commit, r.points[(name, params)]) for r in earlier if (name, params) in r.points]
        hist = [p for _, p in pairs]
        new = new_run.points.get((name, params))
        if new is None:
            continue  # no longer benchmarked (kernel or size removed)
        verdict, centre, change, bound = judge(hist, new, cfg)
        ref, ref_value = reference(pairs, centre) if centre is not None else (None, None)
        rows.append(Row(kernel, size, GATED[name.split(".")[-1]],
                        len([p for p in hist if finite(p.value)]), centre, new.value,
                        change, bound, verdict, reference=ref, ref_value=ref_value))
    return rows, new_run


def confirm(rows: list[Row], cfg: GateConfig, new_commit: str, repo=".", recorded=None,
            log=print) -> list[Row]:
    """Decide flagged rows: DROP (confirmed) or noise. Returns those measured on a GPU here.

    `recorded`: {(kernel, size, metric): row dict} from gemm.verdicts, used without a GPU.
    """
    cands = [r for r in rows if r.verdict == "drop?"]
    if not cands:
        return []
    from .device import probe
    ok, why = probe() if cfg.confirm else (False, "confirmation disabled")
    if not ok:
        for r in cands:
            old = (recorded or {}).get((r.kernel, r.size, r.metric))
            if old and old.get("new") == r.new and old.get("verdict") in ("DROP", "noise"):
                r.verdict = old["verdict"]
                r.remeasured, r.ab_reference, r.ab_new = (old.get("remeasured"),
                                                          old.get("ab_reference"), old.get("ab_new"))
                r.note = f"recorded {old.get('date', '?')[:10]}: {old.get('note', '')}"
            else:
                r.verdict, r.note = "DROP", f"unconfirmed: {why}"
        return []
    from . import abtest
    by_ref: dict[str, list[Row]] = {}
    for r in cands:
        by_ref.setdefault(r.reference, []).append(r)
    for ref, group in by_ref.items():
        try:
            got = abtest.run(repo, ref, new_commit, _series(group), cfg.confirm_runs, log)
        except abtest.ABError as exc:
            log(f"regress: no A/B against {str(ref)[:10]}: {exc}; re-measuring the new code alone")
            _remeasure_alone(group, cfg, log, f"no A/B ({str(exc)[:80]})")
            continue
        for r in group:
            _judge_ab(r, got.get((r.kernel, r.size, r.metric), {}))
    return cands


def _series(rows: list[Row]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r.kernel, [])
        if r.size not in out[r.kernel]:
            out[r.kernel].append(r.size)
    return out


def _judge_ab(r: Row, got: dict) -> None:
    new = [v for v in got.get("new", []) if v is not None]
    ref = [v for v in got.get("reference", []) if v is not None]
    if not new:
        r.verdict, r.note = "FAILED", "the new code failed when re-measured"
        return
    r.remeasured = r.ab_new = stats.median(new)
    if not ref:  # the reference code failed here: judge the new code against the history
        _versus_history(r, r.ab_new, f"the reference {r.reference[:10]} failed in the A/B")
        return
    r.ab_reference = stats.median(ref)
    change = (r.ab_new - r.ab_reference) / r.ab_reference
    ab = f"A/B vs {r.reference[:10]} here: {r.ab_reference:.4g} -> {r.ab_new:.4g} ({100 * change:+.2f} %)"
    if -change > r.bound:
        r.verdict, r.note = "DROP", f"confirmed: {ab}"
    else:
        r.verdict, r.note = "noise", f"not confirmed: {ab}; the reference recorded {r.ref_value:.4g}"


def _versus_history(r: Row, v: float, why: str) -> None:
    """Judge a re-measured value of the new code against the history's bound."""
    r.remeasured = v
    drop = r.centre - v > r.bound * abs(r.centre)
    r.verdict = "DROP" if drop else "noise"
    r.note = f"{'confirmed' if drop else 'not confirmed'}: re-measured {v:.4g}; {why}"


def _remeasure_alone(cands: list[Row], cfg: GateConfig, log, why: str) -> None:
    """Re-measure the new code only (the working tree's) and judge it against the history."""
    from .abtest import METRICS
    from .sweep import derived, problems_from_sizes, sweep
    from .track import POLICY
    got: dict[tuple, list] = {}
    for i in range(cfg.confirm_runs):
        for kernel, sizes in _series(cands).items():
            log(f"regress: re-measuring {kernel} at {', '.join(sizes)} ({i + 1}/{cfg.confirm_runs})")
            res = sweep([kernel], problems_from_sizes(sizes), POLICY)
            for rec in res["records"]:
                d = derived(rec)
                for metric, key in METRICS.items():
                    got.setdefault((kernel, rec["size"], metric), []).append(d[key])
    for r in cands:
        vals = [v for v in got.get((r.kernel, r.size, r.metric), []) if v is not None]
        if vals:
            _versus_history(r, stats.median(vals), why)
        else:
            r.verdict, r.note = "FAILED", "re-measurement failed"


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
    p.add_argument("--no-confirm", action="store_true", help="measure nothing: use kept verdicts, else fail flagged drops")
    p.add_argument("--repo", default=".",
                   help="git checkout holding the recorded commits, for the A/B (default .)")
    p.add_argument("--verdicts", default="verdicts",
                   help="where confirmed verdicts are kept (default verdicts/)")
    p.add_argument("--record-verdicts", action="store_true",
                   help="keep this run's GPU verdicts in --verdicts, for later runs without a GPU")
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
    measured = confirm(rows, cfg, new_run.commit, args.repo,
                       recorded=verdicts.load(args.verdicts, machine, new_run.commit),
                       log=lambda s: print(s, file=sys.stderr, flush=True))
    if measured and args.record_verdicts:
        from .device import Clocks
        path = verdicts.save(args.verdicts, machine, new_run.commit,
                             [asdict(r) for r in measured], Clocks().identity())
        print(f"gemm regress: verdicts kept in {path}", file=sys.stderr)
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
