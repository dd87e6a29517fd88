"""The A/B's decision rule: is the new code slower than the reference code, here and now?

Per-process values of one series (higher is better) from R N N R rounds; the effect is
d = mean(log new) - mean(log ref) (d < 0: slower). Its noise pools, by degrees of freedom,
the rounds' own spread with the runner's calibrated noise (a borrowed prior enters with the
run's own dof; a prior the rounds' spread rejects at PRIOR_FIT is dropped). The interval is
Student's t at 1 - alpha / family two-sided (Bonferroni, family_size). With the margin
m = delta / 2 (delta: the minimum effect) the interval gives an Outcome: DROP wholly below -m
(never from fewer than DROP_MIN_ROUNDS rounds), SAME inside (-m, m), FASTER above m,
NOT_SLOWER above -m reaching past m, AMBIGUOUS straddling -m. docs/gate.md explains why.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    """One comparison's outcome (a str, as kept files hold it)."""
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
    """A prior on the process-to-process sd of log values; `borrowed`: from other series."""
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
        def pct(x: float) -> str:
            return signed_pct(math.expm1(x)) + " %"
        return (f"{pct(self.estimate)} [{pct(self.lo)}, {pct(self.hi)}] "
                f"({self.n_ref} vs {self.n_new} processes, sd {100 * self.sigma:.2f} %, "
                f"{self.dof} dof)")


def signed_pct(change: float) -> str:
    """A relative change in percent, signed ("-1.23"); an interval from 1-2 dof can be
    astronomically wide, so past -90 % or +900 % it says only that ("< -90", "> +900")."""
    if change <= -0.9:
        return "< -90"
    if change >= 9:
        return "> +900"
    return f"{100 * change:+.2f}"


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
    """(lo, hi, sd, dof) of every rule here, None without a dof: the sum of squares `ss`
    (`dof`) pooled with the prior's, whose variance here is `scale` sigma^2 (its dof, or `dof`
    where borrowed), unless the spread rejects it (`fit`); the standard error sd `se_per_sd`."""
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
    """Does a sum of squares with `dof` agree with a variance `var` (chi-square, one-sided)?"""
    from scipy import stats as st
    if dof < 1 or var <= 0:
        return dof < 1
    return float(st.chi2.sf(ss / var, dof)) >= level


def _power_half(sigma: float, rounds: int, dof: int, alpha: float, family: int,
                power: float) -> float:
    """Half of the drop that r rounds of the mean rule call a DROP with `power`: the effect's
    sd is sigma per round, its interval Student's t with `dof`."""
    from scipy import stats as st
    t = float(st.t.ppf(1 - alpha / family / 2, dof))
    return (t + float(st.norm.ppf(power))) * sigma / math.sqrt(rounds)


def detectable(sigma: float, dof: int, alpha: float, rounds: int,
               comparisons: int = NOMINAL_COMPARISONS, power: float = POWER) -> float:
    """The minimum effect the noise allows: the smallest drop an A/B of `comparisons`
    comparisons and `rounds` rounds calls a DROP with `power`, sigma known with `dof`.
    Rounded up to 0.1 %."""
    if rounds - 1 + max(dof, 0) < 1:
        return math.inf
    half = _power_half(sigma, rounds, rounds - 1 + max(dof, 0), alpha,
                       family_size(comparisons, 1, rounds), power)
    return math.ceil(1000 * 2 * half - 1e-9) / 1000


def _verdict(lo: float, hi: float, margin: float, rounds: int) -> Outcome:
    """classify, with no DROP from fewer than DROP_MIN_ROUNDS rounds."""
    v = classify(lo, hi, margin)
    return AMBIGUOUS if v == DROP and rounds < DROP_MIN_ROUNDS else v


def effect_rounds(ref_rounds, new_rounds, delta: float, alpha: float = 1e-3, family: int = 1,
                  prior: Noise | None = None) -> Effect:
    """The mean rule, round by round as R N N R is blocked: e_i = mean(log new_i) -
    mean(log ref_i) (a drift linear within a round cancels), d = mean(e_i), its noise the
    spread of the e_i (r - 1 dof) pooled with the prior's (sd of e_i: sigma sqrt(1/n_new +
    1/n_ref)). `ref_rounds[i]`, `new_rounds[i]`: the values of round i."""
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
    """The A/A control: (stable?, the reference's move within a round beyond a drift).

    Per round, d = log(last / first) - k log(n2 / n1): the reference's first and last process
    less k times the new code's two (R N N R: k = 3; a linear drift cancels). Unstable when
    the mean d's interval (sd of d: sigma sqrt(2 (1 + k^2)), the prior pooled) lies wholly
    beyond delta / 4 either way, or the rounds' d differ more than the prior allows (a step
    between rounds)."""
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
    """Rounds for a drop of delta to be called a DROP with `power` (the mean rule, the prior's
    dof joining the rounds'); `gemm calibrate` prints it per series."""
    if sigma <= 0:
        return 1
    return next((r for r in range(DROP_MIN_ROUNDS, cap + 1) if r - 1 + prior_dof >= 1
                 and _power_half(sigma, r, r - 1 + prior_dof, alpha, family, power) <= delta / 2),
                cap)


def reachable(e: Effect, delta: float, cap: int) -> bool:
    """Overtime: could this effect become a DROP by the round cap, were its estimate to hold
    (its half-width shrinking as 1/sqrt(rounds))? docs/gate-history.md says why."""
    if not (math.isfinite(e.lo) and math.isfinite(e.hi)):
        return False
    rounds = max(1, e.n_new // 2)
    return e.estimate + (e.hi - e.lo) / 2 * math.sqrt(rounds / max(cap, rounds)) < -delta / 2


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
