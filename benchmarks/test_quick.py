"""Quick local A/B timings with pytest-benchmark (not the per-commit suite, which is asv).

    pytest benchmarks/ --benchmark-autosave                    # before your change
    pytest benchmarks/ --benchmark-compare --benchmark-compare-fail=median:5%   # after

Each round is a batch of launches sized to about 5 ms of GPU time; the timer synchronizes the
GPU (benchmarks/conftest.py). TFLOPS are attached to every result as extra_info.
"""
import pytest

from gemm import registry
from gemm.problem import Problem

SIZES = [1024, 4096]
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
    drv = cuda()
    start, end = drv.Event(), drv.Event()
    launch(a, b, c)
    start.record()
    launch(a, b, c)
    end.record()
    end.synchronize()
    per_launch = end.time_since(start) / 1e3
    n = max(1, min(200, int(0.005 / max(per_launch, 1e-7))))

    def batch():
        for _ in range(n):
            launch(a, b, c)

    benchmark.pedantic(batch, rounds=10 if per_launch < 0.05 else 3, iterations=1,
                       warmup_rounds=1)
    if blas:
        blas.close()
    per_call = benchmark.stats.stats.median / n
    benchmark.extra_info.update(size=size, launches_per_round=n,
                                tflops=round(prob.flops / per_call / 1e12, 3))
