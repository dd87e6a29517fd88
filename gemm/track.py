"""What the per-commit benchmark suite measures, and how a run is recorded into results/.

benchmarks/bench_gemm.py (asv) calls `asv_sweep` once per commit in setup_cache and looks
values up with `samples_for`; its track_ methods return {"samples": [...], "number": 1} so asv
keeps medians, quartiles and confidence intervals. `record` wraps `asv run` so that an
interrupted or GPU-less run never touches the committed history: asv writes into a staging
copy, and only a complete, valid result file with real numbers is moved into results/.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from . import registry, stats
from .timing import Policy

SIZES = ["512", "1024", "2048", "4096", "8192", "1000"]
POLICY = Policy()  # the per-commit policy; `gemm regress` re-measures with the same one
METRICS = {
    # name: (unit, higher_is_better)
    "tflops": ("TFLOPS", True),
    "pct_of_cublas": ("%", True),
    "seconds": ("seconds", False),
    "time_ratio": ("kernel/cuBLAS time", False),
}


def baselines() -> list[str]:
    return sorted({s.baseline for s in registry.registry().values()})


def asv_sweep(kernels=None, sizes=None) -> dict:
    """The whole GPU sweep for one commit (every kernel x size, cuBLAS interleaved)."""
    from .device import GPUUnavailable, probe
    from .report import progress_line
    from .sweep import problems_from_sizes, sweep

    ok, why = probe()
    if not ok:
        raise GPUUnavailable(f"the benchmark sweep needs a CUDA GPU: {why}")

    def progress(done, total, rec):
        print(progress_line(done, total, rec), file=sys.stderr, flush=True)

    res = sweep(kernels or registry.names(), problems_from_sizes(sizes or SIZES), POLICY,
                progress=progress)
    dump = os.environ.get("GEMM_SWEEP_JSON")
    if dump:
        with open(dump, "w") as f:
            json.dump(res, f)
    return res


def _record(cache: dict, kernel: str, size: str) -> dict:
    for r in cache["records"]:
        if r["kernel"] == kernel and r["size"] == size:
            return r
    raise NotImplementedError(f"{kernel} {size} was not part of this sweep")


def _paired(rec: dict):
    k = rec["kernel_time"]["samples_s"]
    b = rec["baseline_time"]["samples_s"]
    n = min(len(k), len(b))
    return k, b, n


def samples_for(cache: dict, metric: str, kernel: str, size: str) -> dict:
    """asv's sample protocol for one kernel x size; raises for a failed kernel."""
    rec = _record(cache, kernel, size)
    if rec["status"] != "ok":
        raise RuntimeError(f"{kernel} {size}: {rec['status']}: {rec.get('error')}")
    k, b, n = _paired(rec)
    flops = rec["flops"]
    if metric == "tflops":
        vals = [flops / s / 1e12 for s in k]
    elif metric == "seconds":
        vals = list(k)
    elif metric == "pct_of_cublas":  # paired by sample index: neighbours in time
        vals = [100.0 * b[i] / k[i] for i in range(n)]
    elif metric == "time_ratio":
        vals = [k[i] / b[i] for i in range(n)]
    else:
        raise ValueError(f"unknown metric {metric!r}")
    return {"samples": vals, "number": 1}


def baseline_samples_for(cache: dict, metric: str, baseline: str, size: str) -> dict:
    """cuBLAS itself, pooled over every kernel's interleaved measurement at this size."""
    pooled, flops = [], None
    for r in cache["records"]:
        if r["size"] == size and r.get("baseline") == baseline and r.get("baseline_time"):
            pooled += r["baseline_time"]["samples_s"]
            flops = r["flops"]
    if not pooled:
        raise RuntimeError(f"no {baseline} measurement at {size} in this sweep")
    vals = [flops / s / 1e12 for s in pooled] if metric == "tflops" else pooled
    return {"samples": vals, "number": 1}


# --- asv machine file -------------------------------------------------------------------

