"""The library call: C = alpha * A @ B + beta * C with a registered kernel, on host arrays.

Everything is validated before anything reaches the GPU; bad input raises TypeError or
ValueError and leaves the CUDA context untouched.
"""
from __future__ import annotations

import numpy as np

from .problem import problem_for
from .registry import KernelSpec, get


def gemm(kernel: str | KernelSpec, a, b, c=None, alpha: float = 1.0, beta: float = 0.0,
         poison: bool = True) -> np.ndarray:
    """Run `kernel` (name or spec) and return the new C as a host array.

    With beta == 0 the device C is filled with NaN first (poison) so that any element the
    kernel fails to write shows up as NaN.
    """
    spec = get(kernel) if isinstance(kernel, str) else kernel
    prob = problem_for(a, b, c, alpha, beta)
    if c is None:
        c = np.zeros((prob.M, prob.N), dtype=np.float32)
    from .data import DeviceOperands
    from .device import cuda
    from .launch import launcher
    launch = launcher(spec, prob)
    ops = DeviceOperands(a, b, c)
    try:
        if poison and beta == 0:
            ops.poison()
        launch(ops.a, ops.b, ops.c)
        cuda().Context.synchronize()
        return ops.get_c()
    finally:
        ops.free()


def cublas_gemm(mode: str, a, b, c=None, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """The same call through cuBLAS (`cublas_fp32`, `cublas_tf32`)."""
    prob = problem_for(a, b, c, alpha, beta)
    if c is None:
        c = np.zeros((prob.M, prob.N), dtype=np.float32)
    from .baseline import Cublas
    from .data import DeviceOperands
    from .device import cuda
    blas = Cublas(mode)
    ops = DeviceOperands(a, b, c)
    try:
        if beta == 0:
            ops.poison()
        blas.launcher(prob)(ops.a, ops.b, ops.c)
        cuda().Context.synchronize()
        return ops.get_c()
    finally:
        ops.free()
        blas.close()
