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
from ..core.precision import OperandFormat
from ..core.problem import Problem


def fresh_seed() -> int:
    return secrets.randbits(63)


class Operands:
    """Random A (M x K), B (K x N, or N x K for b_layout "nk"), C (M x N) and an output buffer
    on the device, A and B stored as `fmt` says (float32, TF32 numbers, or bfloat16 bits);
    C and the output are float32."""

    def __init__(self, support, prob: Problem, seed: int,
                 fmt: OperandFormat = OperandFormat()) -> None:
        drv = support.drv
        self.seed = seed
        self.fmt = fmt
        self.a = drv.mem_alloc(prob.M * prob.K * fmt.in_bytes)
        self.b = drv.mem_alloc(prob.K * prob.N * fmt.in_bytes)
        self.c = drv.mem_alloc(prob.M * prob.N * 4)
        self.out = drv.mem_alloc(prob.M * prob.N * 4)
        self.fill(support, prob, seed)

    def fill(self, support, prob: Problem, seed: int) -> None:
        self.seed = seed
        p = self.fmt.precision
        n_a, n_b = prob.M * prob.K, prob.K * prob.N
        scratch = support.drv.mem_alloc(max(n_a, n_b) * 4) if p == "bf16" else None
        try:
            support.fill_as(self.a, n_a, seed, p, scratch)
            support.sync()
            support.fill_as(self.b, n_b, seed + 1, p, scratch)
            support.fill(self.c, prob.M * prob.N, seed + 2)
            support.sync()
        finally:
            if scratch is not None:
                scratch.free()

    def free(self) -> None:
        for buf in (self.a, self.b, self.c, self.out):
            buf.free()


class Checker:
    """`fmt`: how the operands it makes are stored (the targets' OperandFormat; a worker's
    checker serves one kernel and its baseline, which share one)."""

    def __init__(self, stream=None, fmt: OperandFormat = OperandFormat()) -> None:
        from ..cuda.cublas import Cublas
        from ..cuda.device import cuda
        from ..cuda.support import SupportKernels
        self.drv = cuda()
        self.stream = stream
        self.fmt = fmt
        self.support = SupportKernels(stream)
        self._dgemm = {lay: Cublas("cublas_fp64", stream=stream, b_layout=lay)
                       for lay in ("kn", "nk")}
        self.dgemm = self._dgemm["kn"]

    def operands(self, prob: Problem, seed: int | None = None,
                 fmt: OperandFormat | None = None) -> Operands:
        return Operands(self.support, prob, fresh_seed() if seed is None else seed,
                        fmt or self.fmt)

    def reference(self, ops: Operands, prob: Problem):
        """Device float64 (ref, mag): alpha*A@B + beta*C and |alpha||A||B| + |beta||C|, from
        A and B as stored (so as the kernel sees them: TF32 numbers, or bfloat16)."""
        M, N, K = prob.M, prob.N, prob.K
        drv = self.drv
        p = ops.fmt.precision
        dgemm = self._dgemm[ops.fmt.b_layout]
        a64, aa64 = drv.mem_alloc(M * K * 8), drv.mem_alloc(M * K * 8)
        b64, ab64 = drv.mem_alloc(K * N * 8), drv.mem_alloc(K * N * 8)
        ref, mag = drv.mem_alloc(M * N * 8), drv.mem_alloc(M * N * 8)
        try:
            self.support.widen(ops.a, a64, aa64, M * K, p)
            self.support.widen(ops.b, b64, ab64, K * N, p)
            dgemm.launcher(Problem(M, N, K, float(prob.alpha), 0.0))(a64, b64, ref)
            dgemm.launcher(Problem(M, N, K, abs(float(prob.alpha)), 0.0))(aa64, ab64, mag)
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
        for d in self._dgemm.values():
            d.close()
