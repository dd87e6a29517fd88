"""`gemm check`: correctness of kernels over a list of shapes."""
from __future__ import annotations

import argparse

from ..core import shapes
from .common import OK_STATUSES, _need_gpu, _problems, _sweep, _targets


def alpha_beta(text: str) -> tuple[float, float]:
    """'1.5,0.5' -> (1.5, 0.5)."""
    try:
        alpha, beta = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not ALPHA,BETA (two numbers)") from None
    return alpha, beta


def add_arguments(p) -> None:
    p.add_argument("--kernel", "-k", action="append",
                   help="kernel name or prefix, or a cuBLAS configuration (repeatable)")
    p.add_argument("--shapes", nargs="+", default=list(shapes.CHECK_SHAPES),
                   help="N (square) or MxNxK (default: the correctness gate's shapes)")
    p.add_argument("--alpha-beta", action="append", type=alpha_beta, metavar="ALPHA,BETA",
                   help="an (alpha, beta) pair to check (repeatable; a negative alpha as "
                        "--alpha-beta=-1,2; default: the gate's "
                        + "; ".join(f"{a:g},{b:g}" for a, b in shapes.CHECK_AB) + ")")


def run(args) -> int:
    from .tables import check_line
    targets = _targets(args.kernel, baselines_too=True)
    problems = _problems(args.shapes)
    _need_gpu()
    ab = tuple(args.alpha_beta) if args.alpha_beta else shapes.CHECK_AB
    doc = _sweep(targets, problems, time_it=False, ab=ab)
    for r in doc["records"]:
        print(check_line(r))
    bad = [r for r in doc["records"] if r["status"] not in OK_STATUSES]
    print(f"\n{len(doc['records']) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0
