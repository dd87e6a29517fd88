"""Padded staging on the device (gemm.core.staging says when and how): the scratch copies of A
and B with K padded, allocated once per launcher (one problem), and the copy kernel that
fills them (support.cu's sgemm_stage_pad_k_b32 / _b16), enqueued on the launch's stream right
before the GEMM, so the copy is part of every launch (timed, captured into CUDA graphs, run
under compute-sanitizer) and a launch reads whatever A and B it is handed."""
from __future__ import annotations

from ..core.staging import Staging

_BLOCK = 256
_ENTRY = {4: "sgemm_stage_pad_k_b32", 2: "sgemm_stage_pad_k_b16"}


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
