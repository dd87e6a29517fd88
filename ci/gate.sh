#!/usr/bin/env bash
# The correctness gate on a GPU: every kernel and cuBLAS, every shape and (alpha, beta).
# GEMM_REQUIRE_GPU=1 makes a GPU test that finds no GPU fail instead of skip.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
GEMM_REQUIRE_GPU=1 python3 -m pytest -q -p no:cacheprovider tests -rs --junitxml="$OUT/gate.xml" "$@"
