"""Scratch buffers on a kernel's launch path. Padded staging (gemm.core.staging says when and
how): the scratch copies of A and B with K padded, allocated once per launcher (one problem), and the copy kernel that
fills them (support.cu's sgemm_stage_pad_k_b32 / _b16), enqueued on the launch's stream right
before the GEMM, so the copy is part of every launch (timed, captured into CUDA graphs, run
under compute-sanitizer) and a launch reads whatever A and B it is handed. Split-K (gemm.core.splitk): the workspace of
partial products and the reduction into C, enqueued right after the GEMM."""
from __future__ import annotations

from ..core.splitk import SplitK
from ..core.staging import Staging

_BLOCK = 256
_ENTRY = {4: "sgemm_stage_pad_k_b32", 2: "sgemm_stage_pad_k_b16"}
_REDUCE = "sgemm_split_k_reduce"


class PaddedOperands:
    """`stage(a, b, stream)` enqueues the copies and returns the (A, B) pointers the kernel
    takes: the scratch copies. `free()` releases them (else they go with the object)."""

    def __init__(self, st: Staging) -> None:
        from .device import cuda, info
        from .support import support_module
        drv = cuda()
        self.staging = st
        self.bufs = {c.operand: drv.mem_alloc(c.nbytes) for c in st.copies}
        self._calls = []
        mod = support_module()
        for c in st.copies:
            f = mod.get_function(_ENTRY[c.elt])
            f.prepare("PPiii")
            vectors = c.rows * c.padded * c.elt // 16
            grid = max(1, min(-(-vectors // _BLOCK), info().sms * 16))
            self._calls.append((c, f, (grid, 1)))

    def pointers(self) -> tuple[int, int]:
        return int(self.bufs["A"]), int(self.bufs["B"])

    def stage(self, a, b, stream=None) -> tuple[int, int]:
        src = {"A": int(a), "B": int(b)}
        for c, f, grid in self._calls:
            f.prepared_async_call(grid, (_BLOCK, 1, 1), stream, src[c.operand],
                                  int(self.bufs[c.operand]), c.rows, c.cols, c.padded)
        return self.pointers()

    def free(self) -> None:
        for buf in self.bufs.values():
            buf.free()
        self.bufs = {}


class SplitKWorkspace:
    """Split-K (gemm.core.splitk): the float32 workspace of S x M x N partial products,
    allocated once per launcher (one problem), and the reduction (support.cu's
    sgemm_split_k_reduce) that sums it into C, enqueued after the GEMM in the same stream.
    `free()` releases the workspace (else it goes with the object)."""

    def __init__(self, split: SplitK) -> None:
        from .device import cuda, info
        from .support import support_module
        self.split = split
        self.buf = cuda().mem_alloc(split.workspace_bytes)
        self._f = support_module().get_function(_REDUCE)
        self._f.prepare("PPqiff")
        mn = split.M * split.N
        self._grid = (max(1, min(-(-mn // _BLOCK), info().sms * 16)), 1)

    def pointer(self) -> int:
        return int(self.buf)

    def reduce(self, c, alpha: float, beta: float, stream=None) -> None:
        self._f.prepared_async_call(self._grid, (_BLOCK, 1, 1), stream, self.pointer(), int(c),
                                    self.split.M * self.split.N, self.split.splits,
                                    float(alpha), float(beta))

    def free(self) -> None:
        if self.buf is not None:
            self.buf.free()
            self.buf = None
