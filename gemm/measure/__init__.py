"""Measuring and checking: the correctness path on the GPU, the timer, one kernel's job in its
own process (worker), sweeps over kernels x problems, and the stable measuring entry point
(`gemm measure`) that other commits' trees are measured through."""
