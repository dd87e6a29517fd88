"""The robust rule (GateConfig.robust, on by default; for series with a heavy tail).

Some series have processes in a slow state: 07 at 2048 runs about 1 process in 8 some 0.7 %
slow on all its operand placements (docs/gate-history.md). The mean of log values takes such
a process in at full weight, and the calibrated sd that covers it needs ~8 rounds for a 1 %
drop. A Huber M-estimate of each arm's location weighs such a process down instead; its
interval's noise is the sandwich variance of the Huber-weighted values, from the A/A values
themselves (so the tail it down-weights still widens it as much as it must), pooled with the
run's own; small arms, barely down-weighted, widened by factors resampled from the same A/A
values. gemm.track.decision re-exports these names.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .decision import Effect, _check, _logs, _verdict, effect_rounds

HUBER_K = 1.5      # in robust sds: the usual choice (~96 % efficient on normal data)
TAIL_RATIO = 1.25  # a series decides by Huber locations where its calibrated sd exceeds the
                   # sd of a Huber-weighted value by this (gemm.track.calibration.robust_prior)


@dataclass(frozen=True)
class RobustNoise:
    """A calibrated prior for effect_robust: `scale` (the robust sd of a process's log value,
    which sets Huber's cut-off), `sigma` (the sd of one process's Huber-weighted log value,
    the large-sample sandwich estimate), `dof` degrees of freedom, and `small`: for an arm of
    n = 1, 2, ... values, the variance of its Huber location times n, from resampling the A/A
    values, relative to sigma^2 (few values are barely down-weighted: at n = 2 the Huber
    location is the mean, so its spread is the plain sd's, not the sandwich's)."""
    scale: float
    sigma: float
    dof: int
    small: tuple = ()

    def __post_init__(self) -> None:
        if not (self.scale > 0 and self.sigma > 0 and math.isfinite(self.scale)
                and math.isfinite(self.sigma)) or self.dof < 1:
            raise ValueError(f"robust noise needs scale, sigma > 0 and dof >= 1, got "
                             f"{self.scale}, {self.sigma}, {self.dof}")
        if not all(math.isfinite(c) and c > 0 for c in self.small):
            raise ValueError(f"robust noise's small-sample factors must be positive: {self.small}")

    def factor(self, n: int) -> float:
        """The variance of an n-value arm's Huber location, times n, over sigma^2 (at least 1:
        never narrower than the sandwich); past the resampled n, the last one's."""
        if not self.small:
            return 1.0
        return max(1.0, self.small[min(n, len(self.small)) - 1])


def huber_location(xs: list[float], scale: float, k: float = HUBER_K) -> float:
    """Huber's M-estimate of the location of `xs` at a fixed `scale` (iteratively reweighted
    from the median): values within k scales count fully, those beyond by k scale / |x - mu|."""
    if not xs:
        raise ValueError("a location needs at least one value")
    s = sorted(xs)
    n = len(s)
    mu = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    if scale <= 0:
        return mu
    for _ in range(100):
        w = [1.0 if abs(x - mu) <= k * scale else k * scale / abs(x - mu) for x in xs]
        nxt = sum(wi * x for wi, x in zip(w, xs)) / sum(w)
        if abs(nxt - mu) <= 1e-12 * max(1.0, abs(mu)):
            return nxt
        mu = nxt
    return mu


def _sandwich(groups: list[list[float]], scale: float, k: float) -> tuple[float, int] | None:
    """(variance of one value's Huber-weighted contribution, dof) from groups of values, each
    around its own Huber location: scale^2 sum(psi(u)^2) / dof / mean(psi'(u))^2, u the
    residuals in scales, dof the values less one per group. None without a dof or an inlier."""
    us = []
    for xs in groups:
        if xs:
            mu = huber_location(xs, scale, k)
            us += [(x - mu) / scale for x in xs]
    dof = len(us) - sum(1 for xs in groups if xs)
    inside = sum(1.0 for u in us if abs(u) <= k) / len(us) if us else 0.0
    if dof < 1 or inside <= 0:
        return None
    return scale ** 2 * sum(min(abs(u), k) ** 2 for u in us) / dof / inside ** 2, dof


