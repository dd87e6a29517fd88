#!/usr/bin/env bash
# Set up and run the test suite. Without a GPU the GPU tests skip (with the reason) and the
# CPU tests run: registry, layers, nvcc/ptxas and SASS checks (if nvcc is on the PATH), input
# validation, geometry, tolerance rule, timing statistics, metrics, CLI, regression gate, A/B
# plumbing, asv suite and recording, history migration, the wheel, asv publish.
# Outside a virtual environment, installs into .venv (ci/venv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/venv.sh
ci_python test,track,sass numpy pytest pytest_benchmark asv matplotlib ruptures scipy wheel
python3 -m pytest -q "$@"
