#!/usr/bin/env bash
# Why a confirmed drop dropped, without a GPU: after the regression gate, for each confirmed
# DROP in $OUT/regress.json (verdict "DROP", not "unconfirmed"; one per kernel and size, at
# most EXPLAIN_MAX, default 3), `gemm explain KERNEL --size SIZE --static` between the commit
# the A/B confirmed the drop against (else the row's reference, else its anchor) and HEAD
# (or $COMMIT), each within EXPLAIN_TIMEOUT_S (default 60 s). Writes
# $OUT/explain/<kernel>-<size>.json (gemm.explain/1) and .log, and prints each summary line
# (also kept in $OUT/explain/summary.txt). Never fails the job: a failure is a line.
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
while read -r kernel size old; do
  base="$OUT/explain/$kernel-$size"
  line=$(timeout "${EXPLAIN_TIMEOUT_S:-60}" python3 -m gemm explain "$kernel" --size "$size" \
         --old "$old" --new "$(git rev-parse "${COMMIT:-HEAD}")" --static --brief \
         --json "$base.json" 2> "$base.log")
  rc=$?
  [ $rc -eq 0 ] || line="$kernel at $size: explain failed (exit $rc$([ $rc -eq 124 ] &&
    echo ", over ${EXPLAIN_TIMEOUT_S:-60} s"); log: $base.log)"
  echo "explain: $line (vs ${old:0:10})" | tee -a "$OUT/explain/summary.txt"
done <<< "$rows"
exit 0
