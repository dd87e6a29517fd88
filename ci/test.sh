#!/usr/bin/env bash
# Set up and run the test suite. Without a GPU the GPU tests skip (with the reason) and the
# CPU tests run: registry, nvcc/ptxas compile checks (if nvcc is on the PATH), input
# validation, geometry, verifier, timing statistics, CLI, regression gate, asv publish.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import numpy, pytest, pytest_benchmark, asv, matplotlib" 2>/dev/null; then
  python3 -m pip install -q -e ".[test,track]"
fi
python3 -m pytest -q "$@"
