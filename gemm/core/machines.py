"""Machine names: one per GPU model, so histories from different GPUs stay apart."""
from __future__ import annotations

import re


def gpu_slug(name: str) -> str:
    """A machine name from the GPU name: 'NVIDIA H200' -> 'h200'."""
    s = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.I).lower()
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "gpu"
