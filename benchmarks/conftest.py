"""pytest-benchmark settings for the quick local A/B check (see README, "Before you push").

- The timer synchronizes the GPU (gemm.testing.cuda_synchronized) unless --benchmark-timer
  is given.
- Saved runs go to .benchmarks/<gpu>/ (e.g. .benchmarks/h200/), so runs from different GPUs
  are never compared with each other; the GPU, driver and CUDA version are added to the
  machine info of every saved run.
"""
import pytest

from gemm.testing import gpu  # noqa: F401  (the shared `gpu` fixture)

DEFAULT_STORAGE = "file://./.benchmarks"


def _gpu():
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(h)
        name = name.decode() if isinstance(name, bytes) else name
        drv = pynvml.nvmlSystemGetDriverVersion()
        return {"name": name, "driver": drv.decode() if isinstance(drv, bytes) else drv}
    except Exception:
        return None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if not hasattr(config.option, "benchmark_storage"):
        return  # pytest-benchmark is not installed
    if "pytest_benchmark.timers" in str(config.option.benchmark_timer) or \
            "perf_counter" in str(config.option.benchmark_timer):
        config.option.benchmark_timer = "gemm.testing.cuda_synchronized"
    gpu = _gpu()
    if gpu and config.option.benchmark_storage == DEFAULT_STORAGE:
        from gemm.core.machines import gpu_slug
        config.option.benchmark_storage = f"{DEFAULT_STORAGE}/{gpu_slug(gpu['name'])}"


def pytest_benchmark_update_machine_info(config, machine_info):
    gpu = _gpu()
    if gpu:
        machine_info["gpu"] = gpu["name"]
        machine_info["gpu_driver"] = gpu["driver"]
