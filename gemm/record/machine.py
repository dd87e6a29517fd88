"""asv's machine file (~/.asv-machine.json) for this GPU: one machine name per GPU model."""
from __future__ import annotations

import json
import os
from pathlib import Path


def write_machine(name: str | None = None, path: str | None = None) -> str:
    """Describe this machine (GPU name, driver, CUDA version) under `name`; returns the name.
    Raises gemm.cuda.device.GPUUnavailable without a GPU."""
    from ..measure.facts import machine_info
    m = machine_info(name)
    p = Path(path or os.path.expanduser("~/.asv-machine.json"))
    data = json.loads(p.read_text()) if p.exists() else {"version": 1}
    data[m["machine"]] = m
    p.write_text(json.dumps(data, indent=4, sort_keys=True))
    return m["machine"]
