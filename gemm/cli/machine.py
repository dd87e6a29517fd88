"""`gemm machine`: write asv's machine file for this GPU."""
from __future__ import annotations

from .common import _need_gpu


def add_arguments(p) -> None:
    p.add_argument("--machine", default=None, help="name (default: from the GPU, e.g. h200)")
    p.add_argument("--path", default=None, help="machine file (default ~/.asv-machine.json)")


def run(args) -> int:
    from ..record.machine import write_machine
    _need_gpu()
    print(write_machine(args.machine, args.path))
    return 0
