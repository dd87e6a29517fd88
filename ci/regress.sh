#!/usr/bin/env bash
# The regression gate: the newest recorded commit against the history on this machine. A flagged
# drop is confirmed by an A/B against the reference commit's code on this GPU; the verdicts are
# kept in verdicts/<machine>/<commit>.json (commit them with results/). RESULTS and VERDICTS
# name another history (default results/ and verdicts/).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
machine=${MACHINE:-$(python3 -m gemm machine)}
python3 -m gemm regress --machine "$machine" --results "${RESULTS:-results}" \
  --verdicts "${VERDICTS:-verdicts}" --record-verdicts --json "$out/regress.json" "$@"
