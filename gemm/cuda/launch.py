"""Launch a registered kernel on device buffers, following gemm.core.geometry's plan (with the
tuned constants of gemm.core.tuning where the kernel has them)."""
from __future__ import annotations

from ..core.geometry import plan
from ..core.problem import Problem
from ..core.registry import KernelSpec
from ..core.tuning import resolve

# (int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C)
SIGNATURE = "iiifPPfP"


def launcher(spec: KernelSpec, prob: Problem):
    """A function launch(a_ptr, b_ptr, c_ptr, stream=None) that enqueues the kernel once.
    A tuned kernel runs with its constants for this GPU and the problem's size class."""
    from .device import info
    from .loader import load
    spec = resolve(spec, prob, info().slug)
    k = load(spec)
    calls = [(k.functions[entry], grid) for entry, grid in plan(spec, prob)]
    for f, _ in calls:
        f.prepare(SIGNATURE)
    block = spec.block
    M, N, K = prob.M, prob.N, prob.K
    alpha, beta = float(prob.alpha), float(prob.beta)

    def launch(a, b, c, stream=None):
        for f, grid in calls:
            f.prepared_async_call(grid[:2], block, stream, M, N, K, alpha, int(a), int(b),
                                  beta, int(c))

    return launch
