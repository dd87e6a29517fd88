"""The timer: applies gemm.core.policy's Policy with CUDA events on one stream."""
from __future__ import annotations

from ..core import stats
from ..core.policy import SUSTAINED_S, Measurement, Policy, batch_size


class Timer:
    """Times functions fn() that enqueue one launch each on `stream`."""

    def __init__(self, policy: Policy, stream, clocks=None, max_clock_mhz: int | None = None,
                 l2_bytes: int = 0) -> None:
        from ..cuda.device import cuda
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

    def load(self, fn, seconds: float) -> float:
        """Back-to-back launches of fn for at least `seconds` of GPU time, in chunks that grow
        to ~50 ms (one synchronisation each); returns the GPU seconds spent."""
        spent, n = 0.0, 1
        while spent < seconds:
            t = self._time(fn, n)
            spent += t
            if t < 0.05:
                n *= 2
        return spent

    def measure(self, fns: dict) -> dict[str, Measurement]:
        """Interleaved measurement of several functions under the one policy."""
        res = {name: Measurement() for name in fns}
        if self.p.mode == "sustained":
            for fn in fns.values():
                self.load(fn, SUSTAINED_S)
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
        if self.p.mode != "cold" and self.p.batching == "graph":
            from ..cuda.graphs import CapturedBatch
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
                if self._under_floor(clock, m):
                    m.throttled += 1
                else:
                    m.samples_s.append(t / m.batch)
                    m.clocks_mhz.append(clock)
                # bounded where the floor drops samples (a GPU that stays throttled); a
                # slow launch the floor never touched stops by done() alone
                if m.done(self.p) or (m.throttled and m.gpu_time_s >= 2 * self.p.max_time_s):
                    pending.remove(name)

    def _under_floor(self, clock: int | None, m: Measurement) -> bool:
        """Is the sample just taken dropped as throttled (the policy's `floor`)? A sample NVML
        gives no answer for is kept and counted in m.unchecked."""
        if self.p.floor == "slowdown":
            slow = self.clocks.slowdown() if self.clocks else None
        else:
            slow = (clock < self.p.throttle_fraction * self.max_clock
                    if clock and self.max_clock else None)
        if slow is None:
            m.unchecked += 1
        return bool(slow)

    def close(self) -> None:
        if self.flush is not None:
            self.flush.free()
            self.flush = None
