"""The measurement policy and statistics on synthetic samples (no GPU)."""
import pytest

from gemm.core import stats
from gemm.core.policy import Measurement, Policy, batch_size


def test_robust_statistics():
    xs = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 50.0]  # one wild outlier
    assert stats.median(xs) == 1.0
    assert stats.robust_sigma(xs) == pytest.approx(1.4826 * 0.01)
    assert stats.rel_spread([2.0] * 5) == 0.0
    assert stats.quantile([1, 2, 3, 4], 0.5) == 2.5
    assert stats.min_max_spread([1.0, 1.01, 0.99]) == pytest.approx(0.02)
    with pytest.raises(ValueError):
        stats.median([])


def test_stop_rule_needs_samples_time_and_low_noise():
    p = Policy(min_samples=10, min_time_s=0.3, max_noise=0.005, max_time_s=4.0)
    m = Measurement(samples_s=[0.01] * 9, gpu_time_s=0.5)
    assert not m.done(p)                         # too few samples
    m.samples_s.append(0.01)
    assert m.done(p)
    m = Measurement(samples_s=[0.01] * 20, gpu_time_s=0.1)
    assert not m.done(p)                         # too little GPU time
    noisy = [0.01 * (1 + 0.05 * ((-1) ** i)) for i in range(20)]
    m = Measurement(samples_s=noisy, gpu_time_s=1.0)
    assert not m.done(p)                         # 5 % noise: keep sampling
    m.gpu_time_s = 4.0
    assert m.done(p)                             # until the time cap
    slow = Measurement(samples_s=[2.0, 2.0], gpu_time_s=4.5)
    assert not slow.done(p)                      # the cap still wants 3 samples
    slow.samples_s.append(2.0)
    assert slow.done(p)


def test_batch_sizes():
    hot = Policy(sample_s=0.01, max_batch=2000)
    assert batch_size(hot, 1e-3) == 10
    assert batch_size(hot, 1e-7) == 2000
    assert batch_size(hot, 2.0) == 1
    assert batch_size(Policy(mode="cold"), 1e-5) == 1


def test_policy_validation():
    with pytest.raises(ValueError, match="hot' or 'cold"):
        Policy(mode="warm")
    with pytest.raises(ValueError):
        Policy(min_samples=0)
    with pytest.raises(ValueError, match="graph' or 'direct"):
        Policy(batching="captured")


def test_measurement_figures():
    m = Measurement(samples_s=[0.002, 0.002, 0.002])
    assert m.tflops(2 * 1000**3) == pytest.approx(1.0)


def test_suite_and_confirm_differ_only_in_the_stop_rule():
    from gemm.core.policy import CONFIRM, SUITE, named
    stop = {"min_samples", "min_time_s", "max_noise", "max_time_s", "min_samples_capped",
            "max_samples"}
    a, b = SUITE.as_dict(), CONFIRM.as_dict()
    assert {k for k in a if a[k] != b[k]} <= stop
    assert CONFIRM.min_samples >= 30 > SUITE.min_samples   # the A/B takes more per process
    assert named("confirm", "cold") == Policy(**{**b, "mode": "cold"})
    with pytest.raises(ValueError, match="unknown policy 'fast'"):
        named("fast")
