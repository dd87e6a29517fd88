#!/usr/bin/env bash
# The browsable history: asv's HTML (into .asv/html) and PNG plots (into plots/). No GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
asv publish --config asv.conf.json "$@"
python3 -m gemm plot --results results --out plots ${MACHINE:+--machine "$MACHINE"}
echo "publish: open .asv/html/index.html (or: asv preview)"
