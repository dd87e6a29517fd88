"""The library call: C = alpha * A @ B + beta * C with a registered kernel or a cuBLAS
configuration, on host arrays.

Everything is validated before anything reaches the GPU; bad input raises TypeError or
ValueError and leaves the CUDA context untouched. The run itself is gemm.cuda.buffers.run_once:
with beta == 0 the output is filled with NaN first, so any element the kernel fails to write
comes back as NaN.
"""
from __future__ import annotations

import numpy as np

from .core.problem import problem_for
from .core.registry import KernelSpec


def gemm(target: str | KernelSpec, a, b, c=None, alpha: float = 1.0,
         beta: float = 0.0) -> np.ndarray:
    """Run `target` (a kernel name, prefix or spec, or a cuBLAS configuration such as
    'cublas_fp32', 'cublas_tf32', 'cublas_bf16') and return the new C as a float32 host array.
    A and B are float32, or ml_dtypes.bfloat16 for a bf16 target; B is K x N, or N x K for a
    target whose b_layout is "nk". A TF32 target multiplies A and B rounded to TF32 (to
    nearest, ties away, as cvt.rna does): they are rounded here, as the harness's own operands
    are, so kernels whose hardware truncates and cuBLAS see the same numbers."""
    from .cuda.targets import operand_format, resolve
    what = resolve(target)
    fmt = operand_format(what)
    prob = problem_for(a, b, c, alpha, beta, fmt.host_dtype(), fmt.b_layout)
    if c is None:
        c = np.zeros((prob.M, prob.N), dtype=np.float32)
    from .cuda.buffers import DeviceOperands, run_once
    from .cuda.targets import open_target
    t = open_target(what)
    try:
        launch = t.launcher(prob)
        if fmt.precision == "tf32":
            from .core.precision import round_tf32
            a, b = round_tf32(a), round_tf32(b)
        ops = DeviceOperands(a, b, c)
        try:
            run_once(launch, ops.a, ops.b, ops.c, prob)
            return ops.get_c()
        finally:
            ops.free()
    finally:
        t.close()
