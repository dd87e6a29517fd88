"""A sweep: kernels x problems, each kernel in its own worker process (gemm.worker).

Returns plain data: {"device", "policy", "records": [...], "wall_s", ...}. A kernel that fails
to compile, crashes or computes a wrong answer gets a record with that status; the sweep
goes on with the rest. Derived figures (TFLOPS, % of cuBLAS) come from `summarize`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from . import stats
from .problem import Problem
from .timing import Policy
from .worker import INFO_TAG, TAG

DEFAULT_SIZES = (512, 1024, 2048, 4096, 8192)
WORKER_TIMEOUT_S = 900


def _worker_env() -> dict:
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_worker(job: dict, timeout: float = WORKER_TIMEOUT_S):
    """Yield ('info'|'result', dict) as the worker reports, then ('exit', {code, stderr})."""
    proc = subprocess.Popen([sys.executable, "-m", "gemm.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_worker_env())
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    deadline = time.monotonic() + timeout
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    err_chunks: list[str] = []
    import threading
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
                rest = proc.stdout.read()
                for line in rest.splitlines():
                    yield from _parse(line)
                break
            continue
        line = proc.stdout.readline()
        if not line:
            break
        yield from _parse(line)
    code = proc.wait()
    t.join(timeout=5)
    stderr = "".join(err_chunks)
    yield "exit", {"code": code, "stderr": stderr[-4000:], "timed_out": timed_out}


def _parse(line: str):
    if line.startswith(TAG):
        yield "result", json.loads(line[len(TAG):])
    elif line.startswith(INFO_TAG):
        yield "info", json.loads(line[len(INFO_TAG):])


def sweep(kernels: list[str], problems: list[Problem], policy: Policy | None = None,
          time_it: bool = True, ab=((1.0, 0.0),), defines: dict | None = None,
          progress=None) -> dict:
    """Run every kernel on every problem; never raises for a kernel's own failure."""
    policy = policy or Policy()
    t0 = time.time()
    out = {"device": None, "policy": policy.as_dict(), "records": [], "started": t0,
           "python": sys.version.split()[0]}
    total = len(kernels) * len(problems)
    done = 0
    for name in kernels:
        left = list(problems)
        while left:
            job = {"kernel": name, "problems": [{"M": p.M, "N": p.N, "K": p.K} for p in left],
                   "policy": policy.as_dict(), "time": time_it, "ab": [list(x) for x in ab],
                   "defines": defines or {}}
            got = 0
            exit_info = None
            for kind, obj in run_worker(job):
                if kind == "info":
                    out["device"] = out["device"] or obj["device"]
                elif kind == "result":
                    out["records"].append(obj)
                    got += 1
                    done += 1
                    if progress:
                        progress(done, total, obj)
                else:
                    exit_info = obj
            left = left[got:]
            if left and not (exit_info and exit_info["code"] == 3 and got > 0):
                # the worker died on left[0] without reporting it: record that, go on after it
                p = left.pop(0)
                exit_info = exit_info or {"code": None, "stderr": "", "timed_out": False}
                why = ("timed out" if exit_info["timed_out"] else f"exit {exit_info['code']}")
                rec = {"kernel": name, "size": p.label, "M": p.M, "N": p.N, "K": p.K,
                       "flops": p.flops, "status": "crashed",
                       "error": f"worker {why}: {exit_info['stderr'].strip()[-1500:]}"}
                out["records"].append(rec)
                done += 1
                if progress:
                    progress(done, total, rec)
                if got == 0 and "worker failed" in exit_info["stderr"] and not out["device"]:
                    # the worker could not even start (no GPU): the same will happen again
                    for p in left:
                        out["records"].append({**rec, "size": p.label, "M": p.M, "N": p.N,
                                               "K": p.K, "flops": p.flops})
                    left = []
    out["wall_s"] = time.time() - t0
    return out


def derived(rec: dict) -> dict:
    """TFLOPS, % of cuBLAS and spreads for one record (None where not measured)."""
    d = {"tflops": None, "baseline_tflops": None, "pct": None, "ms": None, "baseline_ms": None,
         "spread": None, "baseline_spread": None}
    kt, bt = rec.get("kernel_time"), rec.get("baseline_time")
    if rec.get("status") != "ok" or not kt or not bt:
        return d
    km, bm = stats.median(kt["samples_s"]), stats.median(bt["samples_s"])
    d.update(ms=km * 1e3, baseline_ms=bm * 1e3, tflops=rec["flops"] / km / 1e12,
             baseline_tflops=rec["flops"] / bm / 1e12, pct=100.0 * bm / km,
             spread=stats.rel_spread(kt["samples_s"]), baseline_spread=stats.rel_spread(bt["samples_s"]))
    return d


def problems_from_sizes(sizes) -> list[Problem]:
    return [s if isinstance(s, Problem) else Problem.parse(str(s)) for s in sizes]

