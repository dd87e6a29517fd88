#!/usr/bin/env bash
# Record this commit's benchmarks with asv into $RESULTS/<machine>/ (staged: an interrupted or
# failed run leaves the history untouched). Extra arguments go to `gemm record` (e.g.
# `-b 05_2d` to record one kernel). Each sweep's full document is kept in $OUT/sweeps/.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if [ -n "$(git status --porcelain --untracked-files=no)" ] && [ -z "${GEMM_ALLOW_DIRTY:-}" ]; then
  echo "record: the working tree has uncommitted changes; results would not belong to HEAD" >&2
  exit 2
fi
rm -rf "$OUT/sweeps"
GEMM_SWEEP_DIR="$OUT/sweeps" gemm record --machine "$(machine)" --commit "${COMMIT:-HEAD}" \
  --results "$RESULTS" "$@"
