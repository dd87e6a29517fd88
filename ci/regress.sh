#!/usr/bin/env bash
# The regression gate: this commit (HEAD, or $COMMIT) against the history before it on this machine. A flagged
# drop is confirmed by an A/B against the reference commit's code on this GPU; the verdicts are
# kept in $VERDICTS/<machine>/<commit>.json (commit them with results/). The report goes to
# $OUT/regress.json (schema gemm.regress/1). Extra arguments go to `gemm regress`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rm -f "$OUT/regress.json"    # a report left from an earlier run is not this one's
gemm regress --machine "$(machine)" --results "$RESULTS" --verdicts "$VERDICTS" \
  --calibration "${CALIBRATION:-calibration}" \
  --commit "$(git rev-parse "${COMMIT:-HEAD}")" --record-verdicts --json "$OUT/regress.json" \
  ${REGRESS_ARGS:-} "$@"
