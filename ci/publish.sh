#!/usr/bin/env bash
# The browsable history, no GPU needed: asv's HTML (into .asv/html) and PNG plots (plots/).
# OFFLINE=1 also copies asv's CDN scripts next to the pages (npm), for runners without internet.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
gemm publish ${OFFLINE:+--offline}
gemm plot --results "$RESULTS" --out plots ${MACHINE:+--machine "$MACHINE"}
echo "publish: open .asv/html/index.html (or: asv preview)"
