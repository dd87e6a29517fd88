"""`gemm explain KERNEL --size S [--old REV] [--new REV] [--static | --no-counters]`: why a
kernel's speed changed between two commits, read from what nvcc made of each (no GPU):
resources and occupancy per entry point, SASS mix, the K loop's diff, the launch; where a GPU
answers (and --static is not given), each side timed with its own tree's code, the machine
sampled, and one launch profiled with ncu (counters); one summary line.
--json writes schema gemm.explain/1 (docs/explain.md). --attach / --attach-report put its
compact part on the confirmed DROP rows of the kernel and size in the commit's kept verdict
file and in a gate report (gemm.store.verdicts), where gemm show, gemm summary and the site
print it; where the DROP row of that report or file keeps the machine over the A/B against
the old side (each arm's NVML figures), the explanation includes it (gemm.explain.abmachine)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(p) -> None:
    p.add_argument("kernel", help="kernel name or unique prefix (as registered in each tree)")
    p.add_argument("--size", required=True, help="N (square) or MxNxK: the launch to explain")
    p.add_argument("--new", default="HEAD",
                   help="git revision of the new side (default HEAD; '.' the working tree)")
    p.add_argument("--old", default=None,
                   help="git revision of the old side (default: the parent of --new, or --new "
                        "itself when --old-define/--new-define/--define are given)")
    p.add_argument("--static", action="store_true",
                   help="compiled code only: nothing runs on a GPU (the default where none "
                        "answers)")
    p.add_argument("--counters", action=argparse.BooleanOptionalAction, default=None,
                   help="profile one launch of each side with ncu (--clock-control none) "
                        "where a GPU answers and ncu is on the PATH (default: yes, unless "
                        "--static); --no-counters: timed runs and the machine only")
    p.add_argument("--seconds", type=float, default=1.0,
                   help="each side's timed run, seconds (default 1)")
    p.add_argument("--run-timeout", type=float, default=150.0, metavar="S",
                   help="each GPU process (timed run, ncu run) at most S seconds (default 150)")
    p.add_argument("--ncu-output", metavar="FILE",
                   help="append each ncu run's command line and output (its raw CSV) to FILE")
    p.add_argument("--define", action="append", default=[], metavar="NAME=V",
                   help="override a constant on both sides (repeatable)")
    p.add_argument("--old-define", action="append", default=[], metavar="NAME=V",
                   help="override a constant of the old side (repeatable)")
    p.add_argument("--new-define", action="append", default=[], metavar="NAME=V",
                   help="override a constant of the new side (repeatable)")
    p.add_argument("--arch", default="sm_90",
                   help="target for kernels registered as 'native' (default sm_90, the H200)")
    p.add_argument("--gpu", default="h200",
                   help="the tuned table tuned kernels use (kernels/tuned/<gpu>.toml)")
    p.add_argument("--repo", default=".", help="the git repository (default .)")
    p.add_argument("--json", metavar="FILE", help="write the explanation (gemm.explain/1)")
    p.add_argument("--brief", action="store_true", help="print the summary line only")
    p.add_argument("--attach", metavar="VERDICTS_DIR",
                   help="attach the explanation to the DROP rows of KERNEL at --size in "
                        "VERDICTS_DIR/MACHINE/COMMIT.json (gemm regress --record-verdicts' "
                        "file); needs --machine")
    p.add_argument("--machine", help="with --attach: the machine whose verdicts these are")
    p.add_argument("--commit",
                   help="with --attach: the judged commit (default: the new side's commit)")
    p.add_argument("--attach-report", metavar="FILE",
                   help="attach it to the DROP rows of KERNEL at --size in a gate report "
                        "(gemm regress --json, gemm.regress/1) too")


def run(args) -> int:
    from ..explain import GpuOptions, explain
    from ..explain.build import ExplainError, parse_defines
    from ..explain.render import render
    from ..explain.report import summarise
    if args.static and args.counters:
        print("gemm explain: --static runs nothing on the GPU: not with --counters",
              file=sys.stderr)
        return 2
    if args.attach and not args.machine:
        print("gemm explain: --attach needs --machine", file=sys.stderr)
        return 2
    on_gpu = None if args.static else GpuOptions(counters=args.counters is not False,
                                                 seconds=args.seconds,
                                                 timeout_s=args.run_timeout,
                                                 ncu_output=args.ncu_output)
    try:
        both = parse_defines(args.define)
        old_d = {**both, **parse_defines(args.old_define)}
        new_d = {**both, **parse_defines(args.new_define)}
        ex = explain(args.kernel, args.size, old=args.old, new=args.new, repo=args.repo,
                     old_defines=old_d, new_defines=new_d, arch=args.arch, gpu=args.gpu,
                     on_gpu=on_gpu, log=lambda msg: print(msg, file=sys.stderr, flush=True))
    except ExplainError as exc:
        print(f"gemm explain: {exc}", file=sys.stderr)
        return 2
    if args.attach or args.attach_report:
        ex.ab_machine = ab_machine(args, ex)
        ex.summary = summarise(ex)
    if args.json:   # first: the document is kept even where stdout goes away
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(ex.to_json(), indent=1) + "\n")
    if args.attach or args.attach_report:
        attach(args, ex)
    print(f"{ex.kernel} at {ex.size}: {ex.summary}" if args.brief else render(ex))
    return 0


def ab_machine(args, ex):
    """The machine over the gate's A/B of the sides explained (gemm.explain.abmachine), from
    the rows the explanation goes to: the gate report's, else the kept verdict file's; None
    where neither keeps it."""
    from ..explain.abmachine import from_rows
    from ..store import verdicts
    paths = [args.attach_report] if args.attach_report else []
    if args.attach and (args.commit or ex.new.commit):
        paths.append(verdicts.path_for(args.attach, args.machine, args.commit or ex.new.commit))
    for path in paths:
        try:
            rows = json.loads(Path(path).read_text()).get("rows")
        except (OSError, ValueError, AttributeError):
            continue
        got = from_rows(rows, ex.new.kernel, args.size, ex.old.commit)
        if got is not None:
            return got
    return None


def attach(args, ex) -> None:
    """Put the explanation on the DROP rows it explains; where it finds none, a line on
    stderr (the explanation itself stands: the exit status stays 0)."""
    from ..explain.report import attachment
    from ..store import verdicts
    doc, kernel, size = attachment(ex.to_json()), ex.new.kernel, args.size

    def said(where, n: int) -> None:
        print(f"gemm explain: attached to {n} DROP row(s) of {kernel} at {size} in {where}"
              if n else f"gemm explain: not attached: {where} has no DROP row of {kernel} "
              f"at {size} (or is not there)", file=sys.stderr)
    if args.attach:
        commit = args.commit or ex.new.commit
        if not commit:
            print("gemm explain: --attach: the new side is the working tree: give --commit",
                  file=sys.stderr)
        else:
            said(verdicts.path_for(args.attach, args.machine, commit),
                 verdicts.attach_explanation(args.attach, args.machine, commit, kernel, size,
                                             doc))
    if args.attach_report:
        said(args.attach_report, verdicts.attach_to_report(args.attach_report, kernel, size,
                                                           doc))
