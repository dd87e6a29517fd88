"""Launch a registered kernel on device buffers, following gemm.core.geometry's plan."""
from __future__ import annotations

from ..core.geometry import plan
from ..core.problem import Problem
from ..core.registry import KernelSpec

# (int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C)
SIGNATURE = "iiifPPfP"


def launcher(spec: KernelSpec, prob: Problem):
    """A function launch(a_ptr, b_ptr, c_ptr, stream=None) that enqueues the kernel once."""
    from .loader import load
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
