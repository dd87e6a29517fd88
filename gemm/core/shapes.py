"""Every list of sizes and shapes the suite uses, in one place.

TRACKED: what the per-commit suite records (asv) and `gemm bench` measures by default: the
squares, 1000 (a remainder everywhere), and the shapes users run beside them: a short K
(4096x4096x1024), a skinny N (8192x1024x4096), a short M with a long K (1024x8192x8192), and
every dimension odd (3001x2999x3003, which the vectorized kernels run on their fallback path).
CHECK_SHAPES x CHECK_AB: what the correctness gate (pytest on the GPU, `gemm check`) covers:
square sizes, shapes with every kind of remainder, degenerate 1-wide ones, and ragged M / N with
a short K that is a multiple of 8, which the TMA kernels (16-byte row strides) take as they are
(other K they run on copies with K padded: registry pad_k).
QUICK: the pytest-benchmark A/B sizes.
"""
from __future__ import annotations

from .problem import Problem

TRACKED = ("512", "1024", "2048", "4096", "8192", "1000", "4096x4096x1024", "8192x1024x4096",
           "1024x8192x8192", "3001x2999x3003")
CHECK_SHAPES = ("64", "128", "256", "512", "1024", "1000x832x504", "1x1x1", "65x129x7",
                "127x1x300", "1x4097x3", "4095x63x129", "2048",
                # K a multiple of 8 (TMA can address them) with ragged M / N, short K
                "33x7x8", "70x130x40", "129x257x72")
CHECK_AB = ((1.0, 0.0), (1.5, 0.5), (-1.0, 2.0))
QUICK = ("1024", "4096")


def problems(sizes) -> list[Problem]:
    """Problems from 'N' / 'MxNxK' strings (or Problems, passed through)."""
    return [s if isinstance(s, Problem) else Problem.parse(str(s)) for s in sizes]
