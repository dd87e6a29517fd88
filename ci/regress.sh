#!/usr/bin/env bash
# The regression gate: the newest recorded commit against the history on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
machine=${MACHINE:-$(python3 -m gemm machine)}
python3 -m gemm regress --machine "$machine" --json "$out/regress.json" "$@"
