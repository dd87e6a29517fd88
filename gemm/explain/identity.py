"""Same machine code: does a newer commit build a kernel into exactly what an older one ran?

Git can say that a kernel's sources or registry entry changed; only the compiler can say
whether what runs changed. The gate (gemm.track.codeid, through `gemm regress`) asks here
where git sees such a change: a refactor that leaves every build the same needs no A/B. A
build is compared at each tuning bucket's size, with the machine's tuned constants: the
registry entry as the launcher reads it (its summary and search space aside), the nvcc
options (the tree's gemm/cuda/loader.py), the SASS of every function, cuobjdump's resource
usage and the cubin's attribute, constant and shared-memory sections (cluster shape, maximum
threads, initialised data). Anything it cannot build or read is "not the same". No GPU.
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ..core.problem import Problem
from ..core.registry import load_registry
from ..core.tuning import TUNING_BUCKETS
from .build import (ExplainError, Tools, Tree, base_options, checkout, compile_cubin,
                    find_tools, lookup, resolve_rev, resolve_spec)

NOT_RUN = ("summary", "tune", "tuned")   # registry fields a launch does not read
_answers: dict = {}                      # (repo, older sha, newer sha, kernel, machine, arch)


def fingerprint(tools: Tools, tree: Tree, kernel: str, machine: str, arch: str | None) -> tuple:
    """What `kernel` runs as in `tree` on `machine` (GPU architecture `arch`): the tree's nvcc
    options (gemm/cuda/loader.py as a whole) and, per tuning bucket, (bucket, registry facts,
    SASS, resource usage, the cubin's launch-relevant sections). ExplainError where that
    cannot be known: a tuned kernel without this machine's table, a "native" kernel without
    an architecture."""
    spec = lookup(load_registry(tree.kernels / "kernels.toml", files=True), kernel, tree.rev)
    if spec.tuned and not (tree.kernels / "tuned" / f"{machine}.toml").is_file():
        raise ExplainError(f"{kernel} is tuned, and no table for {machine} says with what")
    target = arch if spec.arch == "native" else spec.arch
    if not target:
        raise ExplainError(f"{kernel} builds for the GPU it runs on, which is not known")
    loader = tree.root / "gemm" / "cuda" / "loader.py" if tree.root else None
    out: list = [base_options(tree), loader.read_text() if loader and loader.is_file() else None]
    for bucket, _, size in TUNING_BUCKETS:
        spec, _ = resolve_spec(tree, kernel, Problem.parse(size), machine)
        built = compile_cubin(tools, tree.kernels, spec, target, out[0])[1:]
        facts = {k: v for k, v in asdict(spec).items() if k not in NOT_RUN}
        out.append((bucket, facts, *built))
    return tuple(out)


def same_machine_code(repo: str, older: str, newer: str, kernel: str, machine: str,
                      arch: str | None = "sm_90") -> bool:
    """True only where both commits build `kernel` identically at every bucket; False where
    anything differs or cannot be built or read here (no nvcc, an unknown revision, any
    error: the gate then goes by git)."""
    try:
        shas = resolve_rev(repo, older), resolve_rev(repo, newer)
        key = (str(Path(repo).resolve()), *shas, kernel, machine, arch)
        if None in shas:
            return False
        if key not in _answers:
            tools = find_tools()
            with checkout(repo, list(shas)) as trees:
                old, new = (fingerprint(tools, trees[sha], kernel, machine, arch)
                            for sha in shas)
            _answers[key] = old == new
        return _answers[key]
    except Exception:   # noqa: BLE001 -- a question it cannot answer is "not the same"
        return False
