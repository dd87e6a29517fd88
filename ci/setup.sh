#!/usr/bin/env bash
# Install the package and what the GPU job needs (PyCUDA builds against your CUDA toolkit).
# Skipped where everything already imports (e.g. the offline GPU kit, .devkit/env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if python3 -c "import numpy, pycuda, nvmath, asv, pytest, pytest_benchmark, pynvml, matplotlib, scipy, ruptures" 2>/dev/null; then
  echo "setup: dependencies already importable; nothing to install"
else
  python3 -m pip install -q -e ".[gpu,track,test]"
fi
