#!/usr/bin/env bash
# Why a confirmed drop dropped: after the regression gate, for each confirmed DROP in
# $OUT/regress.json (verdict "DROP", not "unconfirmed"; one per kernel and size, at most
# EXPLAIN_MAX, default 3), `gemm explain KERNEL --size SIZE` between the commit the A/B
# confirmed the drop against (else the row's reference, else its anchor) and HEAD (or $COMMIT).
# Where ncu is on the PATH and a GPU answers (nvidia-smi -L), with the GPU's part (timed runs,
# the machine, ncu counters of one launch a side, --clock-control none) within
# EXPLAIN_TIMEOUT_S (default 120 s); where that fails or cannot be, --static (the builds
# alone, no GPU) within EXPLAIN_STATIC_TIMEOUT_S (default 60 s); EXPLAIN_COUNTERS=0: always
# --static. Writes
# $OUT/explain/<kernel>-<size>.json (gemm.explain/1) and .log, and prints each summary line
# (also kept in $OUT/explain/summary.txt). Each explanation is attached (--attach) to the
# DROP rows of its kernel and size in $OUT/regress.json and in the commit's kept verdict file,
# $VERDICTS/<machine>/<commit>.json (the report's machine and commit), where gemm show, the
# job's summary and the published site show it; where the DROP's effect keeps the machine over
# the A/B (each arm's NVML figures), the summary line says whether the arms ran alike. Never
# fails the job: a failure is a line.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
report="$OUT/regress.json"
[ -f "$report" ] || { echo "explain: no $report (the gate did not run)"; exit 0; }
mkdir -p "$OUT/explain"
: > "$OUT/explain/summary.txt"
rows=$(python3 - "$report" "${EXPLAIN_MAX:-3}" <<'PY'
import json, sys
try:
    rows = json.load(open(sys.argv[1])).get("rows") or []
except (OSError, ValueError, AttributeError):
    rows = []
seen = []
for r in rows:
    if r.get("verdict") != "DROP" or r.get("unconfirmed") or (r["kernel"], r["size"]) in seen:
        continue
    against = next((e.get("against") for e in r.get("effects") or []
                    if e.get("verdict") == "DROP" and e.get("against")), None)
    against = against or r.get("reference") or r.get("anchor")
    if against and len(seen) < int(sys.argv[2]):
        seen.append((r["kernel"], r["size"]))
        print(r["kernel"], r["size"], against)
PY
)
[ -n "$rows" ] || { echo "explain: no confirmed DROP to explain"; exit 0; }
gpu=0   # EXPLAIN_COUNTERS=0: --static whatever the machine has
if [ "${EXPLAIN_COUNTERS:-auto}" != 0 ] && command -v ncu > /dev/null 2>&1 &&
   nvidia-smi -L > /dev/null 2>&1; then gpu=1; fi
new=$(git rev-parse "${COMMIT:-HEAD}")
attach=(--attach-report "$report")   # and the kept verdicts, where the report names them
read -r machine judged < <(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(d.get("machine") or "-", d.get("commit") or "-")' "$report" 2> /dev/null || echo "- -")
[ "${machine:--}" != - ] && [ "${judged:--}" != - ] &&
  attach+=(--attach "$VERDICTS" --machine "$machine" --commit "$judged")
while read -r kernel size old; do
  base="$OUT/explain/$kernel-$size"
  : > "$base.log"
  rc=-1 note="" limit=${EXPLAIN_TIMEOUT_S:-120}
  if [ $gpu = 1 ]; then   # the GPU's part too (counters); its progress goes to the log
    line=$(timeout "$limit" python3 -m gemm explain "$kernel" --size "$size" --old "$old" \
           --new "$new" --brief --json "$base.json" "${attach[@]}" 2>> "$base.log")
    rc=$?
  fi
  if [ $rc -ne 0 ] && [ $rc -ne 2 ]; then   # 2: explain cannot (the same without the GPU)
    [ $rc -eq -1 ] || note=" [static only: the GPU's part failed (exit $rc$([ $rc -eq 124 ] &&
      echo ", over $limit s"))]"
    limit=${EXPLAIN_STATIC_TIMEOUT_S:-60}
    line=$(timeout "$limit" python3 -m gemm explain "$kernel" --size "$size" --old "$old" \
           --new "$new" --static --brief --json "$base.json" "${attach[@]}" 2>> "$base.log")
    rc=$?
  fi
  [ $rc -eq 0 ] || line="$kernel at $size: explain failed (exit $rc$([ $rc -eq 124 ] &&
    echo ", over $limit s"); log: $base.log)"
  echo "explain: $line$note (vs ${old:0:10})" | tee -a "$OUT/explain/summary.txt"
done <<< "$rows"
exit 0
