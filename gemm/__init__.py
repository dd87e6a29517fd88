"""gemm: hand-written CUDA SGEMM kernels, timed against cuBLAS and tracked per commit.

Importing the package needs no GPU: everything that touches CUDA (PyCUDA, nvmath-python,
NVML) is imported lazily by the modules that use it.
"""

__version__ = "0.1.0"
