"""Same machine code: does a newer revision build a kernel into exactly what an older one ran?

Git can say that a kernel's sources or registry entry changed; only the compiler can say
whether what runs changed. The gate (gemm.track.codeid, through `gemm regress`) asks here
where git sees such a change and nothing else a measurement runs changed: a refactor that
leaves every build byte-for-byte the same needs no A/B. A build is compared at each tuning
bucket's size (its tuned constants, where the kernel is tuned for this machine): the registry
entry as the launcher reads it (its summary and search space aside), the nvcc flags, the
SASS of every function and cuobjdump's resource usage. No GPU: nvcc and cuobjdump only.
"""
from __future__ import annotations

import functools
from dataclasses import asdict

from ..core.problem import Problem
from ..core.registry import RegistryError
from ..core.tuning import TUNING_BUCKETS
from .build import (ExplainError, Tools, Tree, base_options, checkout, compile_cubin,
                    find_tools, resolve_spec)

NOT_RUN = ("summary", "tune", "tuned")   # registry fields a launch does not read


def fingerprint(tools: Tools, tree: Tree, kernel: str, machine: str) -> tuple:
    """What `kernel` runs as in `tree`, per tuning bucket: (bucket, registry facts, nvcc
    flags, SASS, resource usage)."""
    out = []
    options = base_options(tree)
    for bucket, _, size in TUNING_BUCKETS:
        spec, _ = resolve_spec(tree, kernel, Problem.parse(size), machine)
        arch = "sm_90" if spec.arch == "native" else spec.arch
        _, sass_text, usage = compile_cubin(tools, tree.kernels, spec, arch, options)
        facts = {k: v for k, v in asdict(spec).items() if k not in NOT_RUN}
        out.append((bucket, facts, options, sass_text, usage))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def same_machine_code(repo: str, older: str, newer: str, kernel: str, machine: str) -> bool:
    """True only where both revisions build `kernel` identically at every bucket; False where
    anything differs or cannot be built or read here (no nvcc, an unknown revision)."""
    try:
        tools = find_tools()
        with checkout(repo, [older, newer]) as trees:
            old, new = (fingerprint(tools, trees[rev], kernel, machine)
                        for rev in (older, newer))
    except (ExplainError, RegistryError, ValueError, OSError):
        return False
    return old == new
