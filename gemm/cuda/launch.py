"""Launch a registered kernel on device buffers, following gemm.core.geometry's plan (with the
tuned constants of gemm.core.tuning where the kernel has them).

Every kernel takes (int M, int N, int K, float alpha, const A*, const B*, float beta, float* C).
A kernel whose registry entry lists `tma` maps takes those first, by value (128-byte
CUtensorMap each, `const __grid_constant__ CUtensorMap`), in the order listed, then the
scalars. PyCUDA hands the driver one packed parameter buffer, which the driver copies to the
start of the kernel's parameter space; that space begins at constant-bank offset 0x210 on
sm_90, and the compiler places a 64-byte-aligned parameter at a 64-byte-aligned bank address,
so the first map sits 48 bytes into the space (ptxas's KPARAM_INFO: offset 0x30). The buffer
therefore starts with `tma_param_pad` bytes of padding, then the maps (128 bytes each), then
the scalars at their natural alignment. The maps hold A's and B's addresses, so they are
encoded (gemm.cuda.tma) for each new pair of pointers and kept for the next launch on the
same pair; a kernel that also lists a map of C (TMA stores) has it encoded from C's pointer
as well (per triple), 128 zero bytes where TMA cannot address C. `smem` (bytes)
is passed as the launch's dynamic shared memory. A `persistent` kernel gets min(tiles, SMs)
blocks in a 1-D grid instead of one block per tile (gemm.core.geometry.persistent_grid); each
block walks the tiles b, b + gridDim.x, ... of the same tile grid.
A `pad_k` kernel whose K breaks TMA's 16-byte rows (gemm.core.staging) is launched on padded
copies: the launcher allocates them once (gemm.cuda.staging.PaddedOperands), and each launch
enqueues the copy kernel and then the GEMM, in that stream, with K padded and the copies'
pointers (the maps encode them once, since they never change). C is passed as it is.
A `split_k` kernel below half a wave (gemm.core.splitk) gets a grid z of S splits, alpha 1,
beta 0 and the workspace (gemm.cuda.staging.SplitKWorkspace, allocated once per launcher) in
place of C; the reduction then writes C = alpha * sum + beta * C, in the same stream.
"""
from __future__ import annotations

from ..core.geometry import persistent_grid, plan
from ..core.problem import Problem
from ..core.registry import KernelSpec
from ..core.splitk import split_k
from ..core.tuning import resolve

# (int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C)
SIGNATURE = "iiifPPfP"

# Where a kernel's parameter space starts in constant bank 0, per GPU family (sm_XY, no "a").
PARAM_BANK_BASE = {"sm_90": 0x210}


def tma_param_pad(arch: str) -> int:
    """Bytes before the first (64-byte-aligned) tensor map in the packed parameter buffer of a
    kernel built for `arch` (sm_90a -> 48). ValueError for a family whose layout is unknown."""
    family = arch[:-1] if arch.endswith("a") else arch
    if family not in PARAM_BANK_BASE:
        raise ValueError(f"no known parameter-bank layout for {arch}: TMA kernels run on "
                         f"{sorted(PARAM_BANK_BASE)} only")
    return -PARAM_BANK_BASE[family] % 64


def param_format(spec: KernelSpec, arch: str) -> str:
    """The PyCUDA (struct) format of a kernel's packed parameters; see param_head."""
    if not spec.tma:
        return SIGNATURE
    return f"{tma_param_pad(arch)}s" + "128s" * len(spec.tma) + SIGNATURE


def param_head(spec: KernelSpec, arch: str, maps: tuple) -> tuple:
    """The values that come before (M, N, K, ...) in the packed parameters: the padding and
    the encoded maps of a TMA kernel, nothing for the others."""
    if not spec.tma:
        return ()
    return (bytes(tma_param_pad(arch)), *maps)


def launcher(spec: KernelSpec, prob: Problem):
    """A function launch(a_ptr, b_ptr, c_ptr, stream=None) that enqueues the kernel once.
    A tuned kernel runs with its constants for this GPU and the problem's size class."""
    from .device import info
    from .loader import load
    spec = resolve(spec, prob, info().slug)
    calls_plan = plan(spec, prob)          # ValueError for shapes the kernel cannot take
    maps = staged = None
    kprob = prob
    if spec.tma:
        from ..core.staging import staging
        from ..core.tensormaps import plans
        from .tma import TensorMaps
        st = staging(spec, prob)           # pad_k and K off TMA's rule: A and B staged padded
        if st is not None:
            from dataclasses import replace
            kprob = replace(prob, K=st.k)
        maps = TensorMaps(plans(spec, kprob))   # ValueError for unaligned strides
    with_c = any(t.operand == "C" for t in spec.tma)   # C's map: from C's pointer too
    k = load(spec)
    if kprob is not prob:
        from .staging import PaddedOperands
        staged = PaddedOperands(st)        # once per problem; freed with the launcher
    if spec.persistent:
        calls_plan = [(e, persistent_grid(g, info().sms)) for e, g in calls_plan]
    split = split_k(spec, kprob, info().sms)
    work = None
    if split is not None:
        from .staging import SplitKWorkspace
        work = SplitKWorkspace(split)      # once per problem; freed with the launcher
        calls_plan = [(e, (g[0], g[1], split.splits)) for e, g in calls_plan]
    calls = [(k.functions[entry], grid if grid[2] > 1 else grid[:2]) for entry, grid in calls_plan]
    from .loader import target_arch
    arch = target_arch(spec, info().arch)
    sig = param_format(spec, arch)
    for f, _ in calls:
        f.prepare(sig)
    block, smem = spec.block, spec.smem
    M, N, K = kprob.M, kprob.N, kprob.K
    alpha, beta = float(prob.alpha), float(prob.beta)

    def launch(a, b, c, stream=None):
        if staged is not None:             # the copies first, in the same stream
            a, b = staged.stage(a, b, stream)
        if maps is None:
            head = ()
        elif with_c:                       # A's, B's and C's maps
            head = param_head(spec, arch, maps.encode(int(a), int(b), int(c)))
        else:
            head = param_head(spec, arch, maps.encode(int(a), int(b)))
        out, al, be = (work.pointer(), 1.0, 0.0) if work is not None else (int(c), alpha, beta)
        for f, grid in calls:
            f.prepared_async_call(grid, block, stream, *head, M, N, K, al, int(a),
                                  int(b), be, out, shared_size=smem)
        if work is not None:               # the partial sums into C, in the same stream
            work.reduce(c, alpha, beta, stream)

    launch.staged = staged                 # None, or the PaddedOperands (tests, explain)
    launch.split = work                    # None, or the SplitKWorkspace
    return launch
