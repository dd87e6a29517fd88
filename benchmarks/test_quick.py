"""Quick local A/B timings with pytest-benchmark (not the per-commit suite, which is asv).

    pytest benchmarks/ --benchmark-autosave                    # before your change
    pytest benchmarks/ --benchmark-compare --benchmark-compare-fail=median:5%   # after

Each round is a fixed batch of launches (set by the size alone, so A and B rounds do the same
work); the timer synchronizes the GPU (benchmarks/conftest.py). TFLOPS are attached to every
result as extra_info.
"""
import pytest

from gemm.core import registry, shapes
from gemm.core.problem import Problem

TARGETS = registry.names() + registry.baselines()


def launches_per_round(prob: Problem) -> int:
    """About 1e11 FLOP per round (46 launches at 1024, 1 at 4096 and above)."""
    return max(1, int(1e11 // prob.flops))


@pytest.fixture(scope="module")
def operands(gpu):
    from gemm.measure.check import Checker
    chk = Checker()
    cache = {}

    def get(prob):
        if prob not in cache:
            cache[prob] = chk.operands(prob, seed=7)
        return cache[prob]

    yield get
    for ops in cache.values():
        ops.free()
    chk.close()


@pytest.mark.parametrize("prob", shapes.problems(shapes.QUICK), ids=lambda p: p.label)
@pytest.mark.parametrize("target", TARGETS)
def test_gemm(benchmark, operands, target, prob):
    from gemm.cuda.device import cuda
    from gemm.cuda.targets import open_target
    ops = operands(prob)
    t = open_target(target)
    launch = t.launcher(prob)
    # launches per round depend on the size only, never on a measurement, so the rounds of an
    # A run and a B run do the same work and their times compare directly
    n = launches_per_round(prob)

    def batch():
        for _ in range(n):
            launch(ops.a, ops.b, ops.out)

    cuda()
    benchmark.pedantic(batch, rounds=5, iterations=1, warmup_rounds=1)
    t.close()
    per_call = benchmark.stats.stats.median / n
    benchmark.extra_info.update(size=prob.label, launches_per_round=n,
                                tflops=round(prob.flops / per_call / 1e12, 3))
