"""`gemm explain KERNEL --size S [--old REV] [--new REV] --static`: why a kernel's speed
changed between two commits, read from what nvcc made of each (no GPU): resources and
occupancy per entry point, SASS mix, the K loop's diff, the launch, one summary line.
--json writes schema gemm.explain/1 (docs/explain.md)."""
from __future__ import annotations

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
                   help="compiled code only (the only mode yet: ncu counters need a GPU)")
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
    from ..explain import explain
    from ..explain.build import ExplainError, parse_defines
    from ..explain.render import render
    try:
        both = parse_defines(args.define)
        old_d = {**both, **parse_defines(args.old_define)}
        new_d = {**both, **parse_defines(args.new_define)}
        ex = explain(args.kernel, args.size, old=args.old, new=args.new, repo=args.repo,
                     old_defines=old_d, new_defines=new_d, arch=args.arch, gpu=args.gpu)
    except ExplainError as exc:
        print(f"gemm explain: {exc}", file=sys.stderr)
        return 2
    print(f"{ex.kernel} at {ex.size}: {ex.summary}" if args.brief else render(ex))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(ex.to_json(), indent=1) + "\n")
    return 0
