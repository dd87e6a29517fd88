"""A sweep: targets x problems, in one worker process (gemm.measure.worker), which a crash
ends; a fresh one then goes on with the (target, problem) pairs left.

Returns the measurement document (plain data, schema gemm.measure/1): {"schema", "package"
(the gemm that measured), "device", "policy", "records": [...] (every sample and clock reading), "values": [{"kernel", "size",
"status", "error", "metrics": {metric key: value}}], "wall_s", ...}. `gemm measure` prints it,
`gemm bench --json` saves it; the keys of "values" are the stable part other trees rely on. A kernel that fails to compile, crashes or computes
a wrong answer gets a record with that status; the sweep goes on with the rest. Values
(TFLOPS, % of cuBLAS, ...) come from gemm.core.metrics.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time

from ..core import metrics
from ..core.policy import Policy
from ..core.problem import Problem
from .worker import EXIT_CONTEXT_LOST, EXIT_NO_GPU, INFO_TAG, TAG, failed_record

SCHEMA = "gemm.measure/1"
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(PACKAGE_DIR, "__init__.py")
WORKER_TIMEOUT_S = 900


def _worker_env() -> dict:
    env = dict(os.environ)
    root = os.path.dirname(PACKAGE_DIR)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_worker(job: dict, timeout: float = WORKER_TIMEOUT_S):
    """Yield ('info'|'result', dict) as the worker reports, then ('exit', {code, stderr}).
    A worker that reports nothing for `timeout` seconds is killed (the clock restarts with
    every line it prints: a sweep's worker runs all its pairs, however many)."""
    proc = subprocess.Popen([sys.executable, "-m", "gemm.measure.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_worker_env())
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    err_chunks: list[str] = []
    t = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True)
    t.start()
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            proc.kill()
            timed_out = True
            break
        if not sel.select(timeout=min(left, 1.0)):
            if proc.poll() is not None:
                for line in proc.stdout.read().splitlines():
                    yield from _parse(line)
                break
            continue
        line = proc.stdout.readline()
        if not line:
            break
        deadline = time.monotonic() + timeout
        yield from _parse(line)
    code = proc.wait()
    t.join(timeout=5)
    yield "exit", {"code": code, "stderr": "".join(err_chunks)[-4000:], "timed_out": timed_out}


def _parse(line: str):
    if line.startswith(TAG):
        yield "result", json.loads(line[len(TAG):])
    elif line.startswith(INFO_TAG):
        yield "info", json.loads(line[len(INFO_TAG):])


def _crashed(name: str, p: Problem, exit_info: dict) -> dict:
    why = "timed out" if exit_info["timed_out"] else f"exit {exit_info['code']}"
    return failed_record(name, p, "crashed",
                         f"worker {why}: {exit_info['stderr'].strip()[-1500:]}")


def sweep(targets: list[str], problems: list[Problem], policy: Policy | None = None,
          time_it: bool = True, ab=((1.0, 0.0),), defines: dict | None = None,
          progress=None, pairs: list[tuple[str, Problem]] | None = None) -> dict:
    """Run every target (kernel name or cuBLAS configuration) on every problem, or, with
    `pairs`, those (target, problem) pairs in that order (targets and problems unused); never
    raises for a kernel's own failure. `progress(done, total, record)` is called as records
    come."""
    policy = policy or Policy()
    left = list(pairs) if pairs is not None else [(n, p) for n in targets for p in problems]
    t0 = time.time()
    out = {"schema": SCHEMA, "package": PACKAGE, "device": None, "policy": policy.as_dict(),
           "records": [], "started": t0, "python": sys.version.split()[0],
           "workers": []}   # per worker process: seconds until ready, and in all
    total = len(left)
    done = 0

    def add(rec):
        nonlocal done
        out["records"].append(rec)
        done += 1
        if progress:
            progress(done, total, rec)

    while left:   # in the order they are run
        job = {"tasks": [[name, {"M": p.M, "N": p.N, "K": p.K}] for name, p in left],
               "policy": policy.as_dict(), "time": time_it, "ab": [list(x) for x in ab],
               "defines": defines or {}}
        got, exit_info, last = 0, None, None
        w = {"targets": list(dict.fromkeys(n for n, _ in left)), "problems": len(left),
             "ready_s": None}
        t1 = time.time()
        for kind, obj in run_worker(job):
            if kind == "info":
                out["device"] = out["device"] or obj["device"]
                w["ready_s"] = time.time() - t1   # process start, imports, context
                w["init_s"] = obj.get("init_s")   # the worker's own phases of it
            elif kind == "result":
                add(obj)
                got, last = got + 1, obj
            else:
                exit_info = obj
        out["workers"].append({**w, "done": got, "wall_s": time.time() - t1})
        left = left[got:]
        if not left:
            break
        if got > 0 and (exit_info["code"] == EXIT_CONTEXT_LOST
                        or last.get("status") == "launch_error"):
            continue  # the last record said what broke; go on with a fresh context
        # the worker died on left[0] without reporting it: record that, go on after it
        add(_crashed(*left.pop(0), exit_info))
        if exit_info["code"] == EXIT_NO_GPU or w["ready_s"] is None:
            # no GPU, or the worker died before it was ready (imports, context, the job
            # itself): the same would happen again for every pair
            for name, p in left:
                add(_crashed(name, p, exit_info))
            left = []
    out["wall_s"] = time.time() - t0
    out["values"] = [value_row(r) for r in out["records"]]
    return out


def value_row(rec: dict) -> dict:
    """The document's stable summary of one record: what the A/B and scripts read."""
    vals = metrics.baseline_values(rec) if rec.get("role") == "baseline" else metrics.values(rec)
    row = {"kernel": rec["kernel"], "size": rec["size"], "status": rec["status"],
           "error": (rec.get("error") or "")[-300:], "metrics": vals}
    if rec.get("fault_injection"):   # gemm.core.faults: this value was slowed on purpose
        row["fault_injection"] = rec["fault_injection"]
    return row


def probe_gpu() -> tuple[bool, str]:
    """(True, '') when a GPU can be used, else (False, why); creates no CUDA context."""
    from ..cuda.device import probe
    return probe()


def progress_line(done: int, total: int, rec: dict) -> str:
    v = metrics.values(rec)
    what = (f"{v['tflops']:.2f} TFLOPS ({v['pct_of_cublas']:.1f} % of cuBLAS)"
            if v["tflops"] is not None else rec["status"])
    fault = rec.get("fault_injection")
    if fault:
        what += f" [FAULT INJECTION +{100 * fault['share']:g} %]"
    return f"[{done}/{total}] {rec['kernel']} {rec['size']}: {what}"


def progress_printer(stream):
    """A progress callback that prints one line per finished record to `stream`."""
    def progress(done, total, rec):
        print(progress_line(done, total, rec), file=stream, flush=True)
    return progress
