"""What a round of the A/B costs: learned from the arms' processes, else guessed."""
from __future__ import annotations

from ..core.policy import CONFIRM, Policy
from ..core.problem import Problem

PROCESSES = 2      # per arm and round: R N N R
START_S = 6.0      # a process's start-up before one was timed here
SET_S = 0.02       # per operand set: allocation, fill, graph capture
CHECK_S = 0.05     # a target's correctness check before its timing
UNKNOWN_S = 5.0    # a target of unknown speed
MARGIN = 1.25      # guesses are taken this much high
COMPILE_S = 4.0    # per kernel, an arm's first process building it (nvcc, nothing cached)


def guess_target_s(launch_s: float, baseline_s: float | None, p: Policy = CONFIRM) -> float:
    """Seconds one process spends on a target under `p` (warm-up, samples, check)."""
    per_set = 0.0
    for t in (launch_s, baseline_s):
        if t is None:
            continue
        s = max(p.sample_s, t)
        sampling = min(max(p.min_samples * s, p.min_time_s),
                       max(p.max_time_s, p.min_samples_capped * s))
        per_set += p.warmup_s + t + sampling
    return p.allocations * (per_set + SET_S) + CHECK_S + 2 * launch_s


def speeds(rows) -> dict:
    """{(kernel, size): (kernel launch s, cuBLAS launch s or None)} from the gate's rows."""
    tflops = {(r.kernel, r.size): r.new for r in rows if r.metric == "tflops" and r.new}
    pct = {(r.kernel, r.size): r.new for r in rows if r.metric == "pct_of_cublas" and r.new}
    out = {}
    for (kernel, size), v in tflops.items():
        try:
            launch = Problem.parse(size).flops / (v * 1e12)
        except (ValueError, TypeError):
            continue
        p = pct.get((kernel, size))
        out[(kernel, size)] = (launch, launch * p / 100.0 if p else None)
    return out


class Costs:
    """Seconds per process: each arm's start-up and each target's, learned as measured."""

    def __init__(self, speeds_: dict | None = None, warm=()):
        self.speeds = speeds_ or {}   # (kernel, size) -> speeds()'s launch seconds
        self.target: dict = {}    # (arm, (kernel, size)) -> s
        self.start: dict = {}     # arm -> s
        self.warm = set(warm)     # arms whose kernels are built already (the recorded code)

    def learn(self, arm: str, walls: dict) -> None:
        """`walls` from gemm.track.abtest.measure: {(kernel, size): s, None: start-up s}."""
        for t, s in walls.items():
            if t is None:
                self.start[arm] = s
            else:
                self.target[(arm, t)] = s

    def target_s(self, arm: str, t: tuple) -> float:
        if (arm, t) in self.target:
            return self.target[(arm, t)]
        seen = [s for (a, u), s in self.target.items() if u == t]
        if seen:                       # another arm's code on the same target
            return max(seen)
        if t in self.speeds:
            return MARGIN * guess_target_s(*self.speeds[t])
        return MARGIN * UNKNOWN_S

    def compile_s(self, arm: str, targets) -> float:
        """COMPILE_S per kernel for an arm's first process, unless warm or timed already."""
        if arm in self.warm or arm in self.start:
            return 0.0
        return COMPILE_S * len({kernel for kernel, _ in targets})

    def round_s(self, arms: dict) -> float:
        """A round's seconds: {arm: targets} (an arm not timed yet starts as the slowest)."""
        slowest = max(self.start.values(), default=START_S)
        return sum(PROCESSES * (self.start.get(a, slowest) + sum(self.target_s(a, t) for t in ts))
                   + self.compile_s(a, ts) for a, ts in arms.items() if ts)
