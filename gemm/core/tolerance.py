"""Correctness as a rule: the tolerance from K and the precision, and the verdict.

The check is elementwise against a float64 reference:

    |out - ref| <= (LAMBDA * sqrt(K) + 2) * u * (|alpha| * (|A| @ |B|) + |beta| * |C|)

the probabilistic rounding-error bound for an inner product of length K (Higham & Mary, 2019:
with LAMBDA = 8 a violation by rounding alone has probability below 1e-13 per element) plus the
epilogue's two roundings. A and B in the reference are the inputs as the kernel sees them
(gemm.core.precision.round_inputs: rounded to TF32 or bfloat16), so the rule measures the
accumulation alone, which is float32 in every precision: u = 2^-24 for FP32 FMAs; 2^-23 for the
tensor cores, whose FP32 accumulation aligns the addends to the largest and truncates (up to one
unit in the last place per addition, not half). Input rounding is not allowed for: a TF32 kernel
that skips one K term fails like an FP32 one (tests/test_tolerance.py). NaN never passes, so a
C poisoned with NaN before the launch proves every element was written.

A precondition: the sqrt(K) growth assumes rounding errors that partly cancel, which holds for
the harness's operands (uniform in [-1, 1): zero-mean products). Truncating tensor cores err
in one direction, so on same-sign data their error grows like K: an emulation of a correct
tensor-core GEMM on [0, 1) inputs exceeds this bound about 2x at K = 8192 (a review's finding,
not a GPU measurement). Data of one sign is not what this rule judges. And it is loose where K
is large: at K = 8192 it allows about 0.9 % of |ref| per element on this data, so a bug that
drops one ordinary K term can pass on many elements; it catches bugs that move many elements.

Both places that apply the rule reduce an output to the same statistics (`CheckStats`) and
turn them into a `Verdict` here: gemm.measure.check on the GPU (the suite, the pytest gate,
`gemm check`) and `check_host` below on host arrays (numpy, for machines without a GPU).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

LAMBDA = 8.0
# unit roundoff of the float32 accumulation, per precision (the inputs are rounded in the reference)
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-23, "bf16": 2.0**-23}
TINY = 1e-30  # added to every tolerance, so an exact zero reference still allows exact zero


def tolerance_scale(K: int, precision: str) -> float:
    """The factor that multiplies |alpha||A||B| + |beta||C| elementwise."""
    return (LAMBDA * math.sqrt(K) + 2.0) * UNIT_ROUNDOFF[precision]


@dataclass(frozen=True)
class CheckStats:
    """What a check reduces an M x N output to (ratio = |out - ref| / tolerance, in float64;
    inf where the output is not finite)."""
    n_cols: int
    bad: int          # elements with !(ratio <= 1)
    nonfinite: int    # NaN or inf in the output
    first_bad: int    # flat index of the first bad element (-1: none)
    worst: float      # max ratio
    sq_err: float     # sum of (out - ref)^2 over finite outputs
    sq_ref: float     # sum of ref^2 over the same


@dataclass
class Verdict:
    ok: bool
    max_err_over_tol: float    # worst |out - ref| / tol (NaN counts as inf); <= 1 passes
    rel_fro_error: float       # ||out - ref||_F / ||ref||_F over the finite elements
    bad: int                   # elements out of tolerance (NaN included)
    nan: int                   # non-finite elements in the output
    first_bad: tuple | None    # (row, col) of the first bad element
    reference: str             # "cpu" or "gpu"

    def as_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        s = (f"{'ok' if self.ok else 'WRONG'}: max err/tol {self.max_err_over_tol:.3g}, "
             f"rel err {self.rel_fro_error:.2e}")
        if not self.ok:
            s += f", {self.bad} bad elements ({self.nan} non-finite), first at {self.first_bad}"
        return s


def verdict(s: CheckStats, where: str) -> Verdict:
    if s.sq_ref > 0:
        rel = math.sqrt(s.sq_err / s.sq_ref)
    else:
        rel = 0.0 if s.sq_err == 0 else math.inf
    first = None if s.bad == 0 else divmod(int(s.first_bad), s.n_cols)
    return Verdict(ok=s.bad == 0, max_err_over_tol=float(s.worst), rel_fro_error=rel,
                   bad=int(s.bad), nan=int(s.nonfinite), first_bad=first, reference=where)


# --- the same on host arrays (numpy) ----------------------------------------------------

def reference_host(a, b, c, alpha: float, beta: float, precision: str = "fp32"):
    """(ref, mag): alpha*A@B + beta*C and |alpha||A||B| + |beta||C| in float64, with A and B
    as a kernel of `precision` multiplies them (rounded to TF32 or bfloat16)."""
    from .precision import round_inputs
    a64 = round_inputs(a, precision).astype(np.float64)
    b64 = round_inputs(b, precision).astype(np.float64)
    ref = alpha * (a64 @ b64)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if beta != 0:
        c64 = c.astype(np.float64)
        ref += beta * c64
        mag += abs(beta) * np.abs(c64)
    return ref, mag


def stats_host(out: np.ndarray, ref: np.ndarray, mag: np.ndarray, scale: float) -> CheckStats:
    out64 = out.astype(np.float64)
    finite = np.isfinite(out64)
    with np.errstate(invalid="ignore", over="ignore"):
        ratio = np.where(finite, np.abs(out64 - ref) / (scale * mag + TINY), np.inf)
    bad_mask = ~(ratio <= 1.0)
    bad = int(bad_mask.sum())
    diff = np.where(finite, out64 - ref, 0.0)
    return CheckStats(n_cols=out.shape[1], bad=bad, nonfinite=int((~finite).sum()),
                      first_bad=int(np.argmax(bad_mask.ravel())) if bad else -1,
                      worst=float(ratio.max()) if ratio.size else 0.0,
                      sq_err=float((diff * diff).sum()),
                      sq_ref=float((np.where(finite, ref, 0.0) ** 2).sum()))


def check_host(out, a, b, c, alpha: float, beta: float, precision: str) -> Verdict:
    """Check a host result against the float64 reference of A, B (as the kernel sees them:
    rounded to `precision`'s inputs) and C. B is K x N."""
    ref, mag = reference_host(a, b, c, alpha, beta, precision)
    return verdict(stats_host(out, ref, mag, tolerance_scale(a.shape[1], precision)), "cpu")
