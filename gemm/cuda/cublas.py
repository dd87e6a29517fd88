"""cuBLAS through nvmath-python's bindings, on the same device buffers as the kernels.

Row-major C = A @ B is column-major C^T = B^T @ A^T, so each call swaps the operands:
gemm(opB, N, n=N, m=M, k=K, B, ldb, A, lda=K, C, ldc=N). B stored K x N row-major (b_layout
"kn") is B^T column-major: opB = N, ldb = N; stored N x K ("nk") it is B column-major:
opB = T, ldb = K. Configurations (gemm.core.precision names them; `_nk` adds the transposed B):

  cublas_fp32   cublasSgemm with CUBLAS_PEDANTIC_MATH: true FP32, TF32 off
  cublas_tf32   cublasGemmEx, FP32 storage, CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores)
  cublas_bf16   cublasGemmEx, BF16 A and B (CUDA_R_16BF), FP32 C, CUBLAS_COMPUTE_32F
  cublas_fp64   cublasDgemm: the float64 reference of gemm.measure.check
"""
from __future__ import annotations

import numpy as np

from ..core.precision import format_of_baseline
from ..core.problem import Problem

CUDA_R_32F, CUDA_R_16BF = 0, 14
GEMM_DEFAULT = -1


class Cublas:
    def __init__(self, mode: str, stream=None, b_layout: str | None = None) -> None:
        from .device import GPUUnavailable, cuda
        cuda()
        try:
            from nvmath.bindings import cublas
        except Exception as exc:
            raise GPUUnavailable(f"nvmath-python's cuBLAS bindings are not usable ({exc})") from None
        if mode == "cublas_fp64":
            self.precision, self.b_layout = "fp64", b_layout or "kn"
        else:
            fmt = format_of_baseline(mode)          # ValueError for unknown names
            self.precision, self.b_layout = fmt.precision, fmt.b_layout
        self._c = cublas
        self.mode = mode
        self.handle = cublas.create()
        math = {"tf32": cublas.Math.TF32_TENSOR_OP_MATH,
                "bf16": cublas.Math.DEFAULT_MATH}.get(self.precision, cublas.Math.PEDANTIC_MATH)
        cublas.set_math_mode(self.handle, math)
        cublas.set_pointer_mode(self.handle, cublas.PointerMode.HOST)
        if stream is not None:
            cublas.set_stream(self.handle, stream.handle)
        self._dtype = np.float64 if mode == "cublas_fp64" else np.float32

    def version(self) -> int:
        return int(self._c.get_version(self.handle))

    def launcher(self, prob: Problem):
        """launch(a_ptr, b_ptr, c_ptr, stream=None) like gemm.cuda.launch.launcher's."""
        c = self._c
        op_n = c.Operation.N
        op_b, ldb = (op_n, prob.N) if self.b_layout == "kn" else (c.Operation.T, prob.K)
        # host scalars, kept alive by the closure (pointer mode HOST)
        scal = np.array([prob.alpha, prob.beta], dtype=self._dtype)
        pa, pb = scal.ctypes.data, scal.ctypes.data + scal.itemsize
        M, N, K, h = prob.M, prob.N, prob.K, self.handle
        if self.precision == "fp32":
            def launch(a, b, out, stream=None, _keep=scal):
                c.sgemm(h, op_b, op_n, N, M, K, pa, int(b), ldb, int(a), K, pb, int(out), N)
        elif self.precision == "fp64":
            def launch(a, b, out, stream=None, _keep=scal):
                c.dgemm(h, op_b, op_n, N, M, K, pa, int(b), ldb, int(a), K, pb, int(out), N)
        else:
            if self.precision == "tf32":
                t_in, ct = CUDA_R_32F, c.ComputeType.COMPUTE_32F_FAST_TF32
            else:
                t_in, ct = CUDA_R_16BF, c.ComputeType.COMPUTE_32F

            def launch(a, b, out, stream=None, _keep=scal):
                c.gemm_ex(h, op_b, op_n, N, M, K, pa, int(b), t_in, ldb, int(a), t_in, K, pb,
                          int(out), CUDA_R_32F, N, ct, GEMM_DEFAULT)
        return launch

    def close(self) -> None:
        if self.handle is not None:
            self._c.destroy(self.handle)
            self.handle = None
