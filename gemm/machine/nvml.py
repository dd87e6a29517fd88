"""The machine while something runs on the GPU: SM clock, power, temperature, utilisation and
whether the driver held the clocks at the power cap, read through NVML (nvidia-ml-py, imported
lazily) every 50 ms in a thread of the sampling process, and summarised: min / median / max
over the samples of one run (gemm explain's timed runs), or per arm of an A/B over all its
processes (ArmSamples: the gate samples while each arm's `gemm measure` process runs, from
its own process, so any commit's tree can be an arm). Whether a GPU answers at all (NVML,
else `nvidia-smi -L`). Nothing here needs CUDA, and no gemm layer is imported: the A/B
(gemm.track) and gemm explain both use it. Without NVML it samples nothing and says why.

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
from dataclasses import asdict, dataclass
from typing import NamedTuple

INTERVAL_S = 0.05
BUSY_UTIL = 50        # % GPU utilisation that counts as the kernel running (no window given)
POWER_CAP_REASON = 0x4   # nvml.h's nvmlClocksEventReasonSwPowerCap (clocks held for power)


class Sample(NamedTuple):
    t: float                          # time.time()
    sm_mhz: float | None
    power_w: float | None
    temp_c: float | None
    util: float | None                # GPU utilisation, %
    power_capped: bool | None = None  # the driver held the clocks at the power cap


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
    """`with Sampler() as s: ...` samples (Sample) until the block ends; `s.summary(window)`
    reads them. Without NVML it samples nothing and `why` says so."""

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
        reasons = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                   or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        while not self._stop.is_set():
            mask = ask(lambda: reasons(h)) if reasons else None
            self.samples.append(Sample(
                time.time(),
                ask(lambda: float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))),
                ask(lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                ask(lambda: float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))),
                ask(lambda: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)),
                None if mask is None else bool(mask & POWER_CAP_REASON)))
            self._stop.wait(self.interval)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def summary(self, window: list | None = None) -> dict | None:
        return summarise(self.samples, window, self.gpu, self.uuid)


def busy(samples: list) -> list:
    """The samples taken while the GPU was busy (utilisation >= BUSY_UTIL %)."""
    return [s for s in samples if s[4] is not None and s[4] >= BUSY_UTIL]


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
        kept, how = busy(samples), f"where the GPU was busy (utilisation >= {BUSY_UTIL} %)"
    if not kept:
        return None
    return {"gpu": gpu, "uuid": uuid, "samples": len(kept), "of": how,
            "sm_mhz": _stat([s[1] for s in kept]), "power_w": _stat([s[2] for s in kept]),
            "temp_c": _stat([s[3] for s in kept])}


# --- per arm of an A/B ------------------------------------------------------------------------

def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _median(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 1) if vals else None


CLOCKS_APART = 0.01   # two clocks differ: more than this share of the larger apart


def clocks_differ(a, b) -> bool:
    """Do two SM clocks (MHz; None or 0: unknown) differ, the gate's and explain's one rule:
    more than CLOCKS_APART of the larger apart (a compute-bound kernel's speed moves with it,
    and the gate's minimum effect at the large sizes is 1 %)."""
    return bool(a and b and abs(b - a) > CLOCKS_APART * max(a, b))


@dataclass(frozen=True)
class ArmMachine:
    """What NVML read while one arm of an A/B had the GPU busy: every busy sample
    (utilisation >= BUSY_UTIL %) of all its processes in the run."""
    gpu: str | None
    processes: int                      # its processes, sampled or not
    samples: int                        # busy samples over all of them
    sm_mhz_median: float | None
    power_w_median: float | None
    temp_c_max: float | None
    power_capped_pct: float | None      # % of the samples at the power cap (None: not read)
    sm_mhz_by_process: tuple = ()       # each process's median SM clock, in run order

    @classmethod
    def of(cls, samplers: list) -> ArmMachine | None:
        """The arm's figures from its processes' Samplers; None without a busy sample."""
        per = [busy(s.samples) for s in samplers]
        kept = [x for p in per for x in p]
        if not kept:
            return None
        capped = [x.power_capped for x in kept if x.power_capped is not None]
        temps = [x.temp_c for x in kept if x.temp_c is not None]
        return cls(next((s.gpu for s in samplers if s.gpu), None), len(samplers), len(kept),
                   _median([x.sm_mhz for x in kept]), _median([x.power_w for x in kept]),
                   max(temps) if temps else None,
                   round(100.0 * sum(capped) / len(capped), 1) if capped else None,
                   tuple(_median([x.sm_mhz for x in p]) for p in per))

    def to_dict(self) -> dict:
        return {**asdict(self), "sm_mhz_by_process": list(self.sm_mhz_by_process)}

    @classmethod
    def from_dict(cls, d) -> ArmMachine | None:
        """Read back from a report: a number where one belongs (else None), keys it does not
        know left out; None where `d` is not one."""
        if not isinstance(d, dict) or not isinstance(d.get("samples"), int):
            return None
        by = d.get("sm_mhz_by_process")
        return cls(d["gpu"] if isinstance(d.get("gpu"), str) else None,
                   d["processes"] if isinstance(d.get("processes"), int) else 0, d["samples"],
                   *(_number(d.get(k)) for k in ("sm_mhz_median", "power_w_median",
                                                 "temp_c_max", "power_capped_pct")),
                   tuple(_number(x) for x in by) if isinstance(by, list) else ())


class ArmSamples:
    """An A/B's NVML samples, one Sampler per process of each arm: `sampling(measure)` wraps
    the A/B's `measure(arm, series)` (one process each call) so that the GPU is sampled while
    it runs; `arm(label)` and `pair(reference, new)` read the figures back."""

    def __init__(self, interval: float = INTERVAL_S) -> None:
        self.interval = interval
        self.processes: dict[str, list[Sampler]] = {}

    def sampling(self, measure):
        def sampled(arm: str, what: dict):
            sampler = Sampler(self.interval)
            self.processes.setdefault(arm, []).append(sampler)
            with sampler:
                return measure(arm, what)
        return sampled

    def arm(self, label: str) -> ArmMachine | None:
        return ArmMachine.of(self.processes.get(label, []))

    def pair(self, reference: str, new: str) -> dict | None:
        """{"reference": figures | None, "new": ...} of one comparison; None where neither
        arm has a busy sample (no NVML here)."""
        a, b = self.arm(reference), self.arm(new)
        if a is None and b is None:
            return None
        return {"reference": a.to_dict() if a else None, "new": b.to_dict() if b else None}
