#!/usr/bin/env bash
# The job's markdown summary (gemm summary): the gate's verdicts from $OUT/regress.json (those
# that fail it and the UNRESOLVED first) and this commit's table, TFLOPS and % of cuBLAS, from
# the record's sweeps in $OUT/sweeps/. Written to $OUT/summary.md and, on GitHub Actions,
# appended to $GITHUB_STEP_SUMMARY. Arguments go to `gemm summary` (e.g. --stage gate=0).
# It never fails the job: a missing input is a line of the summary, and where gemm itself
# cannot run (setup failed) the summary says so and shows the end of its error.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
md="$OUT/summary.md"
if ! gemm summary --sweeps "$OUT/sweeps" --regress "$OUT/regress.json" --out "$md" "$@" \
     2> "$OUT/summary.log"; then
  { echo "## GPU job"; echo
    echo "\`gemm summary\` failed (its log is summary.log in the job's artifact):"; echo
    echo '```'; tail -n 20 "$OUT/summary.log"; echo '```'
  } > "$md"
fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$md" >> "$GITHUB_STEP_SUMMARY"; fi
echo "summary: $md"
exit 0
