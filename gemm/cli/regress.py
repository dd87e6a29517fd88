"""`gemm regress`: the gate over the recorded history, as a command: the arguments as a
gemm.track.judge.Request, its Report printed (the workflow is gemm.track.judge's).

Exit 0: pass; 1: a confirmed drop, a failure, a missing series, an empty run (or, with
--strict, an UNRESOLVED A/B); 2: bad input (missing or malformed results, bad settings).
--json writes the verdicts (schema gemm.regress/1), which the ci scripts read.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from ..core import metrics
from ..core.problem import SizeClass
from ..track import anchor as anchors
from ..track.gate import MIN_EFFECT, GateConfig, Verdict
from ..track.judge import BadRequest, Report, Request, judge
from ..record import unresolved
from ..store.history import gpu_arch
from .tables import regress_table


def add_arguments(p) -> None:
    p.add_argument("--results", default="results", help="asv results directory")
    p.add_argument("--machine", default=None, help="machine name (default: the only one)")
    p.add_argument("--commit", default=None, help="commit to judge (default: the newest run)")
    p.add_argument("--kernels", nargs="+", default=(), metavar="K",
                   help="judge only these kernels (a run narrowed on purpose, e.g. asv -b)")
    p.add_argument("--sizes", nargs="+", default=(), metavar="S", help="judge only these sizes")
    p.add_argument("--min-effect", nargs="+", default=[], metavar="CLASS=REL",
                   help="the floor of the smallest drop the gate must catch, per size class "
                        "(defaults: " + ", ".join(f"{k}={v}" for k, v in MIN_EFFECT.items())
                        + "); a series whose calibrated noise cannot decide it within "
                        "--max-rounds gets a wider one, shown; the screen is half of it")
    p.add_argument("--alpha", type=float, default=GateConfig.alpha,
                   help="family-wise error rate of the commit's A/B (default 1e-3)")
    p.add_argument("--min-rounds", type=int, default=GateConfig.min_rounds,
                   help="A B B A rounds before the first decision (default 1)")
    p.add_argument("--max-rounds", type=int, default=GateConfig.max_rounds,
                   help=f"rounds before a candidate is UNRESOLVED (default {GateConfig.max_rounds})")
    p.add_argument("--strict", action="store_true", help="an UNRESOLVED candidate fails too")
    p.add_argument("--mean-rule", action="store_true",
                   help="decide every series by the mean of its processes' log values; by "
                   "default a series whose calibration shows a heavy tail (a few processes in "
                   "a slow state) is decided by trimmed means (Yuen)")
    p.add_argument("--budget", type=float, default=GateConfig.budget_s, metavar="S",
                   help="A/B wall time (default 180): each round takes what fits in the "
                   "time left (what a round costs is learned as measured), the most "
                   "suspicious first; the first round at least one comparison; past it, what "
                   "is on course for a DROP (--overtime)")
    p.add_argument("--overtime", type=float, default=GateConfig.overtime_s, metavar="S",
                   help="past the budget, what is on course for a DROP (its estimate past the "
                   "margin) is measured on, alone, in rounds that fit in S seconds more, within "
                   "--max-rounds (default 60; 0: everything stops at the budget)")
    p.add_argument("--window", type=int, default=GateConfig.window,
                   help="earlier commits in the history (default 10)")
    p.add_argument("--anchor", default=None, metavar="REV",
                   help=f"compare with this commit too (default: the newest tag "
                        f"{anchors.ANCHOR_TAGS}, else {anchors.ANCHOR_FILE})")
    p.add_argument("--no-anchor", action="store_true", help="no anchor comparison")
    p.add_argument("--calibration", default="calibration",
                   help="where runners' calibrations are kept (default calibration/)")
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


def _per_class(items: list[str], default: dict, what: str) -> dict:
    out = dict(default)
    names = list(SizeClass)
    for item in items:
        name, _, val = item.partition("=")
        if name not in names:
            raise BadRequest(f"--{what}: unknown size class {name!r} (classes: "
                             f"{', '.join(names)})")
        try:
            out[name] = float(val)
        except ValueError:
            raise BadRequest(f"--{what}: {item!r} is not CLASS=NUMBER") from None
    return out


def request(args) -> Request:
    """The arguments as the gate's request (BadRequest: a --min-effect it cannot read)."""
    cfg = GateConfig(args.window, _per_class(args.min_effect, MIN_EFFECT, "min-effect"),
                     args.alpha, args.min_rounds, args.max_rounds, not args.no_confirm,
                     args.strict, args.budget, robust=not args.mean_rule,
                     overtime_s=args.overtime)
    return Request(args.results, args.machine, args.commit, tuple(args.kernels),
                   tuple(args.sizes), cfg, args.anchor, not args.no_anchor, args.calibration,
                   args.repo, args.verdicts, args.record_verdicts, _same_build(args.results))


