#!/usr/bin/env bash
# Device run for the tensor-core branch: gate subset, then bench of 11/12 with baselines.
set -u
source .devkit/env.sh
cd .scratch/tc
export PYTHONPATH=$PWD:$PYTHONPATH
python3 -c 'import gemm; print(gemm.__file__)'
export GEMM_REQUIRE_GPU=1
timeout 200 python3 -m pytest -q --maxfail=20 tests/test_gpu.py -k "11_ or 12_ or tf32 or bf16 or precision" 2>&1 | tail -25 | tee $OUT/gate.txt
timeout 150 python3 -m gemm bench -k 11 -k 12 --sizes 2048 4096 8192 --json $OUT/bench.json 2>&1 | tail -30 | tee $OUT/bench.txt
