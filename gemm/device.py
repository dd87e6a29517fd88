"""The GPU, reached lazily: PyCUDA's primary context, device facts and NVML clocks.

cuBLAS (through nvmath-python) runs on the CUDA runtime, which uses the device's primary
context, so PyCUDA retains that same context rather than making a private one: device
pointers are then valid for both.
"""
from __future__ import annotations

import atexit
import re
from dataclasses import dataclass
from functools import lru_cache


class GPUUnavailable(RuntimeError):
    """No usable CUDA GPU here (no PyCUDA, no driver, or no device)."""


_ctx = None


def cuda():
    """pycuda.driver with a current context, created on first use."""
    global _ctx
    try:
        import pycuda.driver as drv
    except Exception as exc:  # ImportError, or a driver library that will not load
        raise GPUUnavailable(f"PyCUDA is not usable here ({exc.__class__.__name__}: {exc})") from None
    if _ctx is None:
        try:
            drv.init()
            if drv.Device.count() < 1:
                raise GPUUnavailable("the CUDA driver sees no GPU")
            ctx = drv.Device(0).retain_primary_context()
            ctx.push()
        except GPUUnavailable:
            raise
        except Exception as exc:
            raise GPUUnavailable(f"no CUDA device could be opened ({exc})") from None
        _ctx = ctx
        atexit.register(_release)
    return drv


def _release() -> None:
    global _ctx
    if _ctx is not None:
        try:
            _ctx.pop()
        except Exception:
            pass
        _ctx = None


def probe() -> tuple[bool, str]:
    """Like available(), but without creating a context (for a parent of worker processes)."""
    if _ctx is not None:
        return True, ""
    try:
        import pycuda.driver as drv
    except Exception as exc:
        return False, f"PyCUDA is not usable here ({exc.__class__.__name__}: {exc})"
    try:
        drv.init()
        if drv.Device.count() < 1:
            return False, "the CUDA driver sees no GPU"
    except Exception as exc:
        return False, f"no CUDA device could be opened ({exc})"
    return True, ""


def available() -> tuple[bool, str]:
    """(True, '') when a GPU can be used, else (False, the reason)."""
    try:
        cuda()
        return True, ""
    except GPUUnavailable as exc:
        return False, str(exc)


def gpu_slug(name: str) -> str:
    """A machine name from the GPU name: 'NVIDIA H200' -> 'h200'."""
    s = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.I).lower()
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "gpu"


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    cc: tuple[int, int]
    sms: int
    l2_bytes: int
    max_sm_clock_mhz: int
    driver: str
    cuda: str
    pci_bus_id: str

    @property
    def arch(self) -> str:
        return f"sm_{self.cc[0]}{self.cc[1]}"

    @property
    def slug(self) -> str:
        return gpu_slug(self.name)


@lru_cache(maxsize=1)
def info() -> DeviceInfo:
    drv = cuda()
    dev = drv.Context.get_device()
    a = drv.device_attribute
    ver = drv.get_driver_version()
    nvml = Clocks()
    return DeviceInfo(
        name=dev.name(), cc=dev.compute_capability(),
        sms=dev.get_attribute(a.MULTIPROCESSOR_COUNT),
        l2_bytes=dev.get_attribute(a.L2_CACHE_SIZE),
        max_sm_clock_mhz=nvml.max_sm_mhz() or dev.get_attribute(a.CLOCK_RATE) // 1000,
        driver=nvml.driver_version() or "unknown",
        cuda=f"{ver // 1000}.{(ver % 1000) // 10}",
        pci_bus_id=dev.pci_bus_id())


class Clocks:
    """SM clock readings through NVML (nvidia-ml-py); every method returns None without it."""

    def __init__(self) -> None:
        self._h = None
        self._nvml = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            try:
                from pycuda.driver import Context
                bus = Context.get_device().pci_bus_id()
                self._h = pynvml.nvmlDeviceGetHandleByPciBusId(bus.encode())
            except Exception:
                self._h = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:
            self._h = None

    def sm_mhz(self) -> int | None:
        if self._h is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetClockInfo(self._h, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None

    def max_sm_mhz(self) -> int | None:
        if self._h is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetMaxClockInfo(self._h, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None

    def identity(self) -> str | None:
        """'NVIDIA H200 GPU-<uuid>': which physical GPU this is (lent machines differ)."""
        if self._h is None:
            return None
        try:
            name, uuid = (self._nvml.nvmlDeviceGetName(self._h), self._nvml.nvmlDeviceGetUUID(self._h))
            return " ".join(x.decode() if isinstance(x, bytes) else str(x) for x in (name, uuid))
        except Exception:
            return None

    def driver_version(self) -> str | None:
        if self._nvml is None:
            return None
        try:
            v = self._nvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        except Exception:
            return None
