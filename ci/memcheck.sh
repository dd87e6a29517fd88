#!/usr/bin/env bash
# compute-sanitizer memcheck over the correctness gate's odd shapes: every kernel (or those
# given: KERNELS="06 07"), every (alpha, beta), the worker processes included; only the GEMM
# kernels (names starting sgemm_) are instrumented, cuBLAS and the harness run natively. Any
# out-of-bounds or misaligned access fails it.
# MEMCHECK=auto (default): only when kernels/ or the launch path (gemm/cuda, gemm/core) changed
# since the last commit that passed memcheck here (it takes longer than the rest of the job);
# 1: always; 0: never. A pass of every kernel leaves a marker, $VERDICTS/<machine>/memcheck/<sha>
# (committed with the verdicts).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if [ "${MEMCHECK:-auto}" = 0 ]; then echo "memcheck: skipped (MEMCHECK=0)"; exit 0; fi
if [ "${MEMCHECK:-auto}" = auto ]; then
  if prev=$(last_memchecked) && git diff --quiet "$prev" HEAD -- kernels gemm/cuda gemm/core; then
    echo "memcheck: skipped: no kernel or launch code changed since ${prev:0:10} (MEMCHECK=1 runs it)"
    exit 0
  fi
fi
shapes="1x1x1 65x129x7 127x1x300 1x4097x3 4095x63x129 1000x832x504 129x131x67 129x257x72"
args=(); for k in ${KERNELS:-}; do args+=(-k "$k"); done
# --report-api-errors no: memcheck is here for the kernels' device memory accesses; the host API
# errors it would otherwise count are cuda.bindings resolving driver entry points (the first
# cuTensorMapEncodeTiled probes cuGetProcAddress for versions the driver lacks, by design), and
# the harness checks every CUDA call's result itself
compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 --kernel-name kns=sgemm_ \
  --report-api-errors no \
  --print-limit 20 python3 -m gemm check "${args[@]}" --shapes $shapes
if [ -z "${KERNELS:-}" ]; then   # every kernel passed: mark the commit
  mkdir -p "$VERDICTS/$(machine)/memcheck" && git rev-parse HEAD > "$VERDICTS/$(machine)/memcheck/$(git rev-parse HEAD)"
fi
