"""Padded staging (registry `pad_k`): how a TMA kernel runs a K that TMA cannot address.

TMA needs every row stride to be a multiple of 16 bytes (gemm.core.tensormaps). With B stored
N x K (b_layout "nk") both operands' rows run along K, so K must be a multiple of 4 (float32)
or 8 (bfloat16). A kernel with `pad_k = true` takes any other K this way: before each launch
the launcher copies A (M x K) and B (N x K) into scratch buffers whose rows are K rounded up to
that multiple (Kp), the pad columns zero (zeros add nothing to any dot product, in any
precision), and runs the kernel with K = Kp, its tensor maps over the copies. C is the
kernel's own (ordinary stores, leading dimension N), so it is never staged. The copy kernel is
gemm/cuda/support.cu's sgemm_stage_pad_k_b32 / _b16; gemm.cuda.staging runs it, in the same
stream right before the GEMM, so every timed launch includes it.

Pure arithmetic, no GPU: `staging` says whether a problem is staged and how, `kernel_problem`
is the problem the kernel itself is launched with (the same object when nothing is staged).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .problem import MAX_ELEMENTS, Problem, ShapeRefused
from .registry import KernelSpec
from .tensormaps import TMA_STRIDE_ALIGN


@dataclass(frozen=True)
class PadCopy:
    """One operand staged: `rows` rows of `cols` elements (K, as the operand is stored) copied
    into rows of `padded` elements (Kp), the last padded - cols of each row zero."""
    operand: str          # "A" or "B"
    rows: int
    cols: int
    padded: int
    elt: int              # bytes per element (4: float32 / TF32, 2: bfloat16)

    @property
    def nbytes(self) -> int:
        """The scratch buffer's size."""
        return self.rows * self.padded * self.elt

    @property
    def traffic(self) -> int:
        """Bytes the copy moves per launch: the operand read once, the copy written once."""
        return self.rows * (self.cols + self.padded) * self.elt


@dataclass(frozen=True)
class Staging:
    k: int                # the K the kernel is launched with (Kp)
    copies: tuple         # PadCopy per operand, A then B

    @property
    def traffic(self) -> int:
        return sum(c.traffic for c in self.copies)


def k_multiple(spec: KernelSpec) -> int:
    """The K whose multiples give A's (and a K-major B's) rows 16-byte strides: 4 or 8."""
    return TMA_STRIDE_ALIGN // spec.operands.in_bytes


def staging(spec: KernelSpec, prob: Problem) -> Staging | None:
    """How `spec` stages `prob`, or None when it runs on the operands as they are: a kernel
    without `pad_k`, or a K already a multiple of k_multiple(spec). ShapeRefused where a
    staged copy would pass the kernels' 32-bit element count."""
    if not spec.pad_k:
        return None
    q = k_multiple(spec)
    if prob.K % q == 0:
        return None
    kp = -(-prob.K // q) * q
    elt = spec.operands.in_bytes
    for op, rows in (("A", prob.M), ("B", prob.N)):
        if rows * kp > MAX_ELEMENTS:
            raise ShapeRefused(f"{spec.name}: {op}'s copy with K padded from {prob.K} to {kp} "
                               f"would hold {rows * kp} elements, past the 32-bit limit "
                               f"{MAX_ELEMENTS}")
    # pad_k implies b_layout "nk" (registry check): A is M x K and B is N x K as stored
    return Staging(kp, (PadCopy("A", prob.M, prob.K, kp, elt),
                        PadCopy("B", prob.N, prob.K, kp, elt)))


def kernel_problem(spec: KernelSpec, prob: Problem) -> Problem:
    """The problem the kernel is launched with: `prob` with K = Kp when staged, else `prob`.
    (Only the launch sees Kp: FLOPS, tolerances and the reference keep the true K.)"""
    st = staging(spec, prob)
    return prob if st is None else replace(prob, K=st.k)
