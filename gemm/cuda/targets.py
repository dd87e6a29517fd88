"""What can be run: a registered kernel or a cuBLAS configuration, behind one interface."""
from __future__ import annotations

from ..core.registry import BASELINES, KernelSpec, get

BASELINE_PRECISION = {"cublas_fp32": "fp32", "cublas_tf32": "tf32"}


class Target:
    """`launcher(prob)` gives launch(a, b, c, stream=None); `close()` frees what it holds."""

    def __init__(self, name: str, precision: str, make, close=lambda: None) -> None:
        self.name, self.precision = name, precision
        self._make, self._close = make, close

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


def open_target(target: str | KernelSpec, stream=None) -> Target:
    what = resolve(target)
    if isinstance(what, KernelSpec):
        from .launch import launcher
        return Target(what.name, what.precision, lambda prob: launcher(what, prob))
    from .cublas import Cublas
    blas = Cublas(what, stream=stream)
    return Target(what, BASELINE_PRECISION[what], blas.launcher, blas.close)
