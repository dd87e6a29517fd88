#!/usr/bin/env bash
# Record this commit's benchmarks with asv into results/<machine>/ (staged: an interrupted or
# failed run leaves the history untouched). MACHINE defaults to the GPU's name (h200);
# RESULTS to results/ (another history, e.g. a scratch copy).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
machine=${MACHINE:-$(python3 -m gemm machine)}
[ -n "${MACHINE:-}" ] && python3 -m gemm machine --machine "$machine" >/dev/null
if [ -n "$(git status --porcelain --untracked-files=no)" ] && [ -z "${GEMM_ALLOW_DIRTY:-}" ]; then
  echo "record: the working tree has uncommitted changes; results would not belong to HEAD" >&2
  exit 2
fi
GEMM_SWEEP_JSON="$out/sweep.json" python3 -m gemm.track --machine "$machine" --commit "${COMMIT:-HEAD}" \
  --results "${RESULTS:-results}"
