"""Launch a registered kernel on device buffers, following gemm.core.geometry's plan (with the
tuned constants of gemm.core.tuning where the kernel has them).

Every kernel takes (int M, int N, int K, float alpha, const A*, const B*, float beta, float* C).
A kernel whose registry entry lists `tma` maps takes those first, by value (128-byte
CUtensorMap each, `const __grid_constant__ CUtensorMap`), in the order listed; they sit at
offsets 0, 128, ... of the parameter buffer, so their 64-byte alignment holds, and the scalars
follow at 128 * n. The maps hold A's and B's addresses, so they are encoded (gemm.cuda.tma)
for each new pair of pointers and kept for the next launch on the same pair. `smem` (bytes)
is passed as the launch's dynamic shared memory.
"""
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
    calls_plan = plan(spec, prob)          # ValueError for shapes the kernel cannot take
    maps = None
    if spec.tma:
        from ..core.tensormaps import plans
        from .tma import TensorMaps
        maps = TensorMaps(plans(spec, prob))   # ValueError for unaligned strides
    k = load(spec)
    calls = [(k.functions[entry], grid) for entry, grid in calls_plan]
    sig = "128s" * len(spec.tma) + SIGNATURE
    for f, _ in calls:
        f.prepare(sig)
    block, smem = spec.block, spec.smem
    M, N, K = prob.M, prob.N, prob.K
    alpha, beta = float(prob.alpha), float(prob.beta)

    def launch(a, b, c, stream=None):
        head = maps.encode(int(a), int(b)) if maps is not None else ()
        for f, grid in calls:
            f.prepared_async_call(grid[:2], block, stream, *head, M, N, K, alpha, int(a),
                                  int(b), beta, int(c), shared_size=smem)

    return launch
