"""Synthetic asv results (version-2 files) for the CPU tests of the gate, plots and publish."""
import itertools
import json
from pathlib import Path

METRICS = ["track_tflops", "track_pct_of_cublas", "track_seconds", "track_time_ratio"]
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples", "profile"]


def write_benchmarks(results: Path, kernels, sizes, version="v1"):
    results.mkdir(parents=True, exist_ok=True)
    bench = {"version": 2}
    for m in METRICS:
        bench[f"bench_gemm.Kernels.{m}"] = {
            "name": f"bench_gemm.Kernels.{m}", "type": "track", "unit": "x",
            "param_names": ["kernel", "size"], "version": version, "timeout": 60,
            "params": [[repr(k) for k in kernels], [repr(s) for s in sizes]]}
    (results / "benchmarks.json").write_text(json.dumps(bench))


def write_run(results: Path, commit: str, date: int, values: dict, kernels, sizes,
              version="v1", noise=0.0, machine="h200"):
    """values[(kernel, size)] = TFLOPS (None = failed); pct = TFLOPS * 2 for simplicity."""
    d = results / machine
    d.mkdir(parents=True, exist_ok=True)
    (d / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    res = {}
    combos = list(itertools.product(kernels, sizes))
    for m in METRICS:
        vals, q25, q75 = [], [], []
        for k, s in combos:
            v = values.get((k, s))
            if v is not None and m == "track_pct_of_cublas":
                v = 2 * v
            vals.append(v)
            q25.append(None if v is None else v * (1 - noise))
            q75.append(None if v is None else v * (1 + noise))
        res[f"bench_gemm.Kernels.{m}"] = [
            vals, [[repr(k) for k in kernels], [repr(s) for s in sizes]], version, date, 1.0,
            None, None, q25, q75]
    data = {"commit_hash": commit, "env_name": "existing-py", "date": date,
            "params": {"machine": machine, "python": "3.12"},
            "python": "3.12", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
            "results": res, "durations": {}, "version": 2}
    (d / f"{commit[:8]}-existing-py.json").write_text(json.dumps(data))
