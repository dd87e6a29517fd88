"""asv's machine identity: one per GPU model, so a lent machine's other facts never split a series.

asv names a series by every field of the machine file (plus the Python): two runs whose
num_cpu, os or ram differ land in two graphs, and the lent GPU hosts differ in exactly those
(16 or 32 cores, kernel builds, RAM) while the GPU, the thing measured, is the same model. So
the machine file, and every result file's params, hold only IDENTITY; the host's other facts
(HOST) are kept beside them in the result file under "gemm_host", which asv does not read.
"""
from __future__ import annotations

import json
import os
import platform
from pathlib import Path

IDENTITY = ("machine", "arch", "gpu", "gpu_arch")         # what a series is measured on
HOST = ("os", "cpu", "num_cpu", "ram", "driver", "cuda",     # what a lent host happens to have
        "host", "gpu_uuid")    # which runner and which GPU of the model made the run (a fleet)
HOST_KEY = "gemm_host"


def identity(info: dict) -> dict:
    """The fields of a machine description that name a series in asv."""
    return {k: info[k] for k in IDENTITY if k in info}


def host(info: dict) -> dict:
    return {k: info[k] for k in HOST if k in info}


def host_facts(name: str | None = None) -> dict:
    """This host's facts (HOST): from the GPU where one answers, else what the OS says; with
    the host's name and the measured GPU's UUID (NVML, the GPU that CUDA_VISIBLE_DEVICES
    shows), so that the runs of several runners of one model tell which GPU made them."""
    try:
        from ..measure.facts import machine_info
        out = host(machine_info(name))
    except Exception:   # no GPU or no driver here: the OS's facts only
        out = {"os": platform.platform(), "cpu": platform.processor() or platform.machine(),
               "num_cpu": str(os.cpu_count())}
    out["host"] = platform.node()
    uuid = gpu_uuid()
    if uuid:
        out["gpu_uuid"] = uuid
    return out


def gpu_uuid() -> str | None:
    """The UUID ('GPU-...') of the GPU this process measures on, or None."""
    try:
        from ..measure.facts import gpu_identity
        ident = gpu_identity()
    except Exception:
        return None
    return ident.rsplit(" ", 1)[-1] if ident else None


def unify_params(data: dict, facts: dict | None = None) -> bool:
    """A result file's params reduced to the identity (the host's facts moved to HOST_KEY;
    `facts` fills what the params did not hold). True if it changed."""
    params = data.get("params") or {}
    moved = {k: params[k] for k in HOST if k in params}
    kept = {k: v for k, v in params.items() if k not in HOST}
    if not moved and (not facts or HOST_KEY in data):
        return False
    data["params"] = kept
    data[HOST_KEY] = {**(facts or {}), **data.get(HOST_KEY, {}), **moved}
    return True


def write_machine(name: str | None = None, path: str | None = None) -> str:
    """Describe this machine (its GPU model) under `name` in asv's machine file; returns the
    name. Raises gemm.cuda.device.GPUUnavailable without a GPU."""
    from ..measure.facts import machine_info
    m = identity(machine_info(name))
    p = Path(path or os.path.expanduser("~/.asv-machine.json"))
    data = json.loads(p.read_text()) if p.exists() else {"version": 1}
    data[m["machine"]] = m
    p.write_text(json.dumps(data, indent=4, sort_keys=True))
    return m["machine"]
