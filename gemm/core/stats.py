"""Robust statistics on timing samples (pure Python, no GPU)."""
from __future__ import annotations

import math
from statistics import median as _median


def median(xs) -> float:
    xs = [float(x) for x in xs]
    if not xs:
        raise ValueError("median of no samples")
    return float(_median(xs))


def mad(xs) -> float:
    m = median(xs)
    return median([abs(x - m) for x in xs])


def robust_sigma(xs) -> float:
    """1.4826 * MAD: the standard deviation of normal data, insensitive to outliers."""
    return 1.4826 * mad(xs) if len(xs) > 1 else 0.0


def rel_spread(xs) -> float:
    """robust_sigma / median: the relative noise of the samples."""
    m = median(xs)
    return robust_sigma(xs) / abs(m) if m else math.inf


def quantile(xs, q: float) -> float:
    """Linear-interpolated quantile, q in [0, 1]."""
    s = sorted(float(x) for x in xs)
    if not s:
        raise ValueError("quantile of no samples")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def min_max_spread(xs) -> float:
    """(max - min) / median: the spread quoted between separate processes."""
    m = median(xs)
    return (max(xs) - min(xs)) / abs(m) if m else math.inf
