#!/usr/bin/env bash
# The correctness gate on a GPU: every kernel and cuBLAS, every shape and (alpha, beta).
# Fails if a GPU test is skipped (no GPU where one is expected) or fails.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}; mkdir -p "$out"
python3 -m pytest -q -p no:cacheprovider tests -rs --junitxml="$out/gate.xml" 2>&1 | tee "$out/gate.log"
if grep -q "SKIPPED.*no GPU" "$out/gate.log"; then
  echo "gate: GPU tests were skipped: no usable GPU on this runner" >&2; exit 1
fi
