"""`gemm explain KERNEL --size S [--old REV] [--new REV] [--static | --no-counters]`: why a
kernel's speed changed between two commits, read from what nvcc made of each (no GPU):
resources and occupancy per entry point, SASS mix, the K loop's diff, the launch; where a GPU
answers (and --static is not given), each side timed with its own tree's code, the machine
sampled, and one launch profiled with ncu (counters); one summary line.
--json writes schema gemm.explain/1 (docs/explain.md)."""
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


def run(args) -> int:
    from ..explain import GpuOptions, explain
    from ..explain.build import ExplainError, parse_defines
    from ..explain.render import render
    if args.static and args.counters:
        print("gemm explain: --static runs nothing on the GPU: not with --counters",
              file=sys.stderr)
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
    if args.json:   # first: the document is kept even where stdout goes away
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(ex.to_json(), indent=1) + "\n")
    print(f"{ex.kernel} at {ex.size}: {ex.summary}" if args.brief else render(ex))
    return 0
