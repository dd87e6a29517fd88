#!/usr/bin/env bash
# The correctness gate on a GPU: every kernel and cuBLAS, every shape and (alpha, beta): the
# tests marked gpu (those that use the GPU; the CPU tests are CI's, .ci/run). GATE_ALL=1 runs
# every test here. GEMM_REQUIRE_GPU=1 makes a GPU test that finds no GPU fail instead of skip.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
select=(-m gpu); [ "${GATE_ALL:-0}" = 1 ] && select=()
GEMM_REQUIRE_GPU=1 python3 -m pytest -q -p no:cacheprovider tests "${select[@]}" -rs \
  --junitxml="$OUT/gate.xml" "$@"
