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
    with pytest.raises(ValueError, match="one of hot, cold, sustained"):
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
    assert {k for k in a | b if a.get(k) != b.get(k)} <= stop | {"allocations"}
    # the A/B takes more per process, over several operand placements
    assert CONFIRM.allocations * CONFIRM.min_samples >= 30 > SUITE.min_samples
    assert CONFIRM.allocations > 1 == SUITE.allocations
    assert named("confirm", "cold") == Policy(**{**b, "mode": "cold"})
    with pytest.raises(ValueError, match="unknown policy 'fast'"):
        named("fast")


def test_a_field_added_at_its_neutral_value_keeps_the_fingerprint():
    """allocations=1 measures as before the field existed: left out of as_dict (so out of
    every benchmark version); any other value is in it."""
    from gemm.core import metrics
    assert "allocations" not in Policy().as_dict()
    assert Policy(allocations=3).as_dict()["allocations"] == 3
    for p in (Policy(), Policy(allocations=3)):                # round trip
        assert Policy.from_dict(p.as_dict()) == p
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Rewritten(Policy):          # a tree whose default was rewritten (a policy study)
        allocations: int = 3
    assert Rewritten.from_dict(Policy().as_dict()).allocations == 1   # left out: neutral
    assert (metrics.version(metrics.TFLOPS, Policy(allocations=1))
            != metrics.version(metrics.TFLOPS, Policy(allocations=2)))
    with pytest.raises(ValueError, match="allocations"):
        Policy(allocations=0)


def test_operand_sets_pool_paired_within_each_set():
    from gemm.measure.worker import pool

    def m(samples, batch=4):
        return Measurement(samples_s=list(samples), clocks_mhz=[1980] * len(samples),
                           batch=batch, gpu_time_s=sum(samples) * batch, graph=True)
    one = {"kernel": m([1.0, 1.1]), "baseline": m([2.0])}
    assert pool([one]) is one                               # one set: as measured
    got = pool([{"kernel": m([1.0, 1.1, 1.2]), "baseline": m([2.0, 2.1])},
                {"kernel": m([1.5]), "baseline": m([2.5, 2.6, 2.7], batch=2)}])
    assert got["kernel"].samples_s == [1.0, 1.1, 1.5]       # cut to the pairs of each set
    assert got["baseline"].samples_s == [2.0, 2.1, 2.5]
    assert len(got["kernel"].clocks_mhz) == 3
    assert got["baseline"].gpu_time_s == pytest.approx((2.0 + 2.1) * 4 + (2.5 + 2.6 + 2.7) * 2)
    assert [s["batch"] for s in got["baseline"].per_set] == [4, 2]
    assert [s["samples"] for s in got["kernel"].per_set] == [2, 1]
    alone = pool([{"baseline": m([1.0, 2.0, 3.0])}, {"baseline": m([4.0])}])
    assert alone["baseline"].samples_s == [1.0, 2.0, 3.0, 4.0]   # nothing to pair with


class _Ops:
    def __init__(self, log):
        self.log, self.a, self.b, self.c, self.out = log, 1, 2, 3, 4
        log.append(("alloc", id(self)))

    def fill(self, support, prob, seed):
        self.log.append(("fill", id(self)))

    def free(self):
        self.log.append(("free", id(self)))


def _job(log, allocations):
    from types import SimpleNamespace as NS
    checker = NS(support=None, operands=lambda prob, seed=None: _Ops(log))
    target = NS(launcher=lambda prob: (lambda a, b, c, s: None))
    return NS(alone=False, spec=None, kernel=target, baseline=target, checker=checker,
              policy=Policy(allocations=allocations))


