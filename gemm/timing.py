"""The one measurement policy: CUDA events, warm-up, batches, a stop rule, clocks.

Modelled on NVBench. `hot` (default, as in the seed's table): each sample is one event pair
around a batch of back-to-back launches sized to about `sample_s` of GPU time, replayed from
a CUDA graph captured once (gemm.graphs; direct launches if capture fails), so host launch
overhead, launch gaps and event resolution vanish; the sample is batch time / batch size. `cold`: each sample
is one launch after a memset that evicts the L2 (2x its size). Functions are sampled in
turn (kernel, cuBLAS, kernel, ...) so slow drifts hit both alike. A function stops once it
has `min_samples` samples and `min_time_s` of GPU time and the samples' robust relative
spread is under `max_noise`, or at `max_time_s` (with at least `min_samples_capped`). The SM
clock is read through NVML after every sample; samples under `throttle_fraction` of the
maximum clock are dropped as throttled (and counted).
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

    def __post_init__(self) -> None:
        if self.mode not in ("hot", "cold"):
            raise ValueError(f"timing mode must be 'hot' or 'cold', got {self.mode!r}")
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


class Timer:
    """Times functions fn() that enqueue one launch each on `stream`."""

    def __init__(self, policy: Policy, stream, clocks=None, max_clock_mhz: int | None = None,
                 l2_bytes: int = 0) -> None:
        from .device import cuda
        self.drv = cuda()
        self.p = policy
        self.stream = stream
        self.clocks = clocks
        self.max_clock = max_clock_mhz
        self.start = self.drv.Event()
        self.end = self.drv.Event()
        self.flush = None
        if policy.mode == "cold":
            self.flush_words = max(2 * l2_bytes, 64 << 20) // 4
            self.flush = self.drv.mem_alloc(self.flush_words * 4)

    def _time(self, fn, n: int, graph=None) -> float:
        """GPU seconds for n back-to-back launches (after an L2 flush in cold mode)."""
        if self.flush is not None:
            self.drv.memset_d32_async(self.flush, 0, self.flush_words, self.stream)
        self.start.record(self.stream)
        if graph is not None:
            graph.replay()
        else:
            for _ in range(n):
                fn()
        self.end.record(self.stream)
        self.end.synchronize()
        return self.end.time_since(self.start) / 1e3

    def measure(self, fns: dict) -> dict[str, Measurement]:
        """Interleaved measurement of several functions under the one policy."""
        res = {name: Measurement() for name in fns}
        for name, fn in fns.items():  # warm-up, then size the batch from the warm launches
            spent, times = 0.0, []
            while spent < self.p.warmup_s or not times:
                t = self._time(fn, 1)
                times.append(t)
                spent += t
                if len(times) >= 1000 or spent > self.p.max_time_s:
                    break
            res[name].batch = batch_size(self.p, stats.median(times[1:] or times))
        graphs = {}
        if self.p.mode == "hot":
            from .graphs import CapturedBatch
            for name, fn in fns.items():
                if res[name].batch > 1:
                    try:
                        graphs[name] = CapturedBatch(fn, res[name].batch, self.stream)
                        res[name].graph = True
                    except Exception:  # no graph support here: time direct launches
                        self.stream.synchronize()
        try:
            self._sample(fns, res, graphs)
        finally:
            for g in graphs.values():
                g.close()
        return res

    def _sample(self, fns: dict, res: dict, graphs: dict) -> None:
        pending = list(fns)
        while pending:
            for name in list(pending):
                m = res[name]
                t = self._time(fns[name], m.batch, graphs.get(name))
                m.gpu_time_s += t
                clock = self.clocks.sm_mhz() if self.clocks else None
                if (clock and self.max_clock
                        and clock < self.p.throttle_fraction * self.max_clock):
                    m.throttled += 1
                else:
                    m.samples_s.append(t / m.batch)
                    m.clocks_mhz.append(clock)
                if m.done(self.p) or (not m.samples_s and m.gpu_time_s >= 2 * self.p.max_time_s):
                    pending.remove(name)

    def close(self) -> None:
        if self.flush is not None:
            self.flush.free()
            self.flush = None
