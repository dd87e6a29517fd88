"""Compile a registered kernel with PyCUDA's SourceModule for the device's own architecture.

The nvcc options come from one function, `nvcc_options`, which the CPU tests also use to
compile every kernel with nvcc and read the ptxas report, so what is tested is what runs.
Compiled cubins are cached on disk by PyCUDA (keyed by source, options and nvcc version)
and in memory per process.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..core.registry import KernelSpec, arch_support, kernels_dir

BASE_OPTIONS = ("-O3", "-std=c++17", "-lineinfo")


def target_arch(spec: KernelSpec, device_arch: str) -> str:
    """'native' means the device's sm_XY; an explicit arch (e.g. sm_90a) is used as given."""
    return device_arch if spec.arch == "native" else spec.arch


def nvcc_options(spec: KernelSpec) -> list[str]:
    opts = list(BASE_OPTIONS)
    opts += [f"-D{k}={v}" for k, v in sorted(spec.defines.items())]
    return opts


def cache_dir() -> str:
    d = os.environ.get("GEMM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "gemm", "cubin")
    os.makedirs(d, exist_ok=True)
    return d


class CompileError(RuntimeError):
    """nvcc rejected a kernel; the message holds its output."""


class Unsupported(CompileError):
    """The kernel is built for an arch this device cannot run (e.g. sm_90a off Hopper): a
    reason to skip it, not a failure."""


def check_runnable(spec: KernelSpec) -> None:
    """Raise Unsupported, with the reason, if this device cannot run the kernel's arch."""
    from . import device
    reason = arch_support(spec.arch, device.info().arch)
    if reason:
        raise Unsupported(f"{spec.name}: {reason}")


@dataclass
class LoadedKernel:
    spec: KernelSpec
    module: object
    functions: dict            # entry point name -> pycuda Function


_loaded: dict[tuple, LoadedKernel] = {}


def compile_ahead(spec: KernelSpec, arch: str) -> str | None:
    """Compile into PyCUDA's disk cache without a context (another process may load it later
    with `load`, which then finds it there). Returns nvcc's error, or None."""
    from pycuda.compiler import compile as nvcc_compile
    try:
        nvcc_compile(Path(spec.path).read_text(), options=nvcc_options(spec),
                     arch=target_arch(spec, arch),
                     include_dirs=[str(kernels_dir())], no_extern_c=True, cache_dir=cache_dir())
    except Exception as exc:   # pycuda.driver.CompileError, with nvcc's output
        return str(exc)[-2000:]
    return None


def load(spec: KernelSpec) -> LoadedKernel:
    """Compile (or fetch from cache) and load a kernel into the current context."""
    from . import device
    device.cuda()
    from pycuda.compiler import SourceModule
    import pycuda.driver as drv

    check_runnable(spec)
    arch = target_arch(spec, device.info().arch)
    key = (spec.name, spec.file, tuple(sorted(spec.defines.items())), arch)
    if key in _loaded:
        return _loaded[key]
    source = Path(spec.path).read_text()
    try:
        module = SourceModule(source, arch=arch, options=nvcc_options(spec),
                              include_dirs=[str(kernels_dir())], no_extern_c=True,
                              cache_dir=cache_dir())
    except drv.CompileError as exc:
        raise CompileError(f"{spec.name}: nvcc failed:\n{exc}") from None
    try:
        functions = {e: module.get_function(e) for e in spec.entries}
    except drv.LogicError as exc:
        raise CompileError(f"{spec.name}: entry point missing from {spec.file}: {exc}") from None
    if spec.smem > 48 * 1024:   # dynamic shared memory past the default limit: opt in
        for f in functions.values():
            f.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, spec.smem)
    _loaded[key] = LoadedKernel(spec, module, functions)
    return _loaded[key]


def resources(spec: KernelSpec) -> dict:
    """{entry point: {"regs", "local_bytes", "static_smem"}} of a loaded kernel: local memory
    per thread above zero means spills or a stack frame."""
    a = load(spec).functions
    return {e: {"regs": f.num_regs, "local_bytes": f.local_size_bytes,
                "static_smem": f.shared_size_bytes} for e, f in a.items()}
