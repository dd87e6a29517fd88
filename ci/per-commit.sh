#!/usr/bin/env bash
# The whole per-commit GPU job, in order: set up, correctness gate, record the benchmarks with
# asv, regression gate, memory check, publish. Logs and reports go to $OUT (default out/); the
# table of this commit's TFLOPS and % of cuBLAS and the gate's verdict are printed last.
# Exit non-zero if any stage failed.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
status=0
stage() {  # stage NAME CMD...: run, log to $OUT/NAME.log, remember a failure
  local name=$1; shift
  local t0=$SECONDS
  echo "== $name"
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "   $name: exit $rc in $((SECONDS - t0)) s (log: $OUT/$name.log)"
  [ $rc -eq 0 ] || { status=1; tail -n 25 "$OUT/$name.log"; }
  return $rc
}
stage setup bash ci/setup.sh || exit 1
nvidia-smi ${CUDA_VISIBLE_DEVICES:+-i "$CUDA_VISIBLE_DEVICES"} --query-gpu=name,uuid,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv > "$OUT/gpu.csv" 2>&1 || true
stage gate bash ci/gate.sh
stage record bash ci/record.sh && stage regress bash ci/regress.sh --all
if command -v compute-sanitizer >/dev/null; then stage memcheck bash ci/memcheck.sh; fi
stage publish bash ci/publish.sh || true
tar czf "$OUT/results.tgz" "$RESULTS" $( [ -d "$VERDICTS" ] && echo "$VERDICTS")
reports=$(ls "$OUT"/sweeps/*.json "$OUT/regress.json" 2>/dev/null)
[ -n "$reports" ] && gemm show $reports
exit $status
