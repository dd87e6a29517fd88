"""The measurement policy, as data: warm-up, batches, the stop rule, which samples are dropped.

Modelled on NVBench; gemm.measure.timer applies it with CUDA events. `hot` (default): a sample
is one event pair around a batch of back-to-back launches of about `sample_s`, replayed from a
CUDA graph (`batching`), so launch overhead and event resolution vanish. `cold`: one launch
after a memset that evicts the L2. Functions are sampled in turn (kernel, cuBLAS, ...) so
drifts hit both alike. A function stops at `min_samples` samples and `min_time_s` with a
robust spread under `max_noise`, or at `max_time_s` (at least `min_samples_capped`). With
`allocations` > 1 a problem is timed on that many operand sets, each freshly allocated while
the others are held, each under the whole stop rule, samples pooled (kernel and baseline paired
within a set): where a placement slows a kernel, the pooled median is slow only when most sets
are. A sample taken while NVML names a thermal or hardware slowdown is dropped (`floor`); the
power cap is a power-bound kernel's steady state, not a slowdown. Every field
is part of the benchmark version (gemm.core.metrics), except one added later while it holds
its NEUTRAL value. SUITE: the per-commit record; CONFIRM: the gate's A/B and calibration.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from . import stats


# hot: L2 warm, the suite's burst regime; cold: L2 flushed before each timed batch;
# sustained: hot, after SUSTAINED_S of back-to-back launches of each function (the clocks a
# GPU under load settles at: docs/measurement.md)
MODES = ("hot", "cold", "sustained")
FLOORS = ("clock", "slowdown")
SUSTAINED_S = 2.0


@dataclass(frozen=True)
class Policy:
    mode: str = "hot"
    warmup_s: float = 0.025
    sample_s: float = 0.01
    max_batch: int = 2000
    min_samples: int = 10
    min_time_s: float = 0.1
    max_noise: float = 0.005
    max_time_s: float = 1.0
    min_samples_capped: int = 3
    max_samples: int = 40
    throttle_fraction: float = 0.75
    batching: str = "graph"        # hot batches replayed from a CUDA graph, or "direct" launches
    timing_seed: int = 20261130    # timed operands are fixed: data values move power and clocks
    allocations: int = 1           # operand sets timed in turn, each under the stop rule above
    floor: str = "slowdown"        # which samples are dropped as throttled: "slowdown",
                                   # taken while NVML names a thermal or hardware slowdown
                                   # (not the power cap); "clock", taken under
                                   # throttle_fraction of the maximum SM clock

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"timing mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.batching not in ("graph", "direct"):
            raise ValueError(f"batching must be 'graph' or 'direct', got {self.batching!r}")
        if self.min_samples < 1 or self.min_samples_capped < 1 or self.max_samples < self.min_samples:
            raise ValueError("sample counts must be positive and max_samples >= min_samples")
        if self.allocations < 1:
            raise ValueError(f"allocations must be at least 1, got {self.allocations}")
        if self.floor not in FLOORS:
            raise ValueError(f"floor must be one of {', '.join(FLOORS)}, got {self.floor!r}")

    def floor_words(self) -> str:
        """What the floor drops, in words."""
        if self.floor == "slowdown":
            return "taken under a thermal or hardware slowdown (NVML)"
        return f"taken under {self.throttle_fraction:.0%} of the maximum SM clock"

    def as_dict(self) -> dict:
        """The fields, less those added later that hold the value which measures as before
        (NEUTRAL): adding a field must not restart every series, changing it must."""
        return {k: v for k, v in asdict(self).items() if NEUTRAL.get(k, object()) != v}

    @classmethod
    def from_dict(cls, d: dict) -> "Policy":
        """The inverse of as_dict: a field it left out holds its NEUTRAL value (whatever the
        class's default)."""
        return cls(**{**NEUTRAL, **d})


# fields added after series were recorded, and the value that measures as those series did
NEUTRAL = {"allocations": 1, "floor": "clock"}


@dataclass
class Measurement:
    samples_s: list = field(default_factory=list)   # seconds per launch, one per sample
    clocks_mhz: list = field(default_factory=list)  # SM clock after each kept sample
    batch: int = 1
    throttled: int = 0
    unchecked: int = 0                               # kept samples the floor could not check
    gpu_time_s: float = 0.0
    graph: bool = False                              # batch replayed from a CUDA graph
    per_set: list = field(default_factory=list)      # per operand set, when several (pooled)

    @property
    def median_s(self) -> float:
        return stats.median(self.samples_s)

    @property
    def spread(self) -> float:
        return stats.rel_spread(self.samples_s)

    def tflops(self, flops: int) -> float:
        return flops / self.median_s / 1e12

    def as_dict(self) -> dict:
        return asdict(self)

    def done(self, p: Policy) -> bool:
        n = len(self.samples_s)
        if n >= p.max_samples:
            return True
        if self.gpu_time_s >= p.max_time_s and n >= p.min_samples_capped:
            return True
        return (n >= p.min_samples and self.gpu_time_s >= p.min_time_s
                and self.spread <= p.max_noise)


def batch_size(p: Policy, launch_s: float) -> int:
    if p.mode == "cold" or launch_s <= 0:
        return 1
    return max(1, min(p.max_batch, math.ceil(p.sample_s / launch_s)))


# The per-commit record (the history, the gate's screen): short, to fit the per-commit job.
# A process's value moves mostly by its own offset (0.1-0.2 %), which more samples do not
# shrink. Changing it changes the benchmark versions: series restart.
SUITE = Policy()
# The gate's A/B and `gemm calibrate`: the same measurement, more per process (at long
# launches 10 samples leave the median's sampling error as the main noise), spread over 5
# operand placements (a placement can slow a kernel; a process is then slow only when 3 of
# its 5 are). The calibration is made under this policy.
CONFIRM = replace(SUITE, allocations=5, min_samples=6, min_time_s=0.05, max_samples=20,
                  max_time_s=0.6)
POLICIES = {"suite": SUITE, "confirm": CONFIRM}


def named(name: str, mode: str = "hot") -> Policy:
    """A policy by name ('suite', 'confirm') in timing mode `mode`; ValueError otherwise."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICIES)})")
    return replace(POLICIES[name], mode=mode)
