"""Synthetic asv results (version-2 files) for the CPU tests of the gate, plots and publish.

`write_benchmarks` / `write_run` write today's layout (one class per kernel, gemm.core.metrics
names); `write_legacy_run` writes layout 1 (one `Kernels` class, params [kernel, size]) for
the migration tests."""
import itertools
import json
from pathlib import Path

from gemm.core import metrics

KEYS = [m.key for m in metrics.KERNEL_METRICS]
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples", "profile"]


def name(kernel, key):
    return metrics.asv_name(metrics.kernel_class(kernel), metrics.get(key))


def write_benchmarks(results: Path, kernels, sizes, version="v1"):
    results.mkdir(parents=True, exist_ok=True)
    bench = {"version": 2}
    for k in kernels:
        for key in KEYS:
            bench[name(k, key)] = {
                "name": name(k, key), "type": "track", "unit": metrics.get(key).unit,
                "param_names": ["size"], "version": version, "timeout": 60,
                "params": [[repr(s) for s in sizes]]}
    (results / "benchmarks.json").write_text(json.dumps(bench))


def _value(values, k, s, key):
    v = values.get((k, s))
    if v is not None and key == "pct_of_cublas":
        v = 2 * v
    return v


def write_run(results: Path, commit: str, date: int, values: dict, kernels, sizes,
              version="v1", noise=0.0, machine="h200"):
    """values[(kernel, size)] = TFLOPS (None = failed); pct = TFLOPS * 2 for simplicity.
    A kernel with no value at any size is left out of the run (not measured)."""
    d = results / machine
    d.mkdir(parents=True, exist_ok=True)
    (d / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    res = {}
    for k in kernels:
        if not any((k, s) in values for s in sizes):
            continue
        for key in KEYS:
            vals = [_value(values, k, s, key) for s in sizes]
            res[name(k, key)] = [
                vals, [[repr(s) for s in sizes]], version, date, 1.0, None, None,
                [None if v is None else v * (1 - noise) for v in vals],
                [None if v is None else v * (1 + noise) for v in vals]]
    _write(d, commit, date, machine, res)


def write_legacy_run(results: Path, commit: str, date: int, values: dict, kernels, sizes,
                     machine="h200"):
    d = results / machine
    d.mkdir(parents=True, exist_ok=True)
    res = {}
    combos = list(itertools.product(kernels, sizes))
    for key in KEYS:
        vals = [_value(values, k, s, key) for k, s in combos]
        res[f"bench_gemm.Kernels.track_{key}"] = [
            vals, [[repr(k) for k in kernels], [repr(s) for s in sizes]], "gemm-suite-1", date,
            1.0, None, None, [v and v * 0.99 for v in vals], [v and v * 1.01 for v in vals],
            [1] * len(vals), [10] * len(vals), [[v, v] for v in vals]]
    res["bench_gemm.Cublas.track_tflops"] = [[50.0] * len(sizes), [["'cublas_fp32'"],
                                             [repr(s) for s in sizes]], "gemm-suite-1", date, 1.0]
    _write(d, commit, date, machine, res)


def _write(d, commit, date, machine, res):
    data = {"commit_hash": commit, "env_name": "existing-py", "date": date,
            "params": {"machine": machine, "python": "3.12"},
            "python": "3.12", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
            "results": res, "durations": {}, "version": 2}
    (d / f"{commit[:8]}-existing-py.json").write_text(json.dumps(data))