def robust_noise(parts: list[list[float]], k: float = HUBER_K, dof_share: float = 0.37,
                 max_n: int = 16, draws: int = 2000, seed: int = 1) -> RobustNoise | None:
    """The prior for effect_robust from A/A process values (one list per GPU, positive
    numbers): per GPU the robust sd of its log values (1.4826 MAD) and the sandwich variance
    around its own Huber location, each pooled over GPUs weighted by n - 1 (one GPU's offset
    from another is not noise). Its dof: `dof_share` of the pooled n - 1 (a robust spread is
    worth fewer degrees of freedom than a variance: 0.37 is the MAD's efficiency at the
    normal, a conservative stand-in). And per arm size n = 1..`max_n`, the variance of the
    Huber location (at the pooled scale) of n values drawn with replacement from one GPU's
    values, pooled the same way (`draws` per GPU and n; fixed `seed`, so a file gives the same
    prior every time). None where no GPU has 3 values."""
    import random
    from ..core.stats import robust_sigma
    w = ss_scale = ss_var = 0.0
    gpus = []
    for values in parts:
        xs = _logs(values)
        if len(xs) < 3:
            continue
        sc = robust_sigma(xs)
        if not sc > 0:
            continue
        got = _sandwich([xs], sc, k)
        if got is None:
            continue
        n1 = len(xs) - 1
        w += n1
        ss_scale += n1 * sc * sc
        ss_var += n1 * got[0]
        gpus.append((n1, xs))
    if not w:
        return None
    scale, var = math.sqrt(ss_scale / w), ss_var / w
    rng = random.Random(seed)
    small = []
    for n in range(1, max_n + 1):
        pooled = 0.0
        for n1, xs in gpus:
            locs = [huber_location([rng.choice(xs) for _ in range(n)], scale, k)
                    for _ in range(draws)]
            m = sum(locs) / draws
            pooled += n1 * n * sum((x - m) ** 2 for x in locs) / (draws - 1)
        small.append(pooled / w / var)
    # resampled factors wobble from one n to the next: take the largest at n or beyond (an
    # arm of n values is never credited with less spread than a larger one showed)
    small = [max(small[i:]) for i in range(len(small))]
    return RobustNoise(scale, math.sqrt(var), max(1, round(dof_share * w)), tuple(small))


def effect_robust(ref_rounds, new_rounds, delta: float, alpha: float = 1e-3, family: int = 1,
                  prior: RobustNoise | None = None, k: float = HUBER_K) -> Effect:
    """The effect as the difference of the arms' Huber locations of their process log values
    (all rounds together: in A B B A every round gives each arm the same mid-round time, so a
    drift cancels in the arms' locations as in their means), at the calibrated `scale`. Its
    interval: Student's t at the gate's level; the per-value variance the prior's sandwich
    estimate pooled by dof with the run's own (each arm around its own location), each arm's
    share of it scaled by the prior's small-sample factor for its number of values (so one
    round, where the Huber location is the mean, is as wide as the plain spread makes it).
    Without a prior this is effect_rounds (the mean rule): no scale is known to cut at."""
    if prior is None:
        return effect_rounds(ref_rounds, new_rounds, delta, alpha, family, None)
    _check(delta, alpha, family)
    from scipy import stats as st
    lr = [x for r in ref_rounds for x in _logs(r)]
    ln = [x for r in new_rounds for x in _logs(r)]
    if not lr or not ln:
        raise ValueError("each arm needs at least one process value")
    d = huber_location(ln, prior.scale, k) - huber_location(lr, prior.scale, k)
    var, dof = prior.sigma ** 2, prior.dof
    run = _sandwich([lr, ln], prior.scale, k)
    if run is not None:
        var = (dof * var + run[1] * run[0]) / (dof + run[1])
        dof += run[1]
    sd = math.sqrt(var)
    se = sd * math.sqrt(prior.factor(len(lr)) / len(lr) + prior.factor(len(ln)) / len(ln))
    t = float(st.t.ppf(1 - alpha / family / 2, dof))
    lo, hi = d - t * se, d + t * se
    rounds = sum(1 for a, b in zip(ref_rounds, new_rounds) if a and b)
    return Effect(d, lo, hi, sd, dof, len(lr), len(ln), _verdict(lo, hi, delta / 2, rounds))