def _same_build(results: str):
    """The gate's compiler (gemm.explain.identity), with each machine's GPU architecture as
    recorded (results/<machine>/machine.json), for kernels built for the GPU they run on."""
    def ask(repo, older: str, newer: str, kernel: str, machine: str) -> bool:
        from ..explain.identity import same_machine_code
        return same_machine_code(str(Path(repo).resolve()), older, newer, kernel, machine,
                                 gpu_arch(results, machine))
    return ask


def _gpu_name():
    from ..measure.facts import gpu_name
    return gpu_name()


def _gpu_identity():
    from ..measure.facts import gpu_identity
    return gpu_identity()


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _screened(rep: Report) -> None:
    """What the judgement stands on, said before the A/B."""
    print("gemm regress: anchor: "
          + (f"{rep.anchor[:10]} ({rep.anchor_source})" if rep.anchor else rep.anchor_source))
    if rep.narrowed:
        print(f"gemm regress: narrowed on purpose to {rep.narrowed}; other series are not judged")
    if rep.empty:
        return
    if not rep.calibration:
        print(f"gemm regress: minimum effects are the size classes' floors: "
              f"{rep.calibration_note}")
    if rep.code_changed:
        print(f"gemm regress: {rep.code_changed} large series of kernels whose code or build "
              f"changed since their reference go to the A/B (past the screen or not)")
    if rep.same_build:
        print(f"gemm regress: {rep.same_build} large series of kernels whose sources changed "
              f"but not their machine code (nvcc: SASS, resources, launch) need no A/B for it")
    if rep.carried:
        print(f"gemm regress: {rep.carried} series UNRESOLVED at the commits before are "
              f"measured first ({rep.pooled} with the rounds kept against the anchor, same code)")


def main(args) -> int:
    try:
        rep = judge(request(args), log=_log, on_screened=_screened, gpu_name=_gpu_name,
                    gpu_identity=_gpu_identity)
    except BadRequest as exc:
        print(f"gemm regress: {exc}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps(rep.to_json(), indent=1))
    if rep.empty:
        print(f"EMPTY: {rep.empty}")
        return rep.exit
    rows = rep.rows
    shown = rows if args.all else [r for r in rows if r.verdict != Verdict.OK]
    config = asdict(rep.config)   # an UNRESOLVED row that does not fail: its short note
    notes = [unresolved.note(asdict(r), config) for r in shown]
    print(regress_table(shown, rep.commit, notes) if shown else
          f"gemm regress: commit {rep.commit[:10]}: every series within noise of its history")
    for r in rows:
        steps = [f"{cp['commit'][:10]} {100 * cp['change']:+.2f} %" for cp in r.changepoints
                 if "commit" in cp]
        if steps:   # over the recorded history: code or machine; the A/B verdicts tell which
            print(f"steps: {r.kernel} at {r.size}, {r.label}: " + ", ".join(steps))
    print(f"\n{len(rows)} series on {rep.machine}: "
          + ", ".join(f"{n} {v}" for v, n in sorted(rep.counts.items())))
    if rep.unresolved:
        print(f"UNRESOLVED: {len(rep.unresolved)} series (a large one fails once UNRESOLVED at "
              f"{rep.config.carry_commits} commits running; the next commit measures it "
              f"first): " + _listed(rep.unresolved, lambda r: f"{r.kernel} at {r.size} ({r.label}"
                                    + (f", {len(r.carried) + 1} commits running"
                                       if r.carried else "") + ")"))
        why = unresolved.lines([asdict(r) for r in rows], config)
        for line in why:
            print(f"  {line}")
        if why:
            print("  (their whole notes: gemm show --full on the --json report)")
    stuck = [r for r in rep.failing if r.verdict == Verdict.UNRESOLVED]
    for r in rep.failing if len(stuck) <= FLOOD else [r for r in rep.failing
                                                      if r.verdict != Verdict.UNRESOLVED]:
        change = "" if r.change is None else f"{100 * r.change:+.2f} %"
        if r.anchor_change is not None:
            change += f" (anchor {r.anchor[:10]}: {100 * r.anchor_change:+.2f} %)"
        print(f"REGRESSION: {r.kernel} at {r.size}: {metrics.get(r.metric).label} {r.verdict} "
              f"({change} {r.note})".replace("( ", "(").rstrip())
    if len(stuck) > FLOOD:
        why = ("--strict" if rep.config.strict else
               f"at {rep.config.carry_commits} or more commits running")
        print(f"REGRESSION: {len(stuck)} series UNRESOLVED {why} ({_by_kernel(stuck)}; each in "
              f"the table above, and why under UNRESOLVED): to settle them, docs/ci.md, "
              f"\"When the job fails on UNRESOLVED series\"")
    return rep.exit


FLOOD = 12   # more UNRESOLVED series than this are counted per kernel, not listed


def _by_kernel(rows) -> str:
    return ", ".join(f"{k} {n}" for k, n in Counter(r.kernel for r in rows).items())


def _listed(rows, name) -> str:
    """Each row named, or, past FLOOD of them, counted per kernel."""
    if len(rows) <= FLOOD:
        return ", ".join(map(name, rows))
    return f"{_by_kernel(rows)} (each in the table above)"
