"""Fault injection, for calibrating and testing the gate (off by default).

A delay of a chosen share of a kernel's own time, added by a one-thread spin kernel launched
right after every launch of it (gemm.cuda.support's delay_spin; gemm.measure.worker sizes it
from the kernel's time measured just before). A run with injection on records it in every
record it touches ("fault_injection": share, seconds, source) and says so on stderr.

Two switches, the first that names a kernel wins:
  GEMM_INJECT_DELAY   environment: "0.01" (every kernel) or "05_2d=0.01,09=0.005" (by name or
                      prefix); what `gemm calibrate` sets for its injected arms
  inject_delay        a kernel's registry entry (kernels.toml): a share, for a throwaway commit
                      that must carry its slowdown in its own tree (the gate's drift test)
"""
from __future__ import annotations

import os

ENV = "GEMM_INJECT_DELAY"


def _share(text: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{what}: {text!r} is not a number") from None
    if not 0 <= v < 1:
        raise ValueError(f"{what}: a delay share must be in [0, 1), got {v}")
    return v


def parse(text: str) -> dict[str, float]:
    """'0.01' -> {'': 0.01} (every kernel); 'a=0.01,b=0.02' -> {'a': 0.01, 'b': 0.02}."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, val = part.rpartition("=")
        out[name.strip() if eq else ""] = _share(val if eq else part, ENV)
    return out


def delay_share(spec, environ=None) -> tuple[float, str] | None:
    """(share, source) of the delay to inject after `spec`'s launches, or None."""
    env = (os.environ if environ is None else environ).get(ENV, "")
    if env:
        for name, share in parse(env).items():
            if name == "" or spec.name == name or spec.name.startswith(name):
                return (share, f"{ENV}={env}") if share > 0 else None
    share = getattr(spec, "inject_delay", 0.0) or 0.0
    return (share, "registry inject_delay") if share > 0 else None
