"""Split-K (registry `split_k`): how a kernel fills the GPU when its tiles are fewer than SMs.

Below one wave (at 512 10_autotuned's 64 x 128 tiles make 32 blocks for 132 SMs) a block per
tile leaves most SMs idle. A `split_k` kernel then runs S blocks per tile instead: the launch
gets a third grid dimension S, block z takes the K range [z * chunk, min((z + 1) * chunk, K))
and writes its partial tile, the plain sum (alpha 1, beta 0, C not read), to slice z of a
float32 workspace of S x M x N; a second kernel (gemm/cuda/support.cu's
sgemm_split_k_reduce) sums the S slices in order z = 0 .. S - 1 (deterministic: no atomics)
and writes C = alpha * sum + beta * C. Both are inside every launch (timed, captured into
graphs, run under compute-sanitizer). FLOPS, tolerance and the reference stay the problem's.

The rule (pure arithmetic, no GPU): no split unless the tiles are at most half the SMs; then
S = min(SMs // tiles, K // (MIN_STEPS * BK), MAX_SPLITS), no split when that is below 2.
chunk = ceil(K / S) rounded up to a multiple of BK, the formula the kernel itself evaluates
from K and gridDim.z, so every split but the last is whole K steps and the K remainder falls
in the last. Where S is 1 the launch is exactly the kernel's plain one.
"""
from __future__ import annotations

from dataclasses import dataclass

from .problem import Problem
from .registry import KernelSpec

MIN_STEPS = 16      # K steps of BK each split runs at least (128 with BK = 8)
MAX_SPLITS = 8


@dataclass(frozen=True)
class SplitK:
    splits: int          # S: blocks per tile, the launch's grid z
    chunk: int           # K per split (a multiple of BK); the last split takes what is left
    M: int
    N: int
    K: int

    def ranges(self) -> list[tuple[int, int]]:
        """[(k_begin, k_end), ...] of the splits, in z order."""
        return [(z * self.chunk, min((z + 1) * self.chunk, self.K)) for z in range(self.splits)]

    @property
    def workspace_elements(self) -> int:
        return self.splits * self.M * self.N

    @property
    def workspace_bytes(self) -> int:
        return 4 * self.workspace_elements

    @property
    def traffic(self) -> int:
        """Bytes the reduction moves per launch: the S slices read, C read and written (beta
        != 0; with beta == 0 C is only written)."""
        return 4 * self.M * self.N * (self.splits + 2)


def chunk_for(K: int, splits: int, bk: int) -> int:
    """K per split, as the kernel computes it: ceil(K / splits) rounded up to bk."""
    per = -(-K // splits)
    return -(-per // bk) * bk


def split_k(spec: KernelSpec, prob: Problem, sms: int) -> SplitK | None:
    """How `spec` splits K for `prob` on a GPU of `sms` SMs, or None (one block per tile)."""
    if not spec.split_k:
        return None
    tm, tn = spec.tile
    tiles = -(-prob.M // tm) * -(-prob.N // tn)
    if tiles * 2 > sms:
        return None
    bk = spec.defines["BK"]
    s = min(sms // tiles, prob.K // (MIN_STEPS * bk), MAX_SPLITS)
    if s < 2:
        return None
    chunk = chunk_for(prob.K, s, bk)
    # K >= s * MIN_STEPS * bk and s <= MAX_SPLITS < MIN_STEPS: (s - 1) * chunk < K, no split
    # is empty
    assert (s - 1) * chunk < prob.K, (prob, s, chunk)
    return SplitK(s, chunk, prob.M, prob.N, prob.K)
