#!/usr/bin/env bash
# Install the package and what the GPU job needs (PyCUDA builds against your CUDA toolkit).
# Outside a virtual environment, into .venv (ci/venv.sh; the other ci scripts use it through
# ci/lib.sh). Nothing is installed where everything already imports (e.g. the offline GPU
# kit, .devkit/env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/venv.sh
# ruptures (change points in gemm regress) is optional: without it the report says so
ci_python gpu,track,test numpy pycuda nvmath asv pytest pytest_benchmark pynvml matplotlib scipy
echo "setup: $(python3 -c 'import sys; print(sys.executable)') has what the GPU job needs"
