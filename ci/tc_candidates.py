"""Device run: 12_tf32_mma_sync constants tried at 4096 and 8192 (checked and timed, each
against cuBLAS TF32 interleaved), plus cuBLAS BF16 alone for the anchor figures."""
import json, os, sys
from gemm.core import metrics
from gemm.core.problem import Problem
from gemm.measure.sweep import sweep

CANDS = [{}, {"BN": 256, "WN": 64}, {"BM": 256, "WM": 128, "WN": 64},
         {"BK": 16, "STAGES": 4}, {"BN": 256, "WN": 64, "BK": 16, "STAGES": 4}]
probs = [Problem.parse(s) for s in ("4096", "8192")]
out = []
for d in CANDS:
    doc = sweep(["12_tf32_mma_sync"], probs, defines=d)
    for r in doc["records"]:
        v = metrics.values(r) if r["status"] == "ok" else {}
        line = (d, r["size"], r["status"], v.get("tflops"), v.get("pct_of_cublas"),
                (r.get("resources") or {}), (r.get("error") or "")[:300])
        print(line, flush=True)
        out.append(line)
doc = sweep(["cublas_bf16"], probs + [Problem.parse("2048")])
for r in doc["records"]:
    print("cublas_bf16", r["size"], r["status"], metrics.baseline_values(r), flush=True)
json.dump([list(map(str, l)) for l in out], open(os.path.join(os.environ["OUT"], "cands.json"), "w"))
