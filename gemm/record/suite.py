"""The per-commit asv suite, generated from the registry (benchmarks/bench_gemm.py calls
`classes`): one class per kernel, `Kernel_<name>`, whose setup_cache sweeps that kernel over the
tracked sizes with its cuBLAS baseline interleaved, so `asv run -b 05` measures kernel 05 alone;
and `Cublas`, whose setup_cache measures each cuBLAS configuration alone (when `gemm record` runs
the whole suite, all of them come from one shared sweep: `sweep`). The track_ methods only
look values up (gemm.core.metrics: one per metric, with its unit and version) and return asv's
sample protocol {"samples": [...], "number": 1}, so asv keeps medians and quartiles.

asv runs a class's setup_cache once per commit and keys it by the function's module and first
line ("module:line"). The per-kernel setup_caches are one definition made in a loop, so each is
filed under a module name of its own (benchmarks.bench_gemm.<kernel>, a placeholder registered
in sys.modules) to get a key of its own.
"""
from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

from ..core import ltchoice, metrics, registry, shapes
from ..core.policy import SUITE

SIZES = list(shapes.TRACKED)
SETUP_TIMEOUT_S = 1800
TRACK_TIMEOUT_S = 120


SHARED = "GEMM_SHARED_SWEEP"


def targets() -> list[str]:
    """What the whole suite measures: every kernel (its baseline interleaved) and every cuBLAS
    configuration alone, in the classes' order."""
    return registry.names() + registry.baselines()


def sweep(target: str) -> dict:
    """One target over the tracked sizes under the suite's policy (a GPU is needed). Where
    `gemm record` runs the whole suite it names a file in GEMM_SHARED_SWEEP: the first class
    set up then sweeps every target in one worker process (shared_sweep) and each class takes
    its own records from it, so the suite pays one process start and one cuBLAS load instead
    of one per class (on the H200, about a quarter of the sweeps' time). A target
    the shared sweep did not fully measure is swept alone, as without it."""
    shared = os.environ.get(SHARED)
    if shared:
        part = shared_part(shared_sweep(Path(shared)), target)
        if part is not None:
            return part
    return _sweep([target], f"sweep-{target}.json")


def _sweep(names: list[str], dump_as: str) -> dict:
    from ..measure.sweep import probe_gpu, progress_printer, sweep as run
    ok, why = probe_gpu()
    if not ok:
        raise RuntimeError(f"the benchmark sweep needs a CUDA GPU: {why}")
    doc = run(names, shapes.problems(SIZES), SUITE, progress=progress_printer(sys.stderr))
    dump = os.environ.get("GEMM_SWEEP_DIR")
    if dump:
        Path(dump).mkdir(parents=True, exist_ok=True)
        (Path(dump) / dump_as).write_text(json.dumps(doc))
    return doc


def shared_sweep(path: Path) -> dict | None:
    """The suite's sweep of every target in one worker, made by the first caller and read by
    the rest (asv sets classes up one after another, each in its own process). None if it
    could not be made (said once, in the file, so no class tries again: each sweeps alone)."""
    if path.exists():
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return doc if "records" in doc else None
    try:
        doc = _sweep(targets(), "sweep-shared.json")
    except Exception as exc:       # noqa: BLE001 -- every class then sweeps on its own
        doc = {"failed": f"{type(exc).__name__}: {exc}"}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)
    return doc if "records" in doc else None


def shared_part(doc: dict | None, target: str) -> dict | None:
    """`target`'s records of the shared sweep, as its own sweep would have given them; None
    unless every tracked size of it is there."""
    if doc is None:
        return None
    recs = [r for r in doc["records"] if r.get("kernel") == target]
    if not set(SIZES) <= {r.get("size") for r in recs}:
        return None
    return {**{k: v for k, v in doc.items() if k not in ("records", "values", "workers")},
            "records": recs, "values": [v for v in doc.get("values", [])
                                        if v.get("kernel") == target],
            "workers": [], "shared": True}


def _record(cache: dict, size: str) -> dict:
    for r in cache["records"]:
        if r["size"] == size:
            return r
    raise NotImplementedError(f"{size} was not part of this sweep")


