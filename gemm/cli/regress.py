"""`gemm regress`: the gate over the recorded history (gemm.track), as a command.

Exit 0: pass; 1: a confirmed drop, a failure, a missing series or an empty run; 2: bad input
(missing or malformed results, bad settings). --json writes the verdicts (schema
gemm.regress/1), which the ci scripts read.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from ..core import metrics
from ..track import confirm, verdicts
from ..track.gate import GateConfig, Narrowing, evaluate, failed, measured_nothing
from ..track.history import HistoryError, load_runs, resolve_machine
from .tables import regress_table

SCHEMA = "gemm.regress/1"


def add_arguments(p) -> None:
    p.add_argument("--results", default="results", help="asv results directory")
    p.add_argument("--machine", default=None, help="machine name (default: the only one)")
    p.add_argument("--commit", default=None, help="commit to judge (default: the newest run)")
    p.add_argument("--kernels", nargs="+", default=(), metavar="K",
                   help="judge only these kernels (a run narrowed on purpose, e.g. asv -b)")
    p.add_argument("--sizes", nargs="+", default=(), metavar="S", help="judge only these sizes")
    p.add_argument("--k", type=float, default=GateConfig.k, help="noise multiple (default 4)")
    p.add_argument("--min-rel", type=float, default=GateConfig.min_rel,
                   help="smallest relative drop flagged (default 0.02)")
    p.add_argument("--window", type=int, default=GateConfig.window,
                   help="earlier commits in the history (default 10)")
    p.add_argument("--confirm-runs", type=int, default=GateConfig.confirm_runs, help="A/B rounds")
    p.add_argument("--no-confirm", action="store_true",
                   help="measure nothing: use kept verdicts, else fail flagged drops")
    p.add_argument("--repo", default=".",
                   help="git checkout holding the recorded commits, for the A/B (default .)")
    p.add_argument("--verdicts", default="verdicts",
                   help="where confirmed verdicts are kept (default verdicts/)")
    p.add_argument("--record-verdicts", action="store_true",
                   help="keep this run's GPU verdicts in --verdicts, for later runs without a GPU")
    p.add_argument("--json", help="write the verdicts here")
    p.add_argument("--all", action="store_true", help="show every series, not only changes")


def _kernel_name(name: str, known: set) -> str:
    """A kernel's full name: as recorded in the history, or the one recorded kernel it is a
    prefix of (05 -> 05_2d_blocktiling), else a registered kernel's."""
    from ..core.registry import get
    if name in known:
        return name
    hits = [k for k in known if k.startswith(name)]
    if len(hits) == 1:
        return hits[0]
    try:
        return get(name).name
    except ValueError:
        return name


def _write_json(path, doc) -> None:
    if path:
        Path(path).write_text(json.dumps(doc, indent=1))


def main(args) -> int:
    cfg = GateConfig(args.k, args.min_rel, args.window, args.confirm_runs, not args.no_confirm)
    try:
        cfg.validate()
    except ValueError as exc:
        print(f"gemm regress: {exc}", file=sys.stderr)
        return 2
    kernel_names = list(args.kernels)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    try:
        machine = resolve_machine(args.results, args.machine)
        runs, suite = load_runs(args.results, machine)
        known = {k.target for r in runs for k in r.points}
        narrow = Narrowing(tuple(_kernel_name(k, known) for k in kernel_names), tuple(args.sizes))
        rows, new_run = evaluate(runs, suite, cfg, args.commit, narrow)
    except HistoryError as exc:
        print(f"gemm regress: {exc}", file=sys.stderr)
        return 2
    doc = {"schema": SCHEMA, "commit": new_run.commit, "machine": machine,
           "config": asdict(cfg), "narrowed": str(narrow) if narrow else None, "rows": []}
    if narrow:
        print(f"gemm regress: narrowed on purpose to {narrow}; other series are not judged")
    if measured_nothing(new_run, narrow):
        why = (f" of the current benchmark versions ({new_run.other_versions} rows were "
               f"measured under another version of the suite's policy or metrics)"
               if new_run.other_versions else "")
        print(f"EMPTY: the run of {new_run.commit[:10]} on {machine} measured nothing"
              + (f" in {narrow}" if narrow else "") + why)
        _write_json(args.json, {**doc, "empty": True, "exit": 1})
        return 1
    measured = confirm.decide(rows, cfg, new_run.commit, args.repo,
                              kept=verdicts.load(args.verdicts, machine, new_run.commit), log=log)
    if measured and args.record_verdicts:
        from ..measure.facts import gpu_identity
        path = verdicts.save(args.verdicts, machine, new_run.commit,
                             [asdict(r) for r in measured], gpu_identity())
        log(f"gemm regress: verdicts kept in {path}")
    shown = rows if args.all else [r for r in rows if r.verdict != "ok"]
    print(regress_table(shown, new_run.commit) if shown else
          f"gemm regress: commit {new_run.commit[:10]}: every series within noise of its history")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    print(f"\n{len(rows)} series on {machine}: "
          + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    bad = failed(rows)
    for r in bad:
        change = "" if r.change is None else f"{100 * r.change:+.2f} %"
        print(f"REGRESSION: {r.kernel} at {r.size}: {metrics.get(r.metric).label} {r.verdict} "
              f"({change} {r.note})".replace("( ", "(").rstrip())
    code = 1 if bad else 0
    _write_json(args.json, {**doc, "rows": [asdict(r) for r in rows], "counts": counts,
                            "exit": code})
    return code
