"""Why did a kernel get slower? `gemm explain`: two builds of a kernel (two revisions, or
one revision with different defines) compared without a GPU: resources and occupancy per
entry point, SASS instruction mix (whole function and K loop), the K loop's diff and the
launch at a size; where a GPU answers, each side also run with its own tree's code: timed
(with the SM clock, power and temperature sampled) and one launch profiled with ncu (runs,
ncu, gpureport; the NVML sampler is gemm.machine.nvml's); for a drop the gate confirmed, the
machine over its A/B (abmachine). Layers: core, machine and itself (no CUDA
imported here; nvcc, cuobjdump, git, ncu and each tree's own `python -m gemm` as tools; NVML
imported lazily). docs/explain.md says how to read it."""
from __future__ import annotations

from ..core.problem import Problem
from . import build as _build
from . import resources as _res
from .report import Explanation, compare, summarise
from .runs import GpuOptions, Side, measure

__all__ = ["explain", "Explanation", "GpuOptions"]


def explain(kernel: str, size: str, old: str | None = None, new: str = "HEAD", repo=".",
            old_defines: dict | None = None, new_defines: dict | None = None,
            arch: str = _build.DEFAULT_ARCH, gpu: str = _build.DEFAULT_GPU,
            limits: _res.SmLimits = _res.SM90, on_gpu: GpuOptions | None = None,
            log=lambda msg: None) -> Explanation:
    """Build `kernel` at `old` and `new` (git revisions; "." the working tree) with their
    own registry entries, overridden by old_defines / new_defines, and compare them at
    `size`. `old` defaults to new's parent (HEAD for the working tree), or to `new` itself
    where defines are given. With `on_gpu`, each side also runs on the GPU with its own
    tree's code (runs.measure; where no GPU answers, the report says so).
    Raises build.ExplainError (one sentence) where it cannot."""
    try:
        prob = Problem.parse(size)
    except (ValueError, TypeError) as exc:
        raise _build.ExplainError(str(exc)) from None
    if old is None:
        old = new if (old_defines or new_defines) else (
            "HEAD" if new == _build.WORKTREE else f"{new}~1")
    tools = _build.find_tools()
    with _build.checkout(repo, [old, new]) as trees:
        a = _build.build(tools, trees[old], kernel, prob, arch, gpu, old_defines, limits)
        b = _build.build(tools, trees[new], kernel, prob, arch, gpu, new_defines, limits)
        report = None
        if on_gpu is not None:
            sides = [Side(name, trees[rev].root.resolve() if trees[rev].root else None, bld,
                          dict(defs or {}), prob.label)
                     for name, rev, bld, defs in (("old", old, a, old_defines),
                                                  ("new", new, b, new_defines))]
            report = measure(*sides, on_gpu, log)
    ex = compare(a, b, prob.label, limits)
    if report is not None:
        ex.gpu = report
        ex.summary = summarise(ex)
    return ex