def skip_unmeasured(cache: dict, size: str) -> None:
    """The classes' setup: a size the kernel refuses by its launch contract (status
    "unsupported", e.g. a K that TMA cannot address), or one the sweep did not run, is a skip.
    asv records a skip (NaN) only when setup raises NotImplementedError; raised from a track_
    method it would be a failure (null)."""
    rec = _record(cache, size)
    if rec["status"] == "unsupported":
        raise NotImplementedError(f"{rec['kernel']} {size}: {rec.get('error')}")


def samples(cache: dict, metric: metrics.Metric, size: str) -> dict:
    """asv's sample protocol for one series; raises for a failed kernel (asv records null)."""
    rec = _record(cache, size)
    if rec["status"] != "ok":
        raise RuntimeError(f"{rec['kernel']} {size}: {rec['status']}: {rec.get('error')}")
    if rec.get("role") == "baseline":
        b = rec["baseline_time"]["samples_s"]
        vals = metric.samples(b, b, rec["flops"])
    else:
        vals = metrics.record_samples(rec, metric.key)
    return {"samples": vals, "number": 1}


def _own_setup_cache(module: str, target: str, key: str):
    def setup_cache(self):
        return sweep(target)

    setup_cache.timeout = SETUP_TIMEOUT_S
    name = f"{module}.{key}"
    sys.modules.setdefault(name, types.ModuleType(name))
    setup_cache.__module__ = name
    return setup_cache


def unit_for(metric: metrics.Metric, spec=None) -> str:
    """The unit asv shows, with the arithmetic: 'TFLOPS (TF32)', '% of cublas_tf32_nk'."""
    if spec is None or spec.precision == "fp32":
        return metric.unit
    if metric.key == "pct_of_cublas":
        return f"% of {spec.baseline} ({spec.precision.upper()})"
    if metric.key == "tflops":
        return f"TFLOPS ({spec.precision.upper()})"
    return metric.unit


def _track(metric: metrics.Metric, baseline: bool, spec=None):
    if baseline:
        def track(self, cache, baseline_name, size):
            return samples(cache[baseline_name], metric, size)
    else:
        def track(self, cache, size):
            return samples(cache, metric, size)
    track.unit = unit_for(metric, spec)
    track.version = metrics.version(metric, SUITE, baseline=baseline, baseline_call=None
                                    if spec is None else ltchoice.fingerprint(spec.baseline))
    return track


def kernel_class(module: str, kernel: str) -> type:
    spec = registry.get(kernel)
    attrs = {"params": [SIZES], "param_names": ["size"], "timeout": TRACK_TIMEOUT_S,
             "setup_cache": _own_setup_cache(module, kernel, kernel),
             "setup": lambda self, cache, size: skip_unmeasured(cache, size),
             "__doc__": f"{kernel} [{spec.precision.upper()}, against {spec.baseline}]: "
                        f"{spec.summary}"}
    attrs.update({f"track_{m.key}": _track(m, False, spec) for m in metrics.KERNEL_METRICS})
    return type(metrics.kernel_class(kernel), (), attrs)


def baseline_class(module: str) -> type:
    def setup_cache(self):
        return {b: sweep(b) for b in registry.baselines()}

    setup_cache.timeout = SETUP_TIMEOUT_S
    attrs = {"params": [registry.baselines(), SIZES], "param_names": ["baseline", "size"],
             "timeout": TRACK_TIMEOUT_S, "setup_cache": setup_cache,
             "setup": lambda self, cache, baseline_name, size: skip_unmeasured(cache[baseline_name], size),
             "__doc__": "cuBLAS itself, each configuration measured alone"}
    attrs.update({f"track_{m.key}": _track(m, True) for m in metrics.BASELINE_METRICS})
    return type(metrics.BASELINE_CLASS, (), attrs)


def classes(module: str) -> dict[str, type]:
    """{class name: class} for the suite module `module` (its __name__)."""
    out = {metrics.kernel_class(k): kernel_class(module, k) for k in registry.names()}
    out[metrics.BASELINE_CLASS] = baseline_class(module)
    return out
