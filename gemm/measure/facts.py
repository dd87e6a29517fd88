"""What the machine is, for asv's machine file and the kept verdicts (needs a GPU)."""
from __future__ import annotations

import os
import platform


def machine_info(name: str | None = None) -> dict:
    from ..cuda.device import info
    dev = info()
    try:
        ram = str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024)
    except (ValueError, OSError, AttributeError):
        ram = ""
    return {"machine": name or dev.slug, "arch": platform.machine(), "os": platform.platform(),
            "cpu": platform.processor() or platform.machine(), "num_cpu": str(os.cpu_count()),
            "ram": ram, "gpu": dev.name, "gpu_arch": dev.arch, "driver": dev.driver,
            "cuda": dev.cuda}


def gpu_name() -> str | None:
    """'NVIDIA H200': CUDA's name of the first visible GPU, else NVML's; None on a machine
    with no GPU."""
    from ..cuda.device import Clocks, name_of_device_0
    try:
        return name_of_device_0()
    except Exception:
        return Clocks().name()


def gpu_identity() -> str | None:
    """'NVIDIA H200 GPU-<uuid>': which physical GPU this is (lent machines differ)."""
    from ..cuda.device import Clocks
    return Clocks().identity()
