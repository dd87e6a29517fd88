#!/usr/bin/env bash
# The browsable history, no GPU needed: asv's HTML (into .asv/html) and PNG plots (plots/).
# OFFLINE=1 also copies asv's CDN scripts next to the pages (npm), for runners without internet.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m gemm publish ${OFFLINE:+--offline}
python3 -m gemm plot --results results --out plots ${MACHINE:+--machine "$MACHINE"}
echo "publish: open .asv/html/index.html (or: asv preview)"
