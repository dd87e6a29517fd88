"""gemm.verify's check done on the GPU, for sweeps: random operands are generated on the
device, the float64 reference is cuBLAS DGEMM on widened copies, and the elementwise
tolerance test (the same formula, gemm.verify.tolerance_scale) runs as a reduction kernel.
Nothing large crosses to the host, so checking an 8192^3 product costs milliseconds.
The support kernels are in _support.cu beside this file.
"""
from __future__ import annotations

import secrets
from pathlib import Path

import numpy as np

from .problem import Problem
from .verify import Verdict, tolerance_scale

_GRID = 132 * 8
_BLOCK = 256


def fresh_seed() -> int:
    return secrets.randbits(63)


class GpuChecker:
    def __init__(self, stream=None) -> None:
        from .baseline import Cublas
        from .device import cuda
        from .loader import cache_dir
        from pycuda.compiler import SourceModule
        self.drv = cuda()
        self.stream = stream
        src = (Path(__file__).parent / "_support.cu").read_text()
        self.mod = SourceModule(src, options=["-O3"], no_extern_c=True, cache_dir=cache_dir())
        self._fill = self.mod.get_function("fill_uniform")
        self._fill.prepare("PqQ")
        self._widen = self.mod.get_function("widen")
        self._widen.prepare("PPPq")
        self._addc = self.mod.get_function("add_beta_c")
        self._addc.prepare("PPPdq")
        self._cmp = self.mod.get_function("compare")
        self._cmp.prepare("PPPdqPP")
        self.blas = Cublas("cublas_fp64", stream=stream)

    def _go(self, f, *args):
        f.prepared_async_call((_GRID, 1), (_BLOCK, 1, 1), self.stream, *args)

    def fill(self, buf, n: int, seed: int) -> None:
        self._go(self._fill, int(buf), n, seed & (2**64 - 1))

    def random_matrix(self, rows: int, cols: int, seed: int):
        buf = self.drv.mem_alloc(rows * cols * 4)
        self.fill(buf, rows * cols, seed)
        return buf

    def reference(self, a, b, c, prob: Problem):
        """Device float64 (ref, mag) for alpha*A@B + beta*C and |alpha||A||B| + |beta||C|."""
        M, N, K = prob.M, prob.N, prob.K
        drv = self.drv
        a64, aa64 = drv.mem_alloc(M * K * 8), drv.mem_alloc(M * K * 8)
        b64, ab64 = drv.mem_alloc(K * N * 8), drv.mem_alloc(K * N * 8)
        ref, mag = drv.mem_alloc(M * N * 8), drv.mem_alloc(M * N * 8)
        try:
            self._go(self._widen, int(a), int(a64), int(aa64), M * K)
            self._go(self._widen, int(b), int(b64), int(ab64), K * N)
            self.blas.launcher(Problem(M, N, K, float(prob.alpha), 0.0))(a64, b64, ref)
            self.blas.launcher(Problem(M, N, K, abs(float(prob.alpha)), 0.0))(aa64, ab64, mag)
            if prob.beta != 0:
                self._go(self._addc, int(c), int(ref), int(mag), float(prob.beta), M * N)
            self.sync()
        finally:
            for buf in (a64, aa64, b64, ab64):
                buf.free()
        return ref, mag

    def compare(self, out, ref, mag, prob: Problem, precision: str) -> Verdict:
        n = prob.M * prob.N
        stats = np.array([0, 0, np.iinfo(np.uint64).max, 0], dtype=np.uint64)
        sums = np.zeros(2, dtype=np.float64)
        d_stats = self.drv.to_device(stats)
        d_sums = self.drv.to_device(sums)
        self._go(self._cmp, int(out), int(ref), int(mag), tolerance_scale(prob.K, precision),
                 n, int(d_stats), int(d_sums))
        self.sync()
        self.drv.memcpy_dtoh(stats, d_stats)
        self.drv.memcpy_dtoh(sums, d_sums)
        d_stats.free()
        d_sums.free()
        bad, nonfinite, first, worst_bits = (int(x) for x in stats)
        worst = float(np.array([worst_bits & 0xFFFFFFFF], dtype=np.uint32).view(np.float32)[0])
        first_bad = None if bad == 0 else (first // prob.N, first % prob.N)
        rel = float(np.sqrt(sums[0] / sums[1])) if sums[1] > 0 else 0.0
        return Verdict(ok=bad == 0, max_err_over_tol=worst, rel_fro_error=rel, bad=bad,
                       nan=nonfinite, first_bad=first_bad, reference="gpu")

    def sync(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()
        else:
            self.drv.Context.synchronize()

    def close(self) -> None:
        self.blas.close()
