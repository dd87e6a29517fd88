"""cuBLAS through nvmath-python's bindings, on the same device buffers as the kernels.

Row-major C = A @ B is column-major C^T = B^T @ A^T, so each call swaps the operands:
gemm(N, N, n=N, m=M, k=K, B, ldb=N, A, lda=K, C, ldc=N). Configurations:

  cublas_fp32   cublasSgemm with CUBLAS_PEDANTIC_MATH: true FP32, TF32 off
  cublas_tf32   cublasGemmEx, FP32 storage, CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores)
  cublas_fp64   cublasDgemm: the float64 reference used by gemm.verify on large problems
"""
from __future__ import annotations

import numpy as np

from ..core.problem import Problem


class Cublas:
    def __init__(self, mode: str, stream=None) -> None:
        from .device import GPUUnavailable, cuda
        cuda()
        try:
            from nvmath.bindings import cublas
        except Exception as exc:
            raise GPUUnavailable(f"nvmath-python's cuBLAS bindings are not usable ({exc})") from None
        if mode not in ("cublas_fp32", "cublas_tf32", "cublas_fp64"):
            raise ValueError(f"unknown cuBLAS configuration {mode!r}")
        self._c = cublas
        self.mode = mode
        self.handle = cublas.create()
        math = cublas.Math.PEDANTIC_MATH if mode != "cublas_tf32" else cublas.Math.TF32_TENSOR_OP_MATH
        cublas.set_math_mode(self.handle, math)
        cublas.set_pointer_mode(self.handle, cublas.PointerMode.HOST)
        if stream is not None:
            cublas.set_stream(self.handle, stream.handle)
        self._dtype = np.float64 if mode == "cublas_fp64" else np.float32

    def version(self) -> int:
        return int(self._c.get_version(self.handle))

    def launcher(self, prob: Problem):
        """launch(a_ptr, b_ptr, c_ptr, stream=None) like gemm.launch.launcher's."""
        c = self._c
        op_n = c.Operation.N
        # host scalars, kept alive by the closure (pointer mode HOST)
        scal = np.array([prob.alpha, prob.beta], dtype=self._dtype)
        pa, pb = scal.ctypes.data, scal.ctypes.data + scal.itemsize
        M, N, K, h = prob.M, prob.N, prob.K, self.handle
        if self.mode == "cublas_fp32":
            def launch(a, b, out, stream=None, _keep=scal):
                c.sgemm(h, op_n, op_n, N, M, K, pa, int(b), N, int(a), K, pb, int(out), N)
        elif self.mode == "cublas_fp64":
            def launch(a, b, out, stream=None, _keep=scal):
                c.dgemm(h, op_n, op_n, N, M, K, pa, int(b), N, int(a), K, pb, int(out), N)
        else:
            from nvmath.bindings import cublas as cb
            r32 = 0  # CUDA_R_32F
            ct = cb.ComputeType.COMPUTE_32F_FAST_TF32

            def launch(a, b, out, stream=None, _keep=scal):
                c.gemm_ex(h, op_n, op_n, N, M, K, pa, int(b), r32, N, int(a), r32, K, pb,
                          int(out), r32, N, ct, -1)  # CUBLAS_GEMM_DEFAULT
        return launch

    def close(self) -> None:
        if self.handle is not None:
            self._c.destroy(self.handle)
            self.handle = None
