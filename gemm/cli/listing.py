"""`gemm list`: the registered kernels."""
from __future__ import annotations

from ..core import registry


def add_arguments(p) -> None:
    """`gemm list` takes no options."""


def run(args) -> int:
    from .tables import table
    rows = [[s.name, s.file, " ".join(f"{k}={v}" for k, v in s.defines.items()),
             "x".join(map(str, s.tile)), s.threads,
             ("main+edge" if s.split else "single") + (f", align {s.align}" if s.align > 1 else ""),
             s.precision, s.baseline, s.summary] for s in registry.registry().values()]
    print(table(["kernel", "file", "constants", "tile", "threads", "launch", "precision",
                 "baseline", "what"], rows, "llllrllll"))
    return 0
