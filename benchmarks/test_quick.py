"""Quick local A/B timings with pytest-benchmark (not the per-commit suite, which is asv).

    pytest benchmarks/ --benchmark-autosave                    # before your change
    pytest benchmarks/ --benchmark-compare --benchmark-compare-fail=median:5%   # after

Each round is a fixed batch of launches (set by the size alone, so A and B rounds do the same
work); the timer synchronizes the GPU (benchmarks/conftest.py). TFLOPS are attached to every result as extra_info.
"""
import pytest

from gemm import registry
from gemm.problem import Problem

SIZES = [1024, 4096]


def launches_per_round(prob: Problem) -> int:
    """About 1e11 FLOP per round (46 launches at 1024, 1 at 4096 and above)."""
    return max(1, int(1e11 // prob.flops))
TARGETS = registry.names() + ["cublas_fp32"]


@pytest.fixture(scope="module")
def operands(gpu):
    from gemm.gpucheck import GpuChecker
    chk = GpuChecker()
    cache = {}

    def get(n):
        if n not in cache:
            cache[n] = [chk.random_matrix(n, n, 7 + i) for i in range(3)]
        return cache[n]

    yield get
    for bufs in cache.values():
        for b in bufs:
            b.free()
    chk.close()


@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("target", TARGETS)
def test_gemm(benchmark, operands, target, size):
    from gemm.device import cuda
    prob = Problem.square(size)
    a, b, c = operands(size)
    blas = None
    if target.startswith("cublas"):
        from gemm.baseline import Cublas
        blas = Cublas(target)
        launch = blas.launcher(prob)
    else:
        from gemm.launch import launcher
        launch = launcher(registry.get(target), prob)
    # launches per round depend on the size only, never on a measurement, so the rounds of an
    # A run and a B run do the same work and their times compare directly
    n = launches_per_round(prob)

    def batch():
        for _ in range(n):
            launch(a, b, c)

    cuda()
    benchmark.pedantic(batch, rounds=5, iterations=1, warmup_rounds=1)
    if blas:
        blas.close()
    per_call = benchmark.stats.stats.median / n
    benchmark.extra_info.update(size=size, launches_per_round=n,
                                tflops=round(prob.flops / per_call / 1e12, 3))
