"""`gemm regress`: the gate over the recorded history (gemm.track), as a command.

Exit 0: pass; 1: a confirmed drop, a failure, a missing series, an empty run (or, with
--strict, an UNRESOLVED A/B); 2: bad input (missing or malformed results, bad settings).
--json writes the verdicts (schema gemm.regress/1), which the ci scripts read.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from ..core import metrics
from ..core.metrics import Series
from ..track import anchor as anchors
from ..track import calibration, carry, confirm, verdicts
from ..core.problem import SizeClass
from ..track.gate import (MIN_EFFECT, GateConfig, Narrowing, Verdict, evaluate, failed,
                          measured_nothing, select)
from ..track.history import HistoryError, finite, load_runs, resolve_machine
from .common import judged_kernels
from .tables import regress_table

SCHEMA = "gemm.regress/1"


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
                   "a slow state) is decided by Huber locations")
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


def _write_json(path, doc) -> None:
    if path:
        Path(path).write_text(json.dumps(doc, indent=1))


def _per_class(items: list[str], default: dict, what: str) -> dict:
    out = dict(default)
    names = list(SizeClass)
    for item in items:
        name, _, val = item.partition("=")
        if name not in names:
            raise ValueError(f"--{what}: unknown size class {name!r} (classes: {', '.join(names)})")
        try:
            out[name] = float(val)
        except ValueError:
            raise ValueError(f"--{what}: {item!r} is not CLASS=NUMBER") from None
    return out


def _changepoints(rows, runs, new_run) -> None:
    """Where each flagged or drifting series stepped, over its history up to the judged run."""
    upto = runs[:runs.index(new_run) + 1]
    for r in rows:
        drifting = (r.verdict in (Verdict.DROP, Verdict.UNRESOLVED, Verdict.CANDIDATE)
                    or (r.anchor_change is not None and r.bound is not None
                        and -r.anchor_change > r.bound))
        if not drifting:
            continue
        key = Series(r.kernel, r.size, r.metric)
        pts = [(run.commit, run.points[key].value) for run in upto
               if key in run.points and finite(run.points[key].value)]
        try:
            r.changepoints = anchors.changepoints(pts)
        except ImportError as exc:   # the [track] extra brings ruptures
            r.changepoints = [{"error": f"no change-point detection here ({exc})"}]


def main(args) -> int:
    try:
        cfg = GateConfig(args.window, _per_class(args.min_effect, MIN_EFFECT, "min-effect"),
                         args.alpha, args.min_rounds, args.max_rounds, not args.no_confirm,
                         args.strict, args.budget, robust=not args.mean_rule,
                         overtime_s=args.overtime)
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
        narrow = Narrowing(judged_kernels(kernel_names, known), tuple(args.sizes))
        anchor, anchor_src = (None, "no anchor (--no-anchor)") if args.no_anchor else \
            anchors.resolve(args.repo, args.anchor)
        judged_run, earlier = select(runs, args.commit)
        judged = judged_run.commit
        if anchor:
            why_not = anchors.unusable(args.repo, anchor, judged, {r.commit for r in earlier})
            if why_not:
                anchor_src = f"the anchor {anchor[:10]} ({anchor_src}) {why_not}; not used"
                anchor = None
        from ..measure.facts import gpu_name
        # the calibration must be this runner's: same asv machine, and a GPU of the name it
        # was made on (unknown without a GPU, where no A/B can run anyway)
        cal, why_not = calibration.load(args.calibration, machine, gpu_name=gpu_name())
        rows, new_run = evaluate(runs, suite, cfg, args.commit, narrow, anchor, cal)
        carried = carry.carry(rows, args.verdicts, machine, earlier)
        pooled = carry.evidence(carried, args.verdicts, machine, args.repo, judged)
    except (HistoryError, ValueError) as exc:
        print(f"gemm regress: {exc}", file=sys.stderr)
        return 2
    doc = {"schema": SCHEMA, "commit": new_run.commit, "machine": machine,
           "config": asdict(cfg), "narrowed": str(narrow) if narrow else None,
           "anchor": anchor, "anchor_source": anchor_src,
           "calibration": cal.date if cal else None, "calibration_note": why_not, "rows": []}
    print(f"gemm regress: anchor: {anchor[:10] + ' (' + anchor_src + ')' if anchor else anchor_src}")
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
    if not cal:
        print(f"gemm regress: minimum effects are the size classes' floors: {why_not}")
    if carried:
        print(f"gemm regress: {len(carried)} series UNRESOLVED at the commits before are "
              f"measured first ({pooled} with the rounds kept against the anchor, same code)")
    if any(r.verdict == Verdict.CANDIDATE for r in rows) and cfg.confirm:
        log(f"gemm regress: calibration: {'from ' + cal.date if cal else why_not}")
    measured = confirm.decide(rows, cfg, new_run.commit, args.repo,
                              kept=verdicts.load(args.verdicts, machine, new_run.commit), log=log,
                              calibration=cal)
    _changepoints(rows, runs, new_run)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    unconfirmed = any(r.unconfirmed for r in rows)
    if args.record_verdicts and (measured or not unconfirmed):
        from ..measure.facts import gpu_identity
        # the commit's summary (the site's) only from a whole judgement: not from a narrowed
        # run, nor from one that could not decide its candidates here
        summary = None if narrow or unconfirmed else {
            "counts": counts, "anchor": anchor, "exit": 1 if failed(rows, cfg) else 0,
            "rows": [asdict(r) for r in rows if r.verdict != Verdict.OK]}
        path = verdicts.save(args.verdicts, machine, new_run.commit,
                             [asdict(r) for r in measured], gpu_identity() if measured else None,
                             summary=summary)
        log(f"gemm regress: verdicts kept in {path}")
    shown = rows if args.all else [r for r in rows if r.verdict != Verdict.OK]
    print(regress_table(shown, new_run.commit) if shown else
          f"gemm regress: commit {new_run.commit[:10]}: every series within noise of its history")
    for r in rows:
        steps = [f"{cp['commit'][:10]} {100 * cp['change']:+.2f} %" for cp in r.changepoints
                 if "commit" in cp]
        if steps:   # over the recorded history: code or machine; the A/B verdicts tell which
            print(f"steps: {r.kernel} at {r.size}, {r.label}: " + ", ".join(steps))
    print(f"\n{len(rows)} series on {machine}: "
          + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    unresolved = [r for r in rows if r.verdict == Verdict.UNRESOLVED]
    if unresolved:
        print(f"UNRESOLVED: {len(unresolved)} series (a large one fails once UNRESOLVED at "
              f"{cfg.carry_commits} commits running; the next commit measures it first): "
              + ", ".join(f"{r.kernel} at {r.size} ({r.label}"
                          + (f", {len(r.carried) + 1} commits running" if r.carried else "")
                          + ")" for r in unresolved))
    bad = failed(rows, cfg)
    for r in bad:
        change = "" if r.change is None else f"{100 * r.change:+.2f} %"
        if r.anchor_change is not None:
            change += f" (anchor {r.anchor[:10]}: {100 * r.anchor_change:+.2f} %)"
        print(f"REGRESSION: {r.kernel} at {r.size}: {metrics.get(r.metric).label} {r.verdict} "
              f"({change} {r.note})".replace("( ", "(").rstrip())
    code = 1 if bad else 0
    _write_json(args.json, {**doc, "rows": [asdict(r) for r in rows], "counts": counts,
                            "exit": code})
    return code
