"""`gemm measure`: the stable measuring entry point (a gemm.measure/1 document on stdout),
which scripts and the gate's A/B run.
"""
from __future__ import annotations

import json
import sys

from ..core import shapes
from ..core.policy import POLICIES
from .common import (OK_STATUSES, POLICY_HELP, UsageError, _need_gpu, _policy, _problems,
                     _sweep, _targets)


def add_arguments(p) -> None:
    p.add_argument("--kernel", "-k", action="append",
                   help="kernel name or prefix, or a cuBLAS configuration (repeatable)")
    p.add_argument("--sizes", nargs="+", help="N (square) or MxNxK (default: the tracked sizes)")
    p.add_argument("--task", action="append", metavar="KERNEL@SIZE",
                   help="one (kernel, size) pair, instead of --kernel x --sizes (repeatable; "
                   "measured in the order given)")
    p.add_argument("--mode", default="hot",
                   help="hot (default), cold L2, or sustained: hot, after 2 s of back-to-back "
                        "launches of each function")
    p.add_argument("--policy", default="suite", choices=list(POLICIES), help=POLICY_HELP)
    p.add_argument("--json", default="-", help="where the document goes (default: stdout)")
    p.add_argument("--probe", action="store_true", help="only say whether a GPU is usable")


def _tasks(tasks, kernels, sizes) -> list:
    """`--task KERNEL@SIZE` pairs, resolved as --kernel and --sizes are; not with those."""
    if kernels or sizes is not None:
        raise UsageError("--task names its own kernel and size: give --task, or --kernel and "
                         "--sizes, not both")
    out = []
    for t in tasks:
        name, at, size = t.rpartition("@")
        if not at or not name or not size:
            raise UsageError(f"--task wants KERNEL@SIZE (e.g. 05@4096 or 05@4096x4096x1024), "
                             f"got {t!r}")
        out.append((_targets([name], baselines_too=True)[0], _problems([size])[0]))
    return out


def run(args) -> int:
    """The stable measuring entry point: a gemm.measure/1 document, nothing else on stdout."""
    if args.probe:
        _need_gpu()
        return 0
    if args.task:   # exactly these pairs, in this order (the A/B's arms: one process each)
        pairs = _tasks(args.task, args.kernel, args.sizes)
        targets, problems = [], []
    else:
        pairs = None
        targets = _targets(args.kernel, baselines_too=True)
        problems = _problems(args.sizes if args.sizes is not None else list(shapes.TRACKED))
    policy = _policy(args.mode, args.policy)
    _need_gpu()
    doc = _sweep(targets, problems, policy=policy, pairs=pairs)
    text = json.dumps(doc)
    if args.json in (None, "-"):
        sys.stdout.write(text + "\n")
    else:
        with open(args.json, "w") as f:
            f.write(text)
    return 0 if all(r["status"] in OK_STATUSES for r in doc["records"]) else 1