def test_time_problem_times_every_operand_set_and_frees_the_extra_ones(monkeypatch):
    """CPU check of the orchestration (the GPU test times for real): one timing per operand
    set, the first on the checked operands, each further set new and freed at the end (the
    checked ones are the caller's), even when a timing fails."""
    from gemm.core import faults
    from gemm.measure import worker
    monkeypatch.setattr(faults, "delay_share", lambda spec: None)
    log, timed = [], []

    def time_set(job, fns, ops):
        timed.append(id(ops))
        return {k: Measurement(samples_s=[1.0, 1.0], batch=2) for k in fns}
    monkeypatch.setattr(worker, "_time_set", time_set)
    first = _Ops(log)
    rec = {"status": "ok"}
    worker.time_problem(_job(log, 3), None, first, rec)
    allocs = [i for what, i in log if what == "alloc"]
    assert len(timed) == 3 and timed[0] == id(first) and len(set(timed)) == 3
    assert sorted(i for what, i in log if what == "free") == sorted(allocs[1:])   # not `first`
    assert len(rec["kernel_time"]["per_set"]) == 3 and len(rec["kernel_time"]["samples_s"]) == 6

    log.clear()
    timed.clear()

    def fails_on_the_second(job, fns, ops):
        if timed:
            raise RuntimeError("launch failed")
        timed.append(id(ops))
        return {k: Measurement(samples_s=[1.0], batch=1) for k in fns}
    monkeypatch.setattr(worker, "_time_set", fails_on_the_second)
    first = _Ops(log)
    with pytest.raises(RuntimeError, match="launch failed"):
        worker.time_problem(_job(log, 3), None, first, {"status": "ok"})
    made = [i for what, i in log if what == "alloc"][1:]
    assert [i for what, i in log if what == "free"] == made      # the extra set was freed


def test_sustained_mode_loads_each_function_for_two_seconds_before_timing(monkeypatch):
    """gemm bench --mode sustained: hot L2, graph batches, and before the warm-up each function
    runs back to back for SUSTAINED_S of GPU time, in chunks that double up to ~50 ms (one
    synchronisation each)."""
    from dataclasses import replace
    from gemm.core.policy import MODES, SUSTAINED_S, named
    from gemm.measure import timer as tm
    assert "sustained" in MODES and named("suite", "sustained").mode == "sustained"
    with pytest.raises(ValueError, match="timing mode"):
        named("suite", "warm")
    t = tm.Timer.__new__(tm.Timer)
    t.p, t.flush = named("suite", "sustained"), None
    chunks = []

    def fake_time(fn, n, graph=None):
        chunks.append(n)
        return n * 0.001                     # 1 ms a launch
    t._time = fake_time
    spent = t.load(lambda: None, SUSTAINED_S)
    assert spent >= SUSTAINED_S and chunks[:3] == [1, 2, 4]
    assert max(chunks) == 64 and chunks[-1] == 64   # 64 ms chunks: no longer doubled
    loaded = []
    t.load = lambda fn, s: loaded.append(s)
    t._sample = lambda fns, res, graphs: None
    t.p = replace(t.p, batching="direct")
    t.measure({"kernel": lambda: None, "cublas": lambda: None})
    assert loaded == [SUSTAINED_S, SUSTAINED_S]


def test_sustained_mode_keeps_the_samples_a_loaded_gpu_takes_at_low_clocks():
    """gemm bench --mode sustained measures the clocks a loaded GPU settles at: no sample is
    dropped there, whatever the clocks or NVML's reasons; hot and cold mode keep the suite's
    floor (a thermal or hardware slowdown)."""
    from gemm.cli.common import _policy
    sustained = _policy("sustained")
    assert sustained.floor == "clock" and sustained.throttle_fraction == 0.0
    assert _policy("hot").floor == _policy("cold").floor == "slowdown"


class _Clocks:
    """NVML as the timer reads it: an SM clock, and a slowdown reason from sample `from_n` on."""
    def __init__(self, mhz=1400, from_n=None, every=None):
        self.n, self.mhz, self.from_n, self.every = 0, mhz, from_n, every

    def sm_mhz(self):
        return self.mhz

    def slowdown(self):
        self.n += 1
        if self.every:
            return self.n % self.every == 0
        return self.from_n is not None and self.n >= self.from_n


def _sampled(policy, clocks, launch_s=0.01):
    from gemm.measure import timer as tm
    t = tm.Timer.__new__(tm.Timer)
    t.p, t.flush, t.max_clock = policy, None, 1980
    calls = []

    def fake_time(fn, n, graph=None):
        calls.append(n)
        if len(calls) > 10_000:
            raise AssertionError("sampling did not end")
        return launch_s * n
    t._time, t.clocks = fake_time, clocks
    res = {"kernel": tm.Measurement(batch=1)}
    t._sample({"kernel": lambda: None}, res, {})
    return res["kernel"]


