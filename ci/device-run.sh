#!/usr/bin/env bash
# For the lent GPU machine of this workplace (the `device` tool): the whole per-commit job
# (ci/per-commit.sh) plus optional extras, everything bundled into $OUT/bundle.tgz (the tool
# returns at most 8 files). EXTRAS: space-separated from
#   bench       gemm bench, all kernels, 512..8192 (the seed's table)
#   crosscheck  ci/crosscheck.py: seed kernel spread over 3 processes; cuBLAS vs torch.mm
#   rerun       RERUNS more record + regress passes of the same commit (noise check)
# Usage there: source .devkit/env.sh && EXTRAS="bench crosscheck" bash ci/device-run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:?set OUT}
work=$(mktemp -d)
export OUT=$work PYTHONUNBUFFERED=1
t0=$SECONDS
bash ci/per-commit.sh > "$work/per-commit.log" 2>&1
rc=$?
for extra in ${EXTRAS:-}; do
  case $extra in
    bench) python3 -m gemm bench --json "$work/bench.json" > "$work/bench.log" 2>&1 || rc=1 ;;
    crosscheck) python3 ci/crosscheck.py "$work" > "$work/crosscheck.log" 2>&1 || rc=1 ;;
    rerun)
      for i in $(seq 1 "${RERUNS:-3}"); do
        mkdir -p "$work/rerun$i"
        OUT="$work/rerun$i" bash ci/record.sh > "$work/rerun$i/record.log" 2>&1 &&
          OUT="$work/rerun$i" bash ci/regress.sh > "$work/rerun$i/regress.log" 2>&1
        echo "rerun $i: exit $? $(grep -E '^[0-9]+ series' "$work/rerun$i/regress.log")" | tee -a "$work/reruns.log"
      done ;;
  esac
done
tar czf "$work/results.tgz" results
tar czf "$final/bundle.tgz" -C "$work" .
cp "$work/sweep.json" "$final/" 2>/dev/null
echo "device-run: $((SECONDS - t0)) s, exit $rc"
tail -n 30 "$work/per-commit.log"
for f in bench.log crosscheck.log reruns.log; do
  [ -f "$work/$f" ] && { echo "== $f"; tail -n 45 "$work/$f"; }
done
exit $rc
