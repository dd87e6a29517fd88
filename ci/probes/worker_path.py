"""Probe (not part of the suite or the gate): is a slow A/A process slow throughout, or only
for one allocation? The sequel to noise_sources.py. That probe timed kernels alone and saw no
slow process, while the calibration's A/A (kernel and cuBLAS interleaved, through the worker)
had 3 of 30 processes run 07 at 2048 0.64-0.84 % slow.

One process, per kernel one gemm.measure.worker.Job (as a worker holds), and per series REPS
times the worker's own steps on fresh operands: check_problem, then time_problem (kernel and
cuBLAS sampled in turn under the suite's policy). Prints one line "PROBE {json}": per series,
per repetition, the kernel's and cuBLAS's median (s), their batch sizes, sample counts, and
the operands' addresses. Slow in every repetition: a per-process state (context, module,
clocks). Slow in some: the allocation or the batch.
Defaults: 07 at 1024, 2048, 4096, 8192 in that order (as an A/A worker measures it), REPS=3;
SERIES="07@2048 8192;09@2048" picks others. Run on the GPU machine (30 processes, ~5 min):
  for i in $(seq 30); do python3 ci/probes/worker_path.py; done
POLICY (default confirm: what an A/A process measures under) names the policy. KEEP=1 keeps
each repetition's operands alive, so the next one lands elsewhere in device memory (freed,
it would likely get the same memory back). ALONE=1 times the kernel alone, without cuBLAS
sampled in turn (the check still runs both): is the slow state made by the interleaving
(cuBLAS's own operands evicting the kernel's from the L2 between samples)? Each timing also
reports its mean SM clock. (ALONE times one operand set, whatever the policy's
`allocations`; the interleaved path is the worker's own and times them all.)
"""
import json
import os

from gemm.core.policy import named
from gemm.core.problem import Problem
from gemm.core.stats import median
from gemm.measure.worker import Job, Worker, _time_set, check_problem, time_problem

REPS = int(os.environ.get("REPS", "3"))
POLICY = named(os.environ.get("POLICY", "confirm"))
KEEP = os.environ.get("KEEP") == "1"
ALONE = os.environ.get("ALONE") == "1"


def time_alone(job, prob, ops, rec):
    """time_problem without the baseline: the kernel's launches only, on one operand set."""
    ops.fill(job.checker.support, prob, job.policy.timing_seed)
    res = _time_set(job, {"kernel": (job.kernel.launcher(prob), ops.out)}, ops)
    rec["kernel_time"] = res["kernel"].as_dict()


def summary(m):
    if not m.get("samples_s"):
        return [None, m.get("batch"), 0, None]
    clocks = [c for c in m.get("clocks_mhz") or [] if c]
    return [median(m["samples_s"]), m.get("batch"), len(m["samples_s"]),
            sum(clocks) / len(clocks) if clocks else None]

SERIES = {k.strip(): [int(s) for s in v.split()] for k, v in
          (x.split("@") for x in os.environ.get("SERIES", "07@1024 2048 4096 8192").split(";")
           if x.strip())}
out = {"pid": os.getpid(), "policy": os.environ.get("POLICY", "confirm"), "keep": KEEP,
       "alone": ALONE, "series": {}}
for kernel, sizes in SERIES.items():
    worker = Worker({"policy": POLICY.as_dict()})
    job = Job(worker, kernel)
    kept = []
    for n in sizes:
        prob = Problem(n, n, n)
        rows = []
        for _ in range(REPS):
            rec = job.record(prob)
            ops = job.checker.operands(prob)
            try:   # a failing repetition is reported as such; the process goes on
                check_problem(job, prob, ops, rec)
                (time_alone if ALONE else time_problem)(job, prob, ops, rec)
                k, b = rec.get("kernel_time") or {}, rec.get("baseline_time") or {}
                rows.append({"status": rec["status"], "a": int(ops.a), "out": int(ops.out),
                             "kernel": summary(k), "cublas": summary(b)})
            except Exception as exc:
                rows.append({"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]})
            finally:
                if KEEP:
                    kept.append(ops)
                else:
                    ops.free()
        out["series"][f"{kernel}@{n}"] = rows
    for ops in kept:
        ops.free()
    worker.close()
print("PROBE " + json.dumps(out), flush=True)
