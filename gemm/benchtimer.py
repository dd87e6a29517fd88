"""A timer for pytest-benchmark that waits for the GPU before reading the clock.

pytest-benchmark brackets each round with two timer() calls; kernel launches return before
the GPU has run them, so a plain perf_counter would time the launch, not the kernel. This
one synchronizes the CUDA context first. benchmarks/conftest.py makes it the default there.
"""
from __future__ import annotations

import time


def cuda_synchronized() -> float:
    from .device import cuda
    cuda().Context.synchronize()
    return time.perf_counter()