def machine_info(name: str | None = None) -> dict:
    from .device import info
    dev = info()
    try:
        import os as _os
        ram = str(_os.sysconf("SC_PAGE_SIZE") * _os.sysconf("SC_PHYS_PAGES") // 1024)
    except (ValueError, OSError, AttributeError):
        ram = ""
    return {"machine": name or dev.slug, "arch": platform.machine(), "os": platform.platform(),
            "cpu": platform.processor() or platform.machine(), "num_cpu": str(os.cpu_count()),
            "ram": ram, "gpu": dev.name, "gpu_arch": dev.arch, "driver": dev.driver,
            "cuda": dev.cuda}


def write_machine(args) -> int:
    from .device import GPUUnavailable
    try:
        m = machine_info(args.machine)
    except GPUUnavailable as exc:
        print(f"gemm machine: needs a CUDA GPU to describe: {exc}", file=sys.stderr)
        return 2
    path = Path(args.path or os.path.expanduser("~/.asv-machine.json"))
    data = json.loads(path.read_text()) if path.exists() else {"version": 1}
    data[m["machine"]] = m
    path.write_text(json.dumps(data, indent=4, sort_keys=True))
    print(m["machine"])
    return 0


# --- recording --------------------------------------------------------------------------

class RecordError(RuntimeError):
    pass


def _result_files(d: Path) -> set[Path]:
    return {p for p in d.glob("*.json") if p.name not in ("machine.json", "benchmarks.json")}


def validate_result_file(path: Path) -> dict:
    """A result file must parse, be asv's version 2, and hold at least one real number."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: not readable JSON ({exc})") from None
    if data.get("version") != 2 or "results" not in data or "commit_hash" not in data:
        raise RecordError(f"{path}: not an asv version-2 result file")
    cols = data.get("result_columns", [])
    if "result" not in cols:
        raise RecordError(f"{path}: no result column")
    ri = cols.index("result")
    real = 0
    for row in data["results"].values():
        vals = row[ri] if len(row) > ri else None
        for v in (vals or []):
            if isinstance(v, (int, float)) and v == v:
                real += 1
    if real == 0:
        raise RecordError(f"{path}: every benchmark failed or was skipped; nothing recorded")
    return data


def record(repo: Path, machine: str, commit: str, extra_args=(), results: Path | None = None) -> Path:
    """asv run for `commit` into a staging copy of results/, then move the result in.

    `repo` is the checkout whose package, kernels and benchmarks are measured (a worktree
    of an older commit when backfilling); `results` where the history lives (default:
    the checkout's own results directory).
    """
    repo = Path(repo).resolve()
    conf = json.loads((repo / "asv.conf.json").read_text())
    results = Path(results).resolve() if results else repo / conf.get("results_dir", "results")
    stage_root = repo / ".asv" / "staging"
    if stage_root.exists():
        shutil.rmtree(stage_root)
    stage = stage_root / "results"
    stage.mkdir(parents=True)
    if (results / machine).exists():
        shutil.copytree(results / machine, stage / machine)
    before = {p: p.stat().st_mtime_ns for p in _result_files(stage / machine)} \
        if (stage / machine).exists() else {}
    conf.update(results_dir=str(stage), repo=str(repo),
                benchmark_dir=str(repo / conf.get("benchmark_dir", "benchmarks")),
                html_dir=str(stage_root / "html"), env_dir=str(stage_root / "env"))
    conf_path = stage_root / "asv.conf.json"
    conf_path.write_text(json.dumps(conf, indent=2))
    cmd = ["asv", "run", "--config", str(conf_path), "-E", f"existing:{sys.executable}",
           "--set-commit-hash", commit, "--machine", machine, "--record-samples",
           "--show-stderr", "--durations", "all", *extra_args]
    print("+ " + " ".join(cmd), flush=True)
    # asv drops PYTHONPATH in its benchmark processes but honours ASV_PYTHONPATH: pass the
    # package under test (this checkout) and whatever else is on the path
    env = dict(os.environ)
    paths = [str(repo)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["ASV_PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    rc = subprocess.call(cmd, cwd=repo, env=env)
    new = [p for p in _result_files(stage / machine)
           if p not in before or p.stat().st_mtime_ns != before[p]] if (stage / machine).exists() else []
    if not new:
        raise RecordError(f"asv run (exit {rc}) wrote no result file; history left as it was")
    for p in new:
        validate_result_file(p)
    (results / machine).mkdir(parents=True, exist_ok=True)
    for name in ("benchmarks.json",):
        src = stage / name
        if src.exists():
            tmp = results / (name + ".tmp")
            shutil.copy2(src, tmp)
            os.replace(tmp, results / name)
    for p in new + [stage / machine / "machine.json"]:
        if p.exists():
            tmp = results / machine / (p.name + ".tmp")
            shutil.copy2(p, tmp)
            os.replace(tmp, results / machine / p.name)
    print(f"recorded {', '.join(p.name for p in new)} (asv exit {rc})", flush=True)
    return results / machine / new[0].name


def record_main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m gemm.track")
    p.add_argument("--repo", default=".")
    p.add_argument("--machine", required=True)
    p.add_argument("--commit", default="HEAD")
    p.add_argument("--results", default=None, help="results directory (default: the repo's)")
    a = p.parse_args(argv)
    try:
        sha = subprocess.check_output(["git", "rev-parse", a.commit], cwd=a.repo, text=True).strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"record: git cannot name commit {a.commit!r} in {a.repo}: {exc}", file=sys.stderr)
        return 2
    try:
        record(Path(a.repo), a.machine, sha, results=Path(a.results) if a.results else None)
    except RecordError as exc:
        print(f"record: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(record_main())
