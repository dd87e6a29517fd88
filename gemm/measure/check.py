"""The one correctness path on the GPU, used by the sweep (and so `gemm bench`, `gemm check`
and the asv suite), the pytest gate and the A/B.

Operands are made on the device from a seed (recorded, fresh per check); the float64 reference
is cuBLAS DGEMM on widened copies, with C's share added by a support kernel; the output is
run with gemm.cuda.buffers.run_once (NaN-poisoned when beta == 0) and reduced on the device to
gemm.core.tolerance's statistics. Nothing large crosses to the host, so checking an 8192^3
product costs milliseconds.
"""
from __future__ import annotations

import secrets

from ..core import tolerance
from ..core.problem import Problem


def fresh_seed() -> int:
    return secrets.randbits(63)


class Operands:
    """Random A (M x K), B (K x N), C (M x N) and an output buffer on the device."""

    def __init__(self, support, prob: Problem, seed: int) -> None:
        drv = support.drv
        self.seed = seed
        self.a = drv.mem_alloc(prob.M * prob.K * 4)
        self.b = drv.mem_alloc(prob.K * prob.N * 4)
        self.c = drv.mem_alloc(prob.M * prob.N * 4)
        self.out = drv.mem_alloc(prob.M * prob.N * 4)
        self.fill(support, prob, seed)

    def fill(self, support, prob: Problem, seed: int) -> None:
        self.seed = seed
        for i, (buf, n) in enumerate(((self.a, prob.M * prob.K), (self.b, prob.K * prob.N),
                                      (self.c, prob.M * prob.N))):
            support.fill(buf, n, seed + i)
        support.sync()

    def free(self) -> None:
        for buf in (self.a, self.b, self.c, self.out):
            buf.free()


class Checker:
    def __init__(self, stream=None) -> None:
        from ..cuda.cublas import Cublas
        from ..cuda.device import cuda
        from ..cuda.support import SupportKernels
        self.drv = cuda()
        self.stream = stream
        self.support = SupportKernels(stream)
        self.dgemm = Cublas("cublas_fp64", stream=stream)

    def operands(self, prob: Problem, seed: int | None = None) -> Operands:
        return Operands(self.support, prob, fresh_seed() if seed is None else seed)

    def reference(self, ops: Operands, prob: Problem):
        """Device float64 (ref, mag): alpha*A@B + beta*C and |alpha||A||B| + |beta||C|."""
        M, N, K = prob.M, prob.N, prob.K
        drv = self.drv
        a64, aa64 = drv.mem_alloc(M * K * 8), drv.mem_alloc(M * K * 8)
        b64, ab64 = drv.mem_alloc(K * N * 8), drv.mem_alloc(K * N * 8)
        ref, mag = drv.mem_alloc(M * N * 8), drv.mem_alloc(M * N * 8)
        try:
            self.support.widen(ops.a, a64, aa64, M * K)
            self.support.widen(ops.b, b64, ab64, K * N)
            self.dgemm.launcher(Problem(M, N, K, float(prob.alpha), 0.0))(a64, b64, ref)
            self.dgemm.launcher(Problem(M, N, K, abs(float(prob.alpha)), 0.0))(aa64, ab64, mag)
            if prob.beta != 0:
                self.support.add_beta_c(ops.c, ref, mag, prob.beta, M * N)
            self.support.sync()
        finally:
            for buf in (a64, aa64, b64, ab64):
                buf.free()
        return ref, mag

    def compare(self, out, ref, mag, prob: Problem, precision: str) -> tolerance.Verdict:
        raw = self.support.compare(out, ref, mag, tolerance.tolerance_scale(prob.K, precision),
                                   prob.M * prob.N)
        return tolerance.verdict(tolerance.CheckStats(prob.N, *raw), "gpu")

    def check(self, launch, ops: Operands, prob: Problem, precision: str,
              reference=None) -> tolerance.Verdict:
        """Run `launch` once into ops.out (gemm.cuda.buffers.run_once) and judge it. Pass a
        `reference` (ref, mag) to reuse one for several launches on the same operands."""
        from ..cuda.buffers import run_once
        ref, mag = reference or self.reference(ops, prob)
        try:
            run_once(launch, ops.a, ops.b, ops.out, prob, self.stream, c=ops.c)
            return self.compare(ops.out, ref, mag, prob, precision)
        finally:
            if reference is None:
                ref.free()
                mag.free()

    def close(self) -> None:
        self.dgemm.close()
