#!/usr/bin/env bash
# Set up and run the test suite. Without a GPU the GPU tests skip (with the reason) and the
# CPU tests run: registry, layers, nvcc/ptxas and SASS checks (if nvcc is on the PATH), input
# validation, geometry, tolerance rule, timing statistics, metrics, CLI, regression gate, A/B
# plumbing, asv suite and recording, history migration, the wheel, asv publish.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import numpy, pytest, pytest_benchmark, asv, matplotlib, wheel" 2>/dev/null; then
  python3 -m pip install -q -e ".[test,track,sass]"
fi
python3 -m pytest -q "$@"
