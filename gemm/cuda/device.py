"""The GPU, reached lazily: PyCUDA's primary context, device facts and NVML clocks.

cuBLAS (through nvmath-python) runs on the CUDA runtime, which uses the device's primary
context, so PyCUDA retains that same context rather than making a private one: device
pointers are then valid for both.
"""
from __future__ import annotations

import atexit
import os
from dataclasses import dataclass
from functools import lru_cache

from ..core.machines import gpu_slug


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


def _device_0():
    """The first visible GPU (CUDA_VISIBLE_DEVICES applies), without creating a context."""
    import pycuda.driver as drv
    drv.init()
    return drv.Device(0)


def arch_of_device_0() -> str:
    """sm_XY of the first GPU (for compiling ahead)."""
    major, minor = _device_0().compute_capability()
    return f"sm_{major}{minor}"


def name_of_device_0() -> str:
    """'NVIDIA H200': CUDA's name of the first GPU, as DeviceInfo (and so every measurement
    document and calibration file) records it."""
    return _device_0().name()


def available() -> tuple[bool, str]:
    """(True, '') when a GPU can be used, else (False, the reason)."""
    try:
        cuda()
        return True, ""
    except GPUUnavailable as exc:
        return False, str(exc)


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


def _visible_bus_id() -> str | None:
    """The PCI bus id of the GPU this process measures on: its context's device, else the
    first visible one (no context is made; CUDA_VISIBLE_DEVICES applies); None without
    PyCUDA or a device."""
    try:
        from pycuda.driver import Context
        return Context.get_device().pci_bus_id()
    except Exception:
        pass
    try:
        return _device_0().pci_bus_id()
    except Exception:
        return None


SLOWDOWN_REASONS = 0x8 | 0x20 | 0x40 | 0x80   # HwSlowdown, SwThermal, HwThermal, HwPowerBrake


class Clocks:
    """SM clock readings through NVML (nvidia-ml-py); every method returns None without it."""

    def __init__(self) -> None:
        self._h = None
        self._nvml = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            bus = _visible_bus_id()
            if bus:
                self._h = pynvml.nvmlDeviceGetHandleByPciBusId(bus.encode())
            elif "CUDA_VISIBLE_DEVICES" not in os.environ:
                self._h = pynvml.nvmlDeviceGetHandleByIndex(0)
            # else: NVML counts every GPU, CUDA only the visible ones; rather none than the
            # wrong one (a lane on GPU 1 would read GPU 0's clocks and name)
        except Exception:
            self._h = None

    def _ask(self, fn, need_handle: bool = True):
        """fn(nvml, handle), or None where NVML, the handle or the call is not available."""
        if self._nvml is None or (need_handle and self._h is None):
            return None
        try:
            return fn(self._nvml, self._h)
        except Exception:
            return None

    def sm_mhz(self) -> int | None:
        return self._ask(lambda n, h: int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)))

    def slowdown(self) -> bool | None:
        """Does NVML name a thermal or hardware slowdown of the clocks now (nvml.h's
        ClocksEventReasons HwSlowdown, SwThermalSlowdown, HwThermalSlowdown, HwPowerBrake;
        not SwPowerCap, the regime a power-bound kernel runs in)? None without NVML."""
        def ask(n, h):
            try:     # the newer name; a driver without its symbol raises
                mask = n.nvmlDeviceGetCurrentClocksEventReasons(h)
            except Exception:
                mask = n.nvmlDeviceGetCurrentClocksThrottleReasons(h)
            return bool(mask & SLOWDOWN_REASONS)
        return self._ask(ask)

    def max_sm_mhz(self) -> int | None:
        return self._ask(lambda n, h: int(n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)))

    def identity(self) -> str | None:
        """'NVIDIA H200 GPU-<uuid>': which physical GPU this is (lent machines differ)."""
        name, uuid = self.name(), self._ask(lambda n, h: _text(n.nvmlDeviceGetUUID(h)))
        return f"{name} {uuid}" if name and uuid else None

    def name(self) -> str | None:
        """'NVIDIA H200': NVML's product name."""
        return self._ask(lambda n, h: _text(n.nvmlDeviceGetName(h)))

    def driver_version(self) -> str | None:
        return self._ask(lambda n, h: _text(n.nvmlSystemGetDriverVersion()), need_handle=False)


def _text(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)
