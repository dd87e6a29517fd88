"""The A/B's decision rule: is the new code slower than the reference code, here and now?

Input: per-process values of one series (a process measures one arm once and reports the
median of its samples), for the reference arm and the new arm, from A B B A rounds. The
effect is the difference of the arms' mean log values, d = mean(log new) - mean(log ref)
(higher-is-better metrics: d < 0 is a slowdown; exp(d) - 1 is the relative change).

Its noise: the process-to-process standard deviation of a log value. Two sources are pooled,
weighted by their degrees of freedom: this runner's calibration (A/A processes, gemm
calibrate: a prior with many degrees of freedom) and the rounds' own within-arm spread. A
prior borrowed from other series (calibration.Calibration.prior) is a guess about this one,
so it enters with the run's own degrees of freedom, not its source's. And a prior is used
only while the rounds' own spread agrees with it (a chi-square test at PRIOR_FIT): a run
whose rounds disagree beyond the calibrated noise (a GPU that stepped between rounds) is
judged on its own spread alone. The interval is Student's t with the pooled degrees of
freedom, at the level that holds the family-wise error rate `alpha` over all `family`
decisions of one A/B (Bonferroni, family_size): each interval is two-sided at
1 - alpha / family. No DROP rests on fewer than DROP_MIN_ROUNDS rounds.

Verdicts, with the minimum effect `delta` (the smallest drop the gate must catch) and the
decision margin m = delta / 2 (the middle of the indifference zone between "no change" and
"a drop of delta"; a drop of delta then lands on the DROP side as the interval narrows, and
no change lands on the SAME side, each wrong with probability under alpha):

    DROP        the whole interval lies below -m
    SAME        the whole interval lies inside (-m, +m)
    FASTER      the whole interval lies above +m
    NOT_SLOWER  the interval lies above -m but reaches past +m (not a drop; maybe faster)
    AMBIGUOUS   the interval straddles -m: measure more rounds; at the cap, UNRESOLVED

The A/A control: the reference arm is measured twice per round (first and last of A B B A);
the effect of its last processes against its first ones gets an interval at the same level.
If that interval lies wholly beyond a quarter of delta either way (the same code measured
itself as moved: the GPU changed within the run), the A/B is repeated, not trusted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

DROP, SAME, FASTER, NOT_SLOWER, AMBIGUOUS = "DROP", "SAME", "FASTER", "NOT_SLOWER", "AMBIGUOUS"
PASSING = (SAME, FASTER, NOT_SLOWER)
DROP_MIN_ROUNDS = 2   # a DROP needs two rounds: one round's processes can share a GPU's step
PRIOR_FIT = 0.001     # the rounds' spread must not reject the prior at this level
POWER = 0.9           # detectable: the chance a drop of the minimum effect is called a DROP
NOMINAL_COMPARISONS = 10   # detectable: the comparisons of a typical A/B (its family)


@dataclass(frozen=True)
class Noise:
    """A prior on the process-to-process sd of log values: sigma with `dof` degrees of freedom;
    `borrowed`: from other series (it then enters with the run's own degrees of freedom)."""
    sigma: float
    dof: int
    borrowed: bool = False

    def __post_init__(self) -> None:
        if not (self.sigma >= 0 and math.isfinite(self.sigma)) or self.dof < 1:
            raise ValueError(f"noise needs sigma >= 0 and dof >= 1, got {self.sigma}, {self.dof}")


@dataclass(frozen=True)
class Effect:
    estimate: float     # d = mean(log new) - mean(log ref) (the robust rule: Huber locations)
    lo: float
    hi: float
    sigma: float        # pooled sd of one process's log value
    dof: int
    n_ref: int
    n_new: int
    verdict: str

    @property
    def change(self) -> float:
        """The relative change exp(d) - 1 (negative: slower)."""
        return math.expm1(self.estimate)

    def describe(self) -> str:
        def pct(x: float) -> str:   # an interval from 1-2 dof can be astronomically wide
            return f"{100 * math.expm1(x):+.2f} %" if abs(x) < math.log(10) else (
                "> +900 %" if x > 0 else "< -90 %")
        return (f"{pct(self.estimate)} [{pct(self.lo)}, {pct(self.hi)}] "
                f"({self.n_ref} vs {self.n_new} processes, sd {100 * self.sigma:.2f} %, "
                f"{self.dof} dof)")


def _logs(xs) -> list[float]:
    out = []
    for x in xs:
        if x is None or not math.isfinite(x) or x <= 0:
            raise ValueError(f"a process value must be a positive number, got {x!r}")
        out.append(math.log(x))
    return out


def _ss(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs)


def classify(lo: float, hi: float, margin: float) -> str:
    if hi < -margin:
        return DROP
    if lo > margin:
        return FASTER
    if lo > -margin:
        return SAME if hi < margin else NOT_SLOWER
    return AMBIGUOUS


def _check(delta: float, alpha: float, family: int) -> None:
    if not 0 < delta < 1 or not 0 < alpha < 1 or family < 1:
        raise ValueError("need 0 < delta < 1, 0 < alpha < 1, family >= 1")


def family_size(comparisons: int, min_rounds: int, max_rounds: int) -> int:
    """The Bonferroni family of one A/B: every comparison, every look, twice (one restart)."""
    return comparisons * (max_rounds - min_rounds + 1) * 2


def _interval(d: float, ss: float, dof: int, prior: Noise | None, scale: float, se_per_sd: float,
              alpha: float, family: int, fit: bool = True):
    """The one interval every rule here makes: the observed sum of squares `ss` (`dof`) pooled
    with the calibration's, whose variance for this statistic is `scale` * sigma^2 (`prior.dof`,
    or `dof` where borrowed), unless the observed spread rejects it (prior_fits; `fit` False:
    pooled regardless, for the A/A guard, which judges a misfit itself); Student's t
    at 1 - alpha / family two-sided; the standard error is sd * `se_per_sd`.
    (lo, hi, sd, dof), or None when no degree of freedom is left."""
    from scipy import stats as st
    if prior is not None and (not fit or prior_fits(ss, dof, scale * prior.sigma ** 2)):
        pdof = dof if prior.borrowed else prior.dof
        ss += pdof * scale * prior.sigma ** 2
        dof += pdof
    if dof < 1:
        return None
    sd = math.sqrt(ss / dof)
    t = float(st.t.ppf(1 - alpha / family / 2, dof))
    return d - t * sd * se_per_sd, d + t * sd * se_per_sd, sd, dof


def prior_fits(ss: float, dof: int, var: float, level: float = PRIOR_FIT) -> bool:
    """Does an observed sum of squares with `dof` agree with a calibrated variance `var`? No
    when it is larger than chi-square allows at `level` (smaller is no evidence against it);
    yes without a degree of freedom to judge by."""
    from scipy import stats as st
    if dof < 1 or var <= 0:
        return dof < 1
    return float(st.chi2.sf(ss / var, dof)) >= level


def detectable(sigma: float, dof: int, alpha: float, rounds: int,
               comparisons: int = NOMINAL_COMPARISONS, power: float = POWER) -> float:
    """The smallest drop an A/B of `rounds` rounds calls a DROP with probability `power`, at a
    process-to-process sd `sigma` known with `dof` degrees of freedom (the mean rule: the
    effect's sd is sigma per round, its margin half the drop), in an A/B of `comparisons`
    comparisons. Rounded up to 0.1 %."""
    from scipy import stats as st
    if rounds - 1 + max(dof, 0) < 1:
        return math.inf
    t = float(st.t.ppf(1 - alpha / family_size(comparisons, 1, rounds) / 2,
                       rounds - 1 + max(dof, 0)))
    z = float(st.norm.ppf(power))
    return math.ceil(1000 * 2 * (t + z) * sigma / math.sqrt(rounds) - 1e-9) / 1000


def _verdict(lo: float, hi: float, margin: float, rounds: int) -> str:
    """classify, with no DROP from fewer than DROP_MIN_ROUNDS rounds."""
    v = classify(lo, hi, margin)
    return AMBIGUOUS if v == DROP and rounds < DROP_MIN_ROUNDS else v


def effect(ref, new, delta: float, alpha: float = 1e-3, family: int = 1,
           prior: Noise | None = None) -> Effect:
    """The effect of new against ref (per-process values, higher is better, unpaired) and its
    verdict."""
    _check(delta, alpha, family)
    lr, ln = _logs(ref), _logs(new)
    if not lr or not ln:
        raise ValueError("each arm needs at least one process value")
    d = sum(ln) / len(ln) - sum(lr) / len(lr)
    got = _interval(d, _ss(lr) + _ss(ln), len(lr) + len(ln) - 2, prior, 1.0,
                    math.sqrt(1 / len(lr) + 1 / len(ln)), alpha, family)
    if got is None:  # one process per arm and no calibration: no interval can be made
        return Effect(d, -math.inf, math.inf, math.nan, 0, len(lr), len(ln), AMBIGUOUS)
    lo, hi, sigma, dof = got
    return Effect(d, lo, hi, sigma, dof, len(lr), len(ln), classify(lo, hi, delta / 2))


def effect_rounds(ref_rounds, new_rounds, delta: float, alpha: float = 1e-3, family: int = 1,
                  prior: Noise | None = None) -> Effect:
    """The effect estimated round by round, as the A B B A design is blocked: per round,
    e_i = mean(log new_i) - mean(log ref_i), so a drift that is linear within a round cancels
    in e_i and does not widen the interval; d = mean(e_i), its noise the spread of the e_i
    (r - 1 dof) pooled with the calibration's (sd of e_i: sigma sqrt(1/n_new + 1/n_ref) per
    round), Student's t at the same level. `ref_rounds[i]`, `new_rounds[i]`: the values of
    round i. This is the gate's rule (gemm.track.confirm, gemm.track.calibrate)."""
    _check(delta, alpha, family)
    rounds = [(_logs(a), _logs(b)) for a, b in zip(ref_rounds, new_rounds) if a and b]
    if not rounds:
        raise ValueError("each arm needs at least one process value in a round")
    es = [sum(b) / len(b) - sum(a) / len(a) for a, b in rounds]
    r = len(es)
    d = sum(es) / r
    n_ref = sum(len(a) for a, _ in rounds)
    n_new = sum(len(b) for _, b in rounds)
    scale = sum(1 / len(a) + 1 / len(b) for a, b in rounds) / r if prior is not None else 1.0
    got = _interval(d, sum((e - d) ** 2 for e in es), r - 1, prior, scale, 1 / math.sqrt(r),
                    alpha, family)
    if got is None:
        return Effect(d, -math.inf, math.inf, math.nan, 0, n_ref, n_new, AMBIGUOUS)
    lo, hi, sd_e, dof = got
    return Effect(d, lo, hi, sd_e / math.sqrt(scale), dof, n_ref, n_new,
                  _verdict(lo, hi, delta / 2, r))


def aa_stable(first, last, delta: float, alpha: float = 1e-3, family: int = 1,
              prior: Noise | None = None, new_pairs=None, k=None) -> tuple[bool, Effect | None]:
    """The A/A control: (stable?, the move of the reference within a round beyond a drift).

    `first[i]`, `last[i]`: the reference's first and last process of round i; `new_pairs[i]`:
    the new code's two processes of that round, which sit `k[i]` new-code steps apart from
    each other less than the reference's two do (R N N R: k = 3). A linear drift moves
    log(last / first) by k times log(n2 / n1) and cancels in the A/B's estimate; what is left,
    d = log(last / first) - k log(n2 / n1), is the reference moving otherwise (a step, a
    throttle). Its mean over rounds gets a paired interval at the same level, with the rounds'
    own spread pooled with the calibration's (sd of d: sigma sqrt(2 (1 + k^2))). Unstable when
    the interval lies wholly beyond a quarter of delta either way, or when the rounds' d
    differ more than that calibrated sd allows at the same level (the GPU stepped between
    rounds: a step the mean of the rounds can hide)."""
    pairs = list(zip(first, last))
    if not pairs:
        return True, None
    _logs([x for p in pairs for x in p])
    new_pairs = list(new_pairs or [])
    ks = list(k or [])
    diffs, kmax = [], 0
    for i, (a, b) in enumerate(pairs):
        d = math.log(b) - math.log(a)
        if i < len(new_pairs) and i < len(ks):
            n1, n2 = _logs(new_pairs[i])
            d -= ks[i] * (n2 - n1)
            kmax = max(kmax, ks[i])
        diffs.append(d)
    r = len(diffs)
    m = sum(diffs) / r
    scale = 2 * (1 + kmax ** 2)
    ss = sum((x - m) ** 2 for x in diffs)
    got = _interval(m, ss, r - 1, prior, scale, 1 / math.sqrt(r), alpha, family, fit=False)
    if got is None:
        return True, None
    lo, hi, sd, dof = got
    e = Effect(m, lo, hi, sd / math.sqrt(scale), dof, r, r, classify(lo, hi, delta / 4))
    fits = prior is None or prior_fits(ss, r - 1, scale * prior.sigma ** 2, alpha / family)
    return e.verdict not in (DROP, FASTER) and fits, e


def rounds_needed(sigma: float, delta: float, alpha: float = 1e-3, family: int = 1,
                  power: float = POWER, prior_dof: int = 0, cap: int = 50) -> int:
    """A B B A rounds for a drop of delta to be called a DROP with the given power (and no
    change SAME), by the rule of effect_rounds: per round the effect's sd is sigma (two
    processes per arm), so after r rounds its standard error is sigma / sqrt(r), with
    r - 1 + prior_dof degrees of freedom. `gemm calibrate` prints it per series."""
    from scipy import stats as st
    if sigma <= 0:
        return 1
    z = float(st.norm.ppf(power))
    for r in range(DROP_MIN_ROUNDS, cap + 1):
        dof = r - 1 + prior_dof
        if dof < 1:
            continue
        t = float(st.t.ppf(1 - alpha / family / 2, dof))
        if (t + z) * sigma / math.sqrt(r) <= delta / 2:
            return r
    return cap


def reachable(e: Effect, delta: float, cap: int) -> bool:
    """Could this effect become a DROP by the round cap, were its estimate to hold? Its
    interval's half-width shrinks at least as 1/sqrt(rounds) (the t quantile falls too), so
    it can when estimate + half-width * sqrt(rounds so far / cap) lies below -delta/2. Overtime
    is for those: on the H200 (2ff823a's flooded false-alarm run) it went to tensor-core
    TFLOPS series of 0.8-1 % noise, -2.4 % [-9.4, +5.1] after one round, which no round cap
    in reach decides."""
    if not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return False
    rounds = max(1, e.n_new // 2)
    return e.estimate + (e.hi - e.lo) / 2 * math.sqrt(rounds / max(cap, rounds)) < -delta / 2


def on_course(e: Effect, delta: float) -> bool:
    """Overtime (GateConfig.overtime_s): is this effect, still undecided when the time budget
    is spent, on course for a DROP? Yes when its estimate lies past the margin -delta/2 (a
    slowdown larger than the margin, its interval not yet wholly beyond it, or not yet looked
    at: before the first decision's round). Unchanged code is rarely there (resampled from
    the H200's A/A values of 07 at 2048: about 0.01 overtime rounds per A/B;
    docs/probes/h200-7fa00a2-overtime-sim.txt), so commits without a drop keep the budget; a
    drop of delta nearly always is, and goes on to its verdict. It only chooses what to
    measure: the family-wise level already counts every look up to the round cap, so no
    error rate changes."""
    return math.isfinite(e.lo) and math.isfinite(e.hi) and e.estimate < -delta / 2


# --- The robust rule (GateConfig.robust, on by default; for series with a heavy tail) ---------
# Some series have processes in a slow state: 07 at 2048 runs about 1 process in 8 some 0.7 %
# slow on all its operand placements (docs/probes/h200-c79c015-trials-1-3.txt). The mean of
# log values takes such a process in at full weight, and the calibrated sd that covers it
# (0.22 % against a robust 0.13 %) needs ~8 rounds for a 1 % drop. A Huber M-estimate of each
# arm's location weighs such a process down instead; its interval's noise is the sandwich
# variance of the Huber-weighted values, from the A/A values themselves (so the tail it
# down-weights still widens it as much as it must), pooled with the run's own; small arms,
# barely down-weighted, widened by factors resampled from the same A/A values.
# ci/probes/power_sim.py HUBER=sandwich replays it on the measured A/A values.

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
