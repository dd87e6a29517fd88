"""`gemm tune KERNEL`: search a kernel's constants on this GPU, over the space its registry
entry declares (`tune`), and keep the winner of each tuning bucket (gemm.core.tuning).

Every candidate is compiled ahead in parallel (nvcc needs no GPU), then measured by the
ordinary sweep, one worker process per candidate, under the suite's timing policy: checked
against the float64 reference with every (alpha, beta) pair of the correctness gate, at the
tuning buckets' sizes and at a ragged shape (check_shape: every dimension odd, the fallback
path; 13 and 14 run it on copies with K padded, registry pad_k; a TMA kernel without pad_k,
which refuses an odd K by contract, gets ragged M and N with K a multiple of 8 and a partial K
tile), before it is timed. A
candidate is rejected if it does not compile, uses local memory (spills or a stack frame), or
computes a wrong answer anywhere. The winner of a bucket is the fastest accepted candidate at
that bucket's size. The search log keeps every candidate with its status, registers and TFLOPS.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor

from ..core import metrics, shapes, tuning
from ..core.policy import SUITE
from ..core.registry import KernelSpec

CHECK_SHAPE = "129x131x67"   # unaligned: the fallback path; remainders everywhere
# for kernels whose launch contract refuses CHECK_SHAPE (TMA without pad_k: 16-byte row
# strides, so K a multiple of 8 in bf16): M and N ragged for every tile, K one full tile and
# a partial one
CHECK_SHAPE_ALIGNED = "129x131x72"


def check_shape(spec: KernelSpec) -> str:
    """The ragged shape a candidate is checked at: CHECK_SHAPE, or CHECK_SHAPE_ALIGNED where
    the kernel refuses it by contract (gemm.core.geometry.unsupported), which would otherwise
    reject every candidate as unsupported."""
    from ..core.geometry import unsupported
    from ..core.problem import Problem
    ok = [s for s in (CHECK_SHAPE, CHECK_SHAPE_ALIGNED) if not unsupported(spec, Problem.parse(s))]
    if not ok:
        raise ValueError(f"{spec.name} refuses both tuning check shapes "
                         f"({CHECK_SHAPE}, {CHECK_SHAPE_ALIGNED})")
    return ok[0]


def _compile(args) -> str | None:
    spec, cand, arch = args
    from ..cuda.loader import compile_ahead
    return compile_ahead(spec.with_defines(**cand), arch)


def tune(spec: KernelSpec, policy=SUITE, log=print) -> dict:
    from ..cuda.device import arch_of_device_0
    from .sweep import sweep
    cands = tuning.candidates(spec)
    if not cands:
        raise ValueError(f"{spec.name} declares no search space (its registry entry's `tune`)")
    arch = arch_of_device_0()
    t0 = time.time()
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        errors = list(pool.map(_compile, [(spec, c, arch) for c in cands]))
    log(f"tune: {len(cands)} candidates compiled in {time.time() - t0:.0f} s "
        f"({sum(e is not None for e in errors)} failed)")
    sizes = [size for _, _, size in tuning.TUNING_BUCKETS]
    problems = shapes.problems(sizes + [check_shape(spec)])
    rows = []
    for i, (cand, err) in enumerate(zip(cands, errors)):
        row = {"defines": cand, "status": "ok", "why": "", "resources": None, "tflops": {},
               "pct_of_cublas": {}}
        if err:
            row.update(status="compile_error", why=err.strip().splitlines()[-1][:300])
        else:
            doc = sweep([spec.name], problems, policy, ab=shapes.CHECK_AB, defines=cand)
            recs = doc["records"]
            row["resources"] = next((r.get("resources") for r in recs if r.get("resources")), None)
            bad = [r for r in recs if r["status"] != "ok"]
            spills = {e: v for e, v in (row["resources"] or {}).items() if v["local_bytes"]}
            if bad:
                row.update(status=bad[0]["status"],
                           why=f"{bad[0]['size']}: {(bad[0].get('error') or '')[:300]}")
            elif spills:
                row.update(status="spills", why=f"local memory: {spills}")
            for bucket, _, size in tuning.TUNING_BUCKETS:
                rec = next((r for r in recs if r["size"] == size), None)
                vals = metrics.values(rec) if rec else {}
                row["tflops"][bucket] = vals.get("tflops")
                row["pct_of_cublas"][bucket] = vals.get("pct_of_cublas")
        rows.append(row)
        shown = ", ".join(f"{c} {v:.2f}" for c, v in row["tflops"].items() if v is not None)
        log(f"tune: [{i + 1}/{len(cands)}] {cand}: {row['status']} {shown} {row['why'][:120]}")
    winners = {}
    for bucket, _, size in tuning.TUNING_BUCKETS:
        ok = [r for r in rows if r["status"] == "ok" and r["tflops"].get(bucket) is not None]
        if ok:
            best = max(ok, key=lambda r: r["tflops"][bucket])
            winners[bucket] = {"defines": best["defines"], "size": size,
                            "tflops": round(best["tflops"][bucket], 3),
                            "pct_of_cublas": round(best["pct_of_cublas"][bucket], 2)}
    return {"kernel": spec.name, "arch": arch, "policy": policy.as_dict(),
            "classes": [list(c) for c in tuning.TUNING_BUCKETS], "candidates": rows,
            "winners": winners, "wall_s": round(time.time() - t0, 1)}
