"""Operands of one problem on the host and on the device.

Inputs are uniform random in [-1, 1): never zeros, which hide unwritten outputs and run
faster than real data. `poison` fills C with NaN so an element no thread wrote cannot pass.
"""
from __future__ import annotations

import numpy as np

from .problem import Problem

NAN_BITS = 0x7FC00000


def random_operands(prob: Problem, seed: int | None = None):
    """Host A, B, C (float32, C-contiguous); seed None draws fresh entropy."""
    rng = np.random.default_rng(seed)

    def mat(r, c):
        return (rng.random((r, c), dtype=np.float32) * 2 - 1).astype(np.float32, copy=False)

    return mat(prob.M, prob.K), mat(prob.K, prob.N), mat(prob.M, prob.N)


class DeviceOperands:
    """Device copies of A, B, C; `a`, `b`, `c` are the allocations (usable as pointers)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        from .device import cuda
        drv = cuda()
        self._drv = drv
        self.shape_c = c.shape
        self.a = drv.to_device(a)
        self.b = drv.to_device(b)
        self.c = drv.to_device(c)
        self.c_nbytes = c.nbytes

    def poison(self) -> None:
        self._drv.memset_d32(self.c, NAN_BITS, self.c_nbytes // 4)

    def set_c(self, c: np.ndarray) -> None:
        self._drv.memcpy_htod(self.c, c)

    def get_c(self) -> np.ndarray:
        out = np.empty(self.shape_c, dtype=np.float32)
        self._drv.memcpy_dtoh(out, self.c)
        return out

    def free(self) -> None:
        for buf in (self.a, self.b, self.c):
            buf.free()
