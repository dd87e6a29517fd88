"""`gemm check`: correctness of kernels over a list of shapes."""
from __future__ import annotations

from ..core import shapes
from .common import OK_STATUSES, _need_gpu, _problems, _sweep, _targets


def add_arguments(p) -> None:
    p.add_argument("--kernel", "-k", action="append",
                   help="kernel name or prefix, or a cuBLAS configuration (repeatable)")
    p.add_argument("--shapes", nargs="+", default=list(shapes.CHECK_SHAPES),
                   help="N (square) or MxNxK (default: the correctness gate's shapes)")


def run(args) -> int:
    from .tables import check_line
    targets = _targets(args.kernel, baselines_too=True)
    problems = _problems(args.shapes)
    _need_gpu()
    doc = _sweep(targets, problems, time_it=False, ab=shapes.CHECK_AB)
    for r in doc["records"]:
        print(check_line(r))
    bad = [r for r in doc["records"] if r["status"] not in OK_STATUSES]
    print(f"\n{len(doc['records']) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0
