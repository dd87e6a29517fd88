"""`gemm plot`: PNG plots from the recorded history (gemm.record.plot)."""
from __future__ import annotations


def add_arguments(p) -> None:
    p.add_argument("--results", default="results")
    p.add_argument("--machine", default=None)
    p.add_argument("--out", default="plots")


def run(args) -> int:
    from ..record import plot
    return plot.main(args)
