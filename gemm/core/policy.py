"""The one measurement policy, as data: warm-up, batches, the stop rule, the clock floor.

Modelled on NVBench; gemm.measure.timer applies it with CUDA events. `hot` (default, as in
the seed's table): each sample is one event pair around a batch of back-to-back launches sized
to about `sample_s` of GPU time, replayed from a CUDA graph captured once (`batching`), so host
launch overhead, launch gaps and event resolution vanish; the sample is batch time / batch
size. `cold`: each sample is one launch after a memset that evicts the L2 (2x its size).
Functions are sampled in turn (kernel, cuBLAS, kernel, ...) so slow drifts hit both alike. A
function stops once it has `min_samples` samples and `min_time_s` of GPU time and the samples'
robust relative spread is under `max_noise`, or at `max_time_s` (with at least
`min_samples_capped`). The SM clock is read through NVML after every sample; samples under
`throttle_fraction` of the maximum clock are dropped as throttled (and counted). Timed operands
come from `timing_seed`. Every field is part of the benchmark version (gemm.core.metrics).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from . import stats


@dataclass(frozen=True)
class Policy:
    mode: str = "hot"
    warmup_s: float = 0.05
    sample_s: float = 0.01
    max_batch: int = 2000
    min_samples: int = 10
    min_time_s: float = 0.3
    max_noise: float = 0.005
    max_time_s: float = 3.0
    min_samples_capped: int = 3
    max_samples: int = 100
    throttle_fraction: float = 0.75
    batching: str = "graph"        # hot batches replayed from a CUDA graph, or "direct" launches
    timing_seed: int = 20261130    # timed operands are fixed: data values move power and clocks

    def __post_init__(self) -> None:
        if self.mode not in ("hot", "cold"):
            raise ValueError(f"timing mode must be 'hot' or 'cold', got {self.mode!r}")
        if self.batching not in ("graph", "direct"):
            raise ValueError(f"batching must be 'graph' or 'direct', got {self.batching!r}")
        if self.min_samples < 1 or self.min_samples_capped < 1 or self.max_samples < self.min_samples:
            raise ValueError("sample counts must be positive and max_samples >= min_samples")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Measurement:
    samples_s: list = field(default_factory=list)   # seconds per launch, one per sample
    clocks_mhz: list = field(default_factory=list)  # SM clock after each kept sample
    batch: int = 1
    throttled: int = 0
    gpu_time_s: float = 0.0
    graph: bool = False                              # batch replayed from a CUDA graph

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


# the policy of the per-commit suite and of every re-measurement the gate makes
SUITE = Policy()
