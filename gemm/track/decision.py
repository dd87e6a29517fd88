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

Outcomes (Outcome), with the minimum effect `delta` (the smallest drop the gate must catch)
and the decision margin m = delta / 2 (the middle of the indifference zone between "no
change" and "a drop of delta"; a drop of delta then lands on the DROP side as the interval
narrows, and no change lands on the SAME side, each wrong with probability under alpha):

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
from enum import StrEnum


class Outcome(StrEnum):
    """One comparison's outcome (above); a str, as the files under verdicts/ and calibration/
    hold it. The A/B turns it into a row's gate.Verdict (DROP, else noise)."""
    DROP = "DROP"
    SAME = "SAME"
    FASTER = "FASTER"
    NOT_SLOWER = "NOT_SLOWER"
    AMBIGUOUS = "AMBIGUOUS"


DROP, SAME, FASTER, NOT_SLOWER, AMBIGUOUS = (Outcome.DROP, Outcome.SAME, Outcome.FASTER,
                                             Outcome.NOT_SLOWER, Outcome.AMBIGUOUS)
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
    estimate: float     # d = mean(log new) - mean(log ref) (the robust rule: trimmed means)
    lo: float
    hi: float
    sigma: float        # pooled sd of one process's log value
    dof: int
    n_ref: int
    n_new: int
    verdict: Outcome
    rule: str = "mean"  # or "trimmed" (effect_trimmed)

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


def classify(lo: float, hi: float, margin: float) -> Outcome:
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


def _verdict(lo: float, hi: float, margin: float, rounds: int) -> Outcome:
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
    is for those only: a noisy series far from its verdict after one round would take it all
    (docs/gate-history.md)."""
    if not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return False
    rounds = max(1, e.n_new // 2)
    return e.estimate + (e.hi - e.lo) / 2 * math.sqrt(rounds / max(cap, rounds)) < -delta / 2


def on_course(e: Effect, delta: float) -> bool:
    """Overtime (GateConfig.overtime_s): is this effect, still undecided when the time budget
    is spent, on course for a DROP? Yes when its estimate lies past the margin -delta/2 (a
    slowdown larger than the margin, its interval not yet wholly beyond it, or not yet looked
    at: before the first decision's round). Unchanged code is rarely there, so commits without
    a drop keep the budget (docs/gate-history.md); a drop of delta nearly always is, and goes
    on to its verdict. It only chooses what to
    measure: the family-wise level already counts every look up to the round cap, so no
    error rate changes."""
    return math.isfinite(e.lo) and math.isfinite(e.hi) and e.estimate < -delta / 2


TRIM = 0.2          # the robust rule: Yuen's trimmed means, a fifth cut at each end of an arm
TAIL_RATIO = 1.25   # a series is heavy-tailed (decided by trimmed means) where its calibrated sd
                    # exceeds this times the sd of one value's share of a trimmed mean


def _yuen(xs: list[float]) -> tuple[float, float, int, int]:
    """(trimmed mean, winsorized variance, n, h = n - 2g values kept) of log values."""
    n = len(xs)
    g = int(TRIM * n)
    s = sorted(xs)
    w = [min(max(x, s[g]), s[n - g - 1]) for x in xs]
    return sum(s[g:n - g]) / (n - 2 * g), _ss(w) / max(n - 1, 1), n, n - 2 * g


def trimmed_noise(parts) -> tuple[Noise, float] | None:
    """The robust rule's prior from A/A process values (one list per GPU, each of 5 values or
    more: one trimmed at each end): the winsorized sd pooled over GPUs by h - 1 (one GPU's
    offset from another is not noise), with those dof; and the sd of one value's share of a
    trimmed mean, sqrt(n (n - 1) / (h (h - 1))) winsorized sds, which heavy_tailed compares
    with the plain sd. None where no GPU has 5 values."""
    dof = var = per_value = 0.0
    for values in parts:
        xs = _logs(values)
        if int(TRIM * len(xs)) < 1:
            continue
        _, v, n, h = _yuen(xs)
        dof += h - 1
        var += (h - 1) * v
        per_value += (h - 1) * v * n * (n - 1) / (h * (h - 1))
    if not dof or not var > 0:
        return None
    return Noise(math.sqrt(var / dof), int(dof)), math.sqrt(per_value / dof)


def effect_trimmed(ref_rounds, new_rounds, delta: float, alpha: float = 1e-3, family: int = 1,
                   prior: Noise | None = None) -> Effect | None:
    """The robust rule (GateConfig.robust, for heavy-tailed series): Yuen's test, the arms'
    20 % trimmed means of all their process log values (R N N R gives both arms the same
    mid-round time, so a linear drift cancels), each arm's variance (n - 1) s_w^2 / (h (h - 1))
    from the winsorized variance s_w^2 of both arms pooled with the prior's (trimmed_noise),
    Student's t at the gate's level. None (the mean rule decides) without a prior or while an
    arm has too few values to trim one (a mean is then a mean, with the plain sd)."""
    lr = [x for r in ref_rounds for x in _logs(r)]
    ln = [x for r in new_rounds for x in _logs(r)]
    if prior is None or int(TRIM * min(len(lr), len(ln))) < 1:
        return None
    _check(delta, alpha, family)
    (mr, vr, nr, hr), (mn, vn, nn, hn) = _yuen(lr), _yuen(ln)
    lo, hi, sd, dof = _interval(mn - mr, (hr - 1) * vr + (hn - 1) * vn, hr + hn - 2, prior, 1.0,
                                math.sqrt((nr - 1) / (hr * (hr - 1)) + (nn - 1) / (hn * (hn - 1))),
                                alpha, family, fit=False)
    rounds = sum(1 for a, b in zip(ref_rounds, new_rounds) if a and b)
    return Effect(mn - mr, lo, hi, sd, dof, nr, nn, _verdict(lo, hi, delta / 2, rounds),
                  "trimmed")
