"""CUDA access: the device and its context, compiling and loading kernels, launching them,
cuBLAS, device buffers, captured graphs and the harness's own support kernels. Every module
imports PyCUDA / nvmath / cuda.bindings lazily, so importing this package needs no GPU."""
