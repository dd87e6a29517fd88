"""What can be run: a registered kernel or a cuBLAS configuration, behind one interface."""
from __future__ import annotations

from ..core.precision import OperandFormat, format_of_baseline
from ..core.registry import BASELINES, KernelSpec, get

BASELINE_PRECISION = {b: format_of_baseline(b).precision for b in BASELINES}


class Target:
    """`launcher(prob)` gives launch(a, b, c, stream=None); `close()` frees what it holds;
    `fmt` says how it wants A and B stored; `baseline`: for a cuBLAS configuration, its
    gemm.cuda.basecall.Baseline (which call runs per problem), else None."""

    def __init__(self, name: str, precision: str, make, close=lambda: None,
                 fmt: OperandFormat | None = None) -> None:
        self.name, self.precision = name, precision
        self.fmt = fmt or OperandFormat(precision)
        self._make, self._close = make, close
        self.baseline = None

    def launcher(self, prob):
        return self._make(prob)

    def close(self) -> None:
        self._close()


def resolve(target: str | KernelSpec) -> KernelSpec | str:
    """A KernelSpec, or the cuBLAS configuration name; ValueError for anything else.
    Needs no GPU, so bad names fail before anything reaches the device."""
    if isinstance(target, KernelSpec) or target in BASELINES:
        return target
    return get(target)


def operand_format(target: str | KernelSpec) -> OperandFormat:
    what = resolve(target)
    return what.operands if isinstance(what, KernelSpec) else format_of_baseline(what)


def open_target(target: str | KernelSpec, stream=None) -> Target:
    what = resolve(target)
    if isinstance(what, KernelSpec):
        from .launch import launcher
        from .loader import check_runnable
        check_runnable(what)
        return Target(what.name, what.precision, lambda prob: launcher(what, prob),
                      fmt=what.operands)
    from .basecall import open_baseline
    base = open_baseline(what, stream=stream)
    target = Target(what, BASELINE_PRECISION[what], base.launcher, base.close,
                    fmt=format_of_baseline(what))
    target.baseline = base
    return target
