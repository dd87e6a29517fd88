#!/usr/bin/env bash
# compute-sanitizer memcheck over the correctness gate's odd shapes: every kernel (or those
# given: KERNELS="06 07"), every (alpha, beta), the worker processes included; only the GEMM
# kernels (names starting sgemm_) are instrumented, cuBLAS and the harness run natively. Any
# out-of-bounds or misaligned access fails it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
shapes="1x1x1 65x129x7 127x1x300 1x4097x3 4095x63x129 1000x832x504 129x131x67"
args=(); for k in ${KERNELS:-}; do args+=(-k "$k"); done
compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 --kernel-name kns=sgemm_ \
  --print-limit 20 python3 -m gemm check "${args[@]}" --shapes $shapes
