"""`gemm plot`: PNG plots from the recorded history (gemm.record.plot)."""
from __future__ import annotations

from .common import need_modules


def add_arguments(p) -> None:
    p.add_argument("--results", default="results", help="asv results directory")
    p.add_argument("--machine", default=None, help="machine name (default: the only one)")
    p.add_argument("--out", default="plots", help="directory for the PNGs (default plots/)")
    p.add_argument("--verdicts", default=None,
                   help="the gate's kept verdicts, marked on the plots (default: verdicts/ "
                   "beside results/)")


def run(args) -> int:
    need_modules("matplotlib")
    from ..record import plot
    return plot.main(args)
