"""Correctness against a float64 reference, with a tolerance derived from K and the precision.

Reference: numpy in float64 on the CPU for small problems, cuBLAS DGEMM on the GPU for large
ones (float64 copies of the inputs). The check is elementwise:

    |out - ref| <= (LAMBDA * sqrt(K) + 2) * u * (|alpha| * (|A| @ |B|) + |beta| * |C|)

the probabilistic rounding-error bound for an inner product of length K (Higham & Mary, 2019:
with LAMBDA = 8 a violation by rounding alone has probability below 1e-13 per element) plus the
epilogue's two roundings. u is the unit roundoff of the arithmetic: 2^-24 for FP32; for TF32 and
BF16 the input rounding dominates (2^-10 and 2^-8, truncation allowed). NaN never passes, so a
C poisoned with NaN before the launch proves every element was written.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

LAMBDA = 8.0
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-10, "bf16": 2.0**-8}
GPU_REFERENCE_MIN_WORK = 2**28  # M*N*K above which the reference runs on the GPU


def tolerance_scale(K: int, precision: str) -> float:
    """The factor that multiplies |alpha||A||B| + |beta||C| elementwise."""
    return (LAMBDA * math.sqrt(K) + 2.0) * UNIT_ROUNDOFF[precision]


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


def _gemm64_cpu(a, b, c, alpha, beta):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = alpha * (a64 @ b64)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if beta != 0:
        c64 = c.astype(np.float64)
        ref += beta * c64
        mag += abs(beta) * np.abs(c64)
    return ref, mag


def _gemm64_gpu(a, b, c, alpha, beta):
    from .baseline import Cublas
    from .device import cuda
    from .problem import Problem
    drv = cuda()
    blas = Cublas("cublas_fp64")
    try:
        M, K = a.shape
        N = b.shape[1]
        out = []
        for x, y, scale in ((a, b, alpha), (np.abs(a), np.abs(b), abs(alpha))):
            da = drv.to_device(x.astype(np.float64))
            db = drv.to_device(y.astype(np.float64))
            dc = drv.mem_alloc(M * N * 8)
            blas.launcher(Problem(M, N, K, float(scale), 0.0))(da, db, dc)
            host = np.empty((M, N), dtype=np.float64)
            drv.Context.synchronize()
            drv.memcpy_dtoh(host, dc)
            for buf in (da, db, dc):
                buf.free()
            out.append(host)
    finally:
        blas.close()
    ref, mag = out
    if beta != 0:
        c64 = c.astype(np.float64)
        ref += beta * c64
        mag += abs(beta) * np.abs(c64)
    return ref, mag


def reference(a, b, c, alpha, beta, where: str = "auto"):
    """(ref, mag, where): alpha*A@B + beta*C and |alpha||A||B| + |beta||C| in float64."""
    M, K = a.shape
    N = b.shape[1]
    if where == "auto":
        where = "cpu"
        if M * N * K >= GPU_REFERENCE_MIN_WORK:
            from .device import available
            if available()[0]:
                where = "gpu"
    fn = _gemm64_gpu if where == "gpu" else _gemm64_cpu
    ref, mag = fn(a, b, c, alpha, beta)
    return ref, mag, where


def compare(out: np.ndarray, ref: np.ndarray, mag: np.ndarray, K: int, precision: str,
            where: str = "cpu") -> Verdict:
    tol = tolerance_scale(K, precision) * mag + 1e-30
    out64 = out.astype(np.float64)
    err = np.abs(out64 - ref)
    finite = np.isfinite(out64)
    ratio = np.where(finite, err / tol, np.inf)
    bad_mask = ~(ratio <= 1.0)
    bad = int(bad_mask.sum())
    first = None
    if bad:
        idx = int(np.argmax(bad_mask))
        first = tuple(int(i) for i in np.unravel_index(idx, out.shape))
    ref_norm = float(np.linalg.norm(ref[finite])) or 1.0
    rel = float(np.linalg.norm((out64 - ref)[finite])) / ref_norm
    return Verdict(ok=bad == 0, max_err_over_tol=float(ratio.max()), rel_fro_error=rel,
                   bad=bad, nan=int((~finite).sum()), first_bad=first, reference=where)


def check(out, a, b, c, alpha, beta, precision: str, where: str = "auto") -> Verdict:
    """Compare a result with the float64 reference computed from the original A, B, C."""
    ref, mag, where = reference(a, b, c, alpha, beta, where)
    return compare(out, ref, mag, a.shape[1], precision, where)
