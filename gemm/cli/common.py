"""What several commands share: UsageError (one sentence, exit 2), kernels, sizes and
policies resolved as the commands take them, the GPU check and the sweep with its progress.
"""
from __future__ import annotations

import sys
from dataclasses import replace

from ..core import registry, shapes
from ..core.policy import Policy, named


POLICY_HELP = ("suite (the per-commit record's, default) or confirm (the gate's A/B and "
               "calibration: several operand sets per problem, more samples)")


class UsageError(Exception):
    pass


# "unsupported": a shape the kernel refuses by its launch contract (said, not a failure)
OK_STATUSES = ("ok", "unsupported")


def _targets(names, baselines_too=False) -> list[str]:
    if not names:
        return registry.names()
    out = []
    for n in names:
        if baselines_too and n in registry.BASELINES:
            out.append(n)
            continue
        try:
            out.append(registry.get(n).name)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return out


def _problems(sizes):
    try:
        return shapes.problems(sizes)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None


def _policy(mode: str, name: str = "suite") -> Policy:
    """The named policy in `mode`; sustained mode keeps every sample (none dropped): the
    clocks a loaded GPU settles at are what it measures."""
    try:
        p = named(name, mode)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return replace(p, throttle_fraction=0.0, floor="clock") if p.mode == "sustained" else p


def need_modules(*modules: str, extra: str = "track") -> None:
    """UsageError, before any work, where this Python lacks a package of an extra (the
    one-sentence message names the extra and the Python, not another one on the PATH)."""
    import importlib.util
    missing = []
    for m in modules:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(m)
    if missing:
        raise UsageError(f"this command needs {' and '.join(missing)}, which {sys.executable} does "
                         f"not have: install the package's {extra} extra (pip install -e "
                         f"\".[{extra}]\" in the checkout, or \"gemm[{extra}]\")")


def _need_gpu() -> None:
    from ..measure.sweep import probe_gpu
    ok, why = probe_gpu()
    if not ok:
        raise UsageError(f"this command needs a CUDA GPU, and none is usable here: {why}")


def _sweep(targets, problems, **kw) -> dict:
    from ..measure.sweep import progress_printer, sweep
    return sweep(targets, problems, progress=progress_printer(sys.stderr), **kw)
