#!/usr/bin/env bash
# What a fresh `gemm measure --policy confirm` process costs, and where: the same six targets
# (15 at 2048 4096 8192, 14 13 10 at 8192) twice, first with an empty cubin cache (every
# build by nvcc), then warm; per record its kernel's throttled and kept samples per operand
# set, their mean SM clock and the wall. Run on the device (source .devkit/env.sh); files to $OUT.
source .devkit/env.sh
show() { python3 - "$1" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for r in d.get("records",[]):
    t=r.get("kernel_time") or {}
    c=[x for x in t.get("clocks_mhz") or [] if x]
    print("  ", r.get("kernel"), r.get("size"), r.get("status"), "throttled", t.get("throttled"), "kept per set", [x.get("samples") for x in t.get("per_set") or []], "clk", round(sum(c)/len(c)) if c else None, "wall", {k: (round(v,2) if isinstance(v,float) else v) for k,v in (r.get("wall") or {}).items() if k!="open_s"})
PY
}
tasks="--task 15_bf16_pingpong@2048 --task 15_bf16_pingpong@4096 --task 15_bf16_pingpong@8192 --task 14_bf16_wgmma_tma@8192 --task 13_tf32_wgmma_tma@8192 --task 10_autotuned@8192"
for pass in cold warm; do
  [ $pass = cold ] && export GEMM_CACHE_DIR=$(mktemp -d)
  t0=$(date +%s.%N)
  timeout 150 python3 -m gemm measure $tasks --policy confirm --json $OUT/diag-$pass.json > $OUT/diag-$pass.log 2>&1
  echo "$pass rc=$? $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
  show $OUT/diag-$pass.json
done
