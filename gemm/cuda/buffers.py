"""Operands on the device, and the one way a GEMM is run for a result.

Inputs are uniform random in [-1, 1): never zeros, which hide unwritten outputs and run
faster than real data. `run_once` poisons the output with NaN first when beta == 0 (so an
element no thread wrote cannot pass) or starts it from C when beta != 0, then launches once.
"""
from __future__ import annotations

import numpy as np

NAN_BITS = 0x7FC00000


def random_host(rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    return (rng.random((rows, cols), dtype=np.float32) * 2 - 1).astype(np.float32, copy=False)


def run_once(launch, a, b, out, prob, stream=None, c=None) -> None:
    """Launch once into `out` and wait: NaN-poisoned first when beta == 0, else a copy of `c`
    (when `c` is another buffer than `out`)."""
    from .device import cuda
    drv = cuda()
    n = prob.M * prob.N
    if prob.beta == 0:
        drv.memset_d32_async(out, NAN_BITS, n, stream)
    elif c is not None and int(c) != int(out):
        drv.memcpy_dtod_async(out, c, n * 4, stream)
    launch(a, b, out, stream)
    if stream is not None:
        stream.synchronize()
    else:
        drv.Context.synchronize()


def transferable(x: np.ndarray) -> np.ndarray:
    """PyCUDA refuses ml_dtypes' bfloat16: move 2-byte floats as their uint16 bits."""
    return x.view(np.uint16) if x.dtype.name == "bfloat16" else x


class DeviceOperands:
    """Device copies of host A, B, C; `a`, `b`, `c` are the allocations (usable as pointers).
    A and B go as they are (float32, or bfloat16 as uint16 bits); C is float32."""

    def __init__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        from .device import cuda
        drv = cuda()
        self._drv = drv
        self.shape_c = c.shape
        self.a = drv.to_device(transferable(a))
        self.b = drv.to_device(transferable(b))
        self.c = drv.to_device(c)

    def get_c(self) -> np.ndarray:
        out = np.empty(self.shape_c, dtype=np.float32)
        self._drv.memcpy_dtoh(out, self.c)
        return out

    def free(self) -> None:
        for buf in (self.a, self.b, self.c):
            buf.free()
