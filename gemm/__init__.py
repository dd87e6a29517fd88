"""gemm: hand-written CUDA SGEMM kernels, timed against cuBLAS and tracked per commit.

Layers, each importing only those before it (tests/test_layers.py checks it):
  core     pure data and rules: registry, problems, geometry, shapes, metrics, policy, tolerance
  cuda     the GPU: device, compile/load, launch, cuBLAS, buffers, graphs, support kernels
  measure  checking and timing on the GPU, worker processes, sweeps, `gemm measure`
  store    what is kept between runs, no GPU: the recorded history read back, kept verdicts
  track    the gate, no GPU: the screen, the rule, the A/B (via `gemm measure`), the report
  calibrate  `gemm calibrate`'s workflow: the runner's noise on the gate's A/B engine
  record   the asv suite, recording, migrations, HTML and plots
  cli      the command line; api: the library call

Importing the package needs no GPU: everything that touches CUDA (PyCUDA, nvmath-python,
NVML) is imported lazily by the modules that use it.
"""

__version__ = "0.2.0"
