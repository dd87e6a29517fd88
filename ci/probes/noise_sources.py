"""Probe (not part of the suite or the gate): where does a kernel's process-to-process spread
come from? One process, the kernel timed alone (no cuBLAS interleaved) under the suite's
policy: for each series, ALLOCS fresh operand sets (earlier ones kept alive, so each lands
elsewhere in device memory), each timed twice on the same buffers. Prints one line
"PROBE {json}": per series, per allocation, the buffers' addresses and per timing [median s,
mean SM clock MHz, samples]. Spread of repeats = the measurement's own noise; spread over
allocations = placement; spread of process means = whatever a process adds.
Run on the GPU machine: for i in $(seq 5); do python3 ci/probes/noise_sources.py; done
(docs/probes/ holds a run: 5 processes on each GPU of the two-GPU machine, ALLOCS=4, cc0e510.)
"""
import json, os
from gemm.core.policy import Policy
from gemm.core.problem import Problem
from gemm.cuda import device
from gemm.cuda.targets import open_target
from gemm.measure.check import Checker
from gemm.measure.timer import Timer

ALLOCS = int(os.environ.get("ALLOCS", "5"))
SERIES = [("07", 2048), ("07", 8192), ("09", 2048), ("05", 8192), ("07", 4096)]
drv = device.cuda(); inf = device.info()
stream = drv.Stream(); clocks = device.Clocks(); pol = Policy()
targets = {k: open_target(k, stream) for k in {k for k, _ in SERIES}}
cub = open_target("cublas_fp32", stream)
checker = Checker(stream, cub.fmt)
out = {"pid": os.getpid(), "series": {}}
for k, n in SERIES:
    prob = Problem(n, n, n)
    launch = targets[k].launcher(prob)
    rows, keep = [], []
    for j in range(ALLOCS):
        ops = checker.operands(prob, seed=pol.timing_seed)
        keep.append(ops)
        med = []
        for rep in range(2):
            t = Timer(pol, stream, clocks, inf.max_sm_clock_mhz, inf.l2_bytes)
            m = t.measure({"k": lambda: launch(ops.a, ops.b, ops.out, stream)})["k"]
            t.close()
            cl = [c for c in m.clocks_mhz if c]
            med.append([m.median_s, sum(cl) / len(cl) if cl else None, len(m.samples_s)])
        rows.append({"a": int(ops.a), "b": int(ops.b), "out": int(ops.out), "m": med})
    for o in keep:
        o.free()
    out["series"][f"{k}@{n}"] = rows
print("PROBE " + json.dumps(out), flush=True)
