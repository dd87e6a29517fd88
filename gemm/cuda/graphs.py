"""Batches of launches captured once into a CUDA graph and replayed with one call.

A hot-cache sample is a batch of back-to-back launches. Enqueued one by one from Python,
small problems (cuBLAS at 512: ~20 us of GPU work against ~10 us of host call overhead) are
partly host-bound and their timings wander with the CPU. Replaying a captured graph puts
the whole batch on the GPU with one call. Uses cuda.bindings (the CUDA Python driver
bindings that nvmath-python already depends on); PyCUDA has no graph API.
"""
from __future__ import annotations


class GraphError(RuntimeError):
    pass


def _check(res, what: str):
    from cuda.bindings import driver as d
    err = res[0] if isinstance(res, tuple) else res
    if err != d.CUresult.CUDA_SUCCESS:
        raise GraphError(f"{what} failed: {err}")
    return res[1] if isinstance(res, tuple) and len(res) > 1 else None


class CapturedBatch:
    """`n` calls of fn() (each enqueueing work on `stream`) as one replayable graph."""

    def __init__(self, fn, n: int, stream) -> None:
        from cuda.bindings import driver as d
        self._d = d
        self.n = n
        self.graph = self.exe = None
        self.h = d.CUstream(stream.handle)
        _check(d.cuStreamBeginCapture(self.h, d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
               "cuStreamBeginCapture")
        try:
            for _ in range(n):
                fn()
        finally:
            res = d.cuStreamEndCapture(self.h)
        self.graph = _check(res, "cuStreamEndCapture")
        self.exe = _check(d.cuGraphInstantiate(self.graph, 0), "cuGraphInstantiate")

    def replay(self) -> None:
        _check(self._d.cuGraphLaunch(self.exe, self.h), "cuGraphLaunch")

    def close(self) -> None:
        if self.exe is not None:
            self._d.cuGraphExecDestroy(self.exe)
            self.exe = None
        if self.graph is not None:
            self._d.cuGraphDestroy(self.graph)
            self.graph = None