def test_sampling_ends_when_the_gpu_stays_throttled_after_a_first_sample():
    """A GPU can stay throttled after a function's first samples (15 at 8192 under CONFIRM on
    the H200, under the clock floor of the time: one process ran past 250 s). Sampling ends at
    twice the policy's max_time_s of GPU time with the samples it has; the rest count as
    throttled."""
    from gemm.core.policy import CONFIRM
    m = _sampled(CONFIRM, _Clocks(from_n=2))      # a thermal slowdown from the 2nd sample on
    assert len(m.samples_s) == 1 and m.throttled >= 1
    assert 2 * CONFIRM.max_time_s <= m.gpu_time_s < 2 * CONFIRM.max_time_s + 0.011


def test_a_slow_launch_the_floor_never_touched_keeps_the_stop_rules_samples():
    """The bound above applies only where the floor dropped samples: 01 at 8192 (2.2 s a
    launch) kept 1 sample in 7e7a377's record, where the stop rule takes min_samples_capped."""
    from gemm.core.policy import SUITE
    m = _sampled(SUITE, _Clocks(mhz=1900), launch_s=2.2)
    assert m.throttled == 0 and len(m.samples_s) == SUITE.min_samples_capped


def test_the_floor_drops_samples_under_a_thermal_or_hardware_slowdown_not_the_power_cap():
    """The H200 runs its BF16 kernels power-capped at 1470-1600 MHz (under the clock floor of
    1485 MHz used until 2026-12-02, which dropped nearly all their samples and failed 14 at 4096
    and 8192 at 7e7a377), at 61 °C at most. The floor drops a sample only while NVML names a
    thermal or hardware slowdown. The old rule stays a Policy value, left out of the
    fingerprint (NEUTRAL), so the series it measured keep their versions' meaning."""
    from dataclasses import replace
    import pytest
    from gemm.core.policy import CONFIRM, SUITE, Policy
    from gemm.cuda.device import SLOWDOWN_REASONS
    assert SUITE.floor == CONFIRM.floor == "slowdown"
    assert SUITE.as_dict()["floor"] == "slowdown"
    assert "floor" not in replace(SUITE, floor="clock").as_dict()
    assert Policy.from_dict(replace(SUITE, floor="clock").as_dict()).floor == "clock"
    with pytest.raises(ValueError, match="floor"):
        Policy(floor="power")
    assert SLOWDOWN_REASONS & 0x4 == 0                  # SwPowerCap is not a slowdown here
    assert SLOWDOWN_REASONS == 0x8 | 0x20 | 0x40 | 0x80
    for floor in ("slowdown", "clock"):
        m = _sampled(replace(CONFIRM, floor=floor), _Clocks(mhz=1400, every=4))
        if floor == "slowdown":   # the power-capped samples count, the thermal ones do not
            assert m.samples_s and m.throttled == (len(m.samples_s) + m.throttled) // 4 >= 1
            assert m.done(CONFIRM)
        else:                     # the old rule drops every sample under 1485 MHz
            assert not m.samples_s and m.throttled > 0


def test_the_slowdown_floor_reads_nvmls_reasons_and_says_when_it_could_not():
    """Clocks.slowdown: a SwPowerCap-only mask is no slowdown, HwThermal is; a driver without
    the newer EventReasons symbol answers through ThrottleReasons; no NVML answer is None, and
    the timer keeps such a sample and counts it as unchecked (not silently as checked)."""
    from gemm.core.policy import SUITE
    from gemm.cuda.device import Clocks

    class NVML:
        def __init__(self, mask, new_symbol=True):
            self.mask, self.new_symbol = mask, new_symbol

        def nvmlDeviceGetCurrentClocksEventReasons(self, h):
            if not self.new_symbol:
                raise RuntimeError("NVMLError_FunctionNotFound")
            return self.mask

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
            return self.mask

    def clocks(nvml, handle="h"):
        c = Clocks.__new__(Clocks)
        c._nvml, c._h = nvml, handle
        return c
    assert clocks(NVML(0x4)).slowdown() is False              # SwPowerCap alone
    assert clocks(NVML(0x4 | 0x40)).slowdown() is True        # HwThermalSlowdown
    assert clocks(NVML(0x20, new_symbol=False)).slowdown() is True
    assert clocks(NVML(0x1, new_symbol=False)).slowdown() is False
    assert clocks(NVML(0x40), handle=None).slowdown() is None
    assert clocks(None).slowdown() is None

    class Silent(_Clocks):
        def slowdown(self):
            return None
    m = _sampled(SUITE, Silent(mhz=1900))
    assert m.samples_s and m.throttled == 0 and m.unchecked == len(m.samples_s)
    m = _sampled(SUITE, _Clocks(mhz=1900))
    assert m.unchecked == 0
