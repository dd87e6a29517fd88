"""The machine while a side ran: SM clock, power and temperature read through NVML
(nvidia-ml-py, imported lazily) every 50 ms in a thread of `gemm explain`'s own process, and
summarised as min / median / max over the samples taken while the kernel ran. Whether a GPU
answers at all (NVML, else `nvidia-smi -L`). Nothing here needs CUDA.

Which GPU: the first of CUDA_VISIBLE_DEVICES where it is set (an index, or a GPU-<uuid>),
else NVML's device 0.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time

INTERVAL_S = 0.05
BUSY_UTIL = 50        # % GPU utilisation that counts as the kernel running (no window given)


def _nvml():
    import pynvml
    pynvml.nvmlInit()
    return pynvml


def _text(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def handle(nvml):
    """NVML's handle of the GPU CUDA's device 0 is (see the module's docstring)."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if first.startswith("GPU-"):
        return nvml.nvmlDeviceGetHandleByUUID(first.encode())
    return nvml.nvmlDeviceGetHandleByIndex(int(first) if first.isdigit() else 0)


def gpu_here() -> tuple[bool, str]:
    """(True, the GPU's name) where a GPU answers; else (False, why not)."""
    why = ""
    try:
        nvml = _nvml()
        if nvml.nvmlDeviceGetCount() > 0:
            return True, _text(nvml.nvmlDeviceGetName(handle(nvml)))
        why = "NVML sees no GPU"
    except Exception as exc:   # no nvidia-ml-py, no driver
        why = f"NVML: {type(exc).__name__}: {exc}".strip()
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.lstrip().startswith("GPU"):
                return True, out.stdout.splitlines()[0].split(":", 1)[-1].split("(")[0].strip()
            why += f"; nvidia-smi -L: exit {out.returncode}"
        except (OSError, subprocess.SubprocessError) as exc:
            why += f"; nvidia-smi -L: {exc}"
    else:
        why += "; no nvidia-smi"
    return False, why


class Sampler:
    """`with Sampler() as s: ...` samples (time, SM MHz, W, C, utilisation %) until the block
    ends; `s.summary(window)` reads them. Without NVML it samples nothing and `why` says so."""

    def __init__(self, interval: float = INTERVAL_S) -> None:
        self.interval, self.samples, self.why = interval, [], ""
        self.gpu, self.uuid = None, None
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self) -> Sampler:
        try:
            nvml = _nvml()
            h = handle(nvml)
            self.gpu = _text(nvml.nvmlDeviceGetName(h))
            self.uuid = _text(nvml.nvmlDeviceGetUUID(h))
        except Exception as exc:
            self.why = f"no NVML here ({type(exc).__name__}: {exc})"
            return self
        self._thread = threading.Thread(target=self._loop, args=(nvml, h), daemon=True)
        self._thread.start()
        return self

    def _loop(self, nvml, h) -> None:
        def ask(fn):
            try:
                return fn()
            except Exception:
                return None
        while not self._stop.is_set():
            self.samples.append((
                time.time(),
                ask(lambda: float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))),
                ask(lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                ask(lambda: float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))),
                ask(lambda: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu))))
            self._stop.wait(self.interval)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def summary(self, window: list | None = None) -> dict | None:
        return summarise(self.samples, window, self.gpu, self.uuid)


def _stat(values: list) -> dict | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"min": round(min(vals), 1), "median": round(statistics.median(vals), 1),
            "max": round(max(vals), 1)}


def summarise(samples: list, window: list | None = None, gpu: str | None = None,
              uuid: str | None = None) -> dict | None:
    """min / median / max of the SM clock (MHz), power (W) and temperature (C) over the
    samples inside `window` ([start, end], time.time()), else over those where the GPU was
    busy (utilisation >= BUSY_UTIL %); None where no sample qualifies."""
    if window:
        kept, how = [s for s in samples if window[0] <= s[0] <= window[1]], "while it ran"
    else:
        kept = [s for s in samples if s[4] is not None and s[4] >= BUSY_UTIL]
        how = f"where the GPU was busy (utilisation >= {BUSY_UTIL} %)"
    if not kept:
        return None
    return {"gpu": gpu, "uuid": uuid, "samples": len(kept), "of": how,
            "sm_mhz": _stat([s[1] for s in kept]), "power_w": _stat([s[2] for s in kept]),
            "temp_c": _stat([s[3] for s in kept])}
