"""The harness's own kernels (support.cu): random operands made on the device, float64
widening for the DGEMM reference, C's share of the reference, the elementwise check that
gemm.core.tolerance defines, reduced on the device, and the fault-injection delay. (The
padded staging of `pad_k` kernels, also in support.cu, is run by gemm.cuda.staging.)"""
from __future__ import annotations

from pathlib import Path

import numpy as np

_BLOCK = 256


_module = None


def support_module():
    """support.cu compiled (PyCUDA's disk cache) and loaded once per process, into the one
    context gemm.cuda.device keeps."""
    global _module
    if _module is None:
        from pycuda.compiler import SourceModule
        from .device import cuda
        from .loader import cache_dir
        cuda()
        src = (Path(__file__).parent / "support.cu").read_text()
        _module = SourceModule(src, options=["-O3"], no_extern_c=True, cache_dir=cache_dir())
    return _module


class SupportKernels:
    def __init__(self, stream=None) -> None:
        from .device import cuda, info
        self.drv = cuda()
        self.stream = stream
        self.grid = info().sms * 8
        mod = support_module()
        self._f = {}
        for name, sig in (("fill_uniform", "PqQ"), ("widen", "PPPq"), ("add_beta_c", "PPPdq"),
                          ("compare", "PPPdqPP"), ("round_tf32", "Pq"), ("to_bf16", "PPq"),
                          ("widen_bf16", "PPPq"), ("delay_spin", "q")):
            self._f[name] = mod.get_function(name)
            self._f[name].prepare(sig)

    def _go(self, name, *args) -> None:
        self._f[name].prepared_async_call((self.grid, 1), (_BLOCK, 1, 1), self.stream, *args)

    def fill(self, buf, n: int, seed: int) -> None:
        """buf[i] = uniform in [-1, 1), a hash of (seed, i): the same seed, the same matrix."""
        self._go("fill_uniform", int(buf), n, seed & (2**64 - 1))

    def widen(self, x, x64, ax64, n: int, precision: str = "fp32") -> None:
        """x64 = x, ax64 = |x| in float64; x holds bfloat16 bits when precision is bf16."""
        self._go("widen_bf16" if precision == "bf16" else "widen", int(x), int(x64), int(ax64), n)

    def fill_as(self, buf, n: int, seed: int, precision: str, scratch=None) -> None:
        """`fill`, then as the precision stores it: TF32 numbers in place, or bfloat16 bits
        into `buf` from the float32 `scratch` (n floats)."""
        if precision == "bf16":
            self.fill(scratch, n, seed)
            self._go("to_bf16", int(scratch), int(buf), n)
            return
        self.fill(buf, n, seed)
        if precision == "tf32":
            self._go("round_tf32", int(buf), n)

    def add_beta_c(self, c, ref, mag, beta: float, n: int) -> None:
        self._go("add_beta_c", int(c), int(ref), int(mag), float(beta), n)

    def compare(self, out, ref, mag, scale: float, n: int) -> tuple:
        """(bad, nonfinite, first bad index or -1, worst ratio, sum sq err, sum sq ref)."""
        st = np.array([0, 0, np.iinfo(np.uint64).max, 0], dtype=np.uint64)
        sums = np.zeros(2, dtype=np.float64)
        d_st, d_sums = self.drv.to_device(st), self.drv.to_device(sums)
        try:
            self._go("compare", int(out), int(ref), int(mag), float(scale), n, int(d_st),
                     int(d_sums))
            self.sync()
            self.drv.memcpy_dtoh(st, d_st)
            self.drv.memcpy_dtoh(sums, d_sums)
        finally:
            d_st.free()
            d_sums.free()
        worst = float(st[3:4].view(np.float64)[0])
        first = -1 if int(st[0]) == 0 else int(st[2])
        return int(st[0]), int(st[1]), first, worst, float(sums[0]), float(sums[1])

    def delay(self, cycles: int, stream=None) -> None:
        """Enqueue the fault-injection spin: one thread, `cycles` SM cycles."""
        self._f["delay_spin"].prepared_async_call((1, 1), (1, 1, 1), stream or self.stream,
                                                  int(cycles))

    def cycles_per_second(self) -> float:
        """The spin's rate here: a long spin timed with CUDA events (after a warm one)."""
        start, end = self.drv.Event(), self.drv.Event()
        n = 20_000_000
        rates = []
        for _ in range(3):
            start.record(self.stream)
            self.delay(n)
            end.record(self.stream)
            end.synchronize()
            rates.append(n / (end.time_since(start) / 1e3))
        return sorted(rates)[1]

    def sync(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()
        else:
            self.drv.Context.synchronize()
