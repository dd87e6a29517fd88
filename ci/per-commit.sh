#!/usr/bin/env bash
# The whole per-commit GPU job, in order: set up, correctness gate, record the benchmarks with
# asv, regression gate, publish. Logs and results go to $OUT (default out/); a short table of
# this commit's TFLOPS and % of cuBLAS is printed last. Exit non-zero if any stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
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
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/gpu.csv" 2>&1 || true
stage gate bash ci/gate.sh
stage record bash ci/record.sh && stage regress bash ci/regress.sh --all
stage publish bash ci/publish.sh || true
tar czf "$OUT/results.tgz" results $( [ -d verdicts ] && echo verdicts)
[ -f "$OUT/sweep.json" ] && python3 -m gemm show "$OUT/sweep.json"
grep -E "^(REGRESSION|[0-9]+ series)" "$OUT/regress.log" 2>/dev/null
exit $status
