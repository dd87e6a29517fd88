"""The A/B's rule: a t interval on d = mean(log new) - mean(log ref) against delta / 2."""
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


class Rule(StrEnum):
    """Which rule made an Effect (a str, as kept files hold it)."""
    MEAN = "mean"          # effect_rounds
    TRIMMED = "trimmed"    # effect_trimmed
    WELCH = "welch"        # effect_rounds where the rounds reject the prior (_welch)


DROP, SAME, FASTER, NOT_SLOWER, AMBIGUOUS = Outcome
PASSING = (SAME, FASTER, NOT_SLOWER)
DROP_MIN_ROUNDS = 2   # a DROP needs two rounds: one round's processes can share a GPU's step
PRIOR_FIT = 0.001     # the rounds' spread must not reject the prior at this level
POWER = 0.9           # detectable: the chance a drop of the minimum effect is called a DROP
NOMINAL_COMPARISONS = 10   # detectable: the comparisons of a typical A/B (its family)
ROUNDS_CAP = 50       # rounds_needed counts no further
TRIM = 0.2          # the robust rule: Yuen's trimmed means, a fifth cut at each end of an arm
TAIL_RATIO = 1.25   # heavy-tailed: calibrated sd over this times a value's trimmed-mean share


@dataclass(frozen=True)
class Noise:
    """A prior on the process-to-process sd of log values; `borrowed`: from other series."""
    sigma: float
    dof: int
    borrowed: bool = False

    def __post_init__(self) -> None:
        if not (self.sigma >= 0 and math.isfinite(self.sigma)) or self.dof < 1:
            raise ValueError(f"noise needs sigma >= 0 and dof >= 1, got {self.sigma}, {self.dof}")

    def dof_for(self, own: int) -> int:
        """The dof the prior adds to data with `own`: its own, a borrowed one only `own`."""
        return own if self.borrowed else self.dof

    def pool(self, ss: float, dof: int, scale: float = 1.0) -> tuple[float, int]:
        """(ss, dof) of data with the prior (variance `scale` sigma^2) pooled in."""
        pdof = self.dof_for(dof)
        return ss + pdof * scale * self.sigma ** 2, dof + pdof


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
    rule: Rule = Rule.MEAN

    @property
    def change(self) -> float:
        return change_of(self.estimate)

    def describe(self) -> str:
        d, lo, hi = (signed_pct(change_of(x)) + " %" for x in (self.estimate, self.lo, self.hi))
        return (f"{d} [{lo}, {hi}] ({self.n_ref} vs {self.n_new} processes, "
                f"sd {100 * self.sigma:.2f} %, {self.dof} dof)")


def change_of(d: float) -> float:
    """A log difference as a relative change exp(d) - 1; inf past what a float holds."""
    return math.expm1(d) if d < 709.0 else math.inf


def signed_pct(change: float) -> str:
    """A relative change in percent, signed ("-1.23"), only "< -90" or "> +900" beyond."""
    if change <= -0.9:
        return "< -90"
    if change >= 9:
        return "> +900"
    return f"{100 * change:+.2f}"


def _logs(xs) -> list[float]:
    for x in xs:
        if x is None or not math.isfinite(x) or x <= 0:
            raise ValueError(f"a process value must be a positive number, got {x!r}")
    return [math.log(x) for x in xs]


def _ss(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs)


def classify(lo: float, hi: float, margin: float, rounds: int = DROP_MIN_ROUNDS) -> Outcome:
    """The interval's outcome against the margin; no DROP from fewer than DROP_MIN_ROUNDS."""
    if hi < -margin:
        return DROP if rounds >= DROP_MIN_ROUNDS else AMBIGUOUS
    if lo > margin:
        return FASTER
    if lo > -margin:
        return SAME if hi < margin else NOT_SLOWER
    return AMBIGUOUS


def _check(delta: float, alpha: float, family: int) -> None:
    if not 0 < delta < 1 or not 0 < alpha < 1 or family < 1:
        raise ValueError("need 0 < delta < 1, 0 < alpha < 1, family >= 1")


def family_size(comparisons: int, min_rounds: int, max_rounds: int) -> int:
    """The Bonferroni family of one A/B: every comparison, every look, twice (a restart's)."""
    return comparisons * (max_rounds - min_rounds + 1) * 2


def _t(alpha: float, family: int, dof: int) -> float:
    """Student's t quantile, two-sided at level alpha over `family` intervals."""
    from scipy import stats as st
    return float(st.t.ppf(1 - alpha / family / 2, dof))


def _interval(d: float, ss: float, dof: int, prior: Noise | None, scale: float, se_per_sd: float,
              alpha: float, family: int) -> tuple[float, float, float, int]:
    """(lo, hi, sd per process, dof) of d, `ss` pooled with the prior (variance scale sigma^2)."""
    if prior is not None:
        ss, dof = prior.pool(ss, dof, scale)
    if dof < 1:
        return -math.inf, math.inf, math.nan, 0
    sd = math.sqrt(ss / dof)
    t = _t(alpha, family, dof)
    return d - t * sd * se_per_sd, d + t * sd * se_per_sd, sd / math.sqrt(scale), dof


def prior_fits(ss: float, dof: int, var: float, level: float = PRIOR_FIT) -> bool:
    """Does a sum of squares with `dof` agree with a variance `var` (chi-square, one-sided)?"""
    from scipy import stats as st
    if dof < 1 or var <= 0:
        return dof < 1
    return float(st.chi2.sf(ss / var, dof)) >= level


def _power_half(sigma: float, rounds: int, dof: int, alpha: float, family: int) -> float:
    """Half the drop that `rounds` rounds of the mean rule, with `dof`, call a DROP with POWER."""
    from scipy import stats as st
    return (_t(alpha, family, dof) + float(st.norm.ppf(POWER))) * sigma / math.sqrt(rounds)


def detectable(sigma: float, dof: int, alpha: float, rounds: int) -> float:
    """The minimum effect the noise allows at `rounds` rounds, rounded up to 0.1 %."""
    dof = rounds - 1 + max(dof, 0)
    if dof < 1:
        return math.inf
    half = _power_half(sigma, rounds, dof, alpha, family_size(NOMINAL_COMPARISONS, 1, rounds))
    return math.ceil(1000 * 2 * half - 1e-9) / 1000


def rounds_needed(sigma: float, delta: float, alpha: float = 1e-3, family: int = 1,
                  prior_dof: int = 0) -> int:
    """Rounds for a drop of delta to be called a DROP with POWER, at most ROUNDS_CAP."""
    if sigma <= 0:
        return 1
    for rounds in range(DROP_MIN_ROUNDS, ROUNDS_CAP + 1):
        dof = rounds - 1 + prior_dof
        if dof >= 1 and _power_half(sigma, rounds, dof, alpha, family) <= delta / 2:
            return rounds
    return ROUNDS_CAP


def effect_rounds(ref_rounds, new_rounds, delta: float, alpha: float = 1e-3, family: int = 1,
                  prior: Noise | None = None, ks=None) -> Effect:
    """The mean rule: d averaged over the rounds, their spread pooled with the prior's."""
    _check(delta, alpha, family)
    rounds = [(_logs(a), _logs(b)) for a, b in zip(ref_rounds, new_rounds) if a and b]
    if not rounds:
        raise ValueError("each arm needs at least one process value in a round")
    es = [sum(b) / len(b) - sum(a) / len(a) for a, b in rounds]
    r, d = len(es), sum(es) / len(es)
    n_ref, n_new = sum(len(a) for a, _ in rounds), sum(len(b) for _, b in rounds)
    scale = sum(1 / len(a) + 1 / len(b) for a, b in rounds) / r if prior is not None else 1.0
    welch = prior is not None and not (prior_fits(_ss(es), r - 1, scale * prior.sigma ** 2)
                                       and _pairs_fit(rounds, ks, prior))
    lo, hi, sd, dof = (_welch(d, rounds, n_ref, n_new, alpha, family, prior) if welch else
                       _interval(d, _ss(es), r - 1, prior, scale, 1 / math.sqrt(r), alpha, family))
    return Effect(d, lo, hi, sd, dof, n_ref, n_new, classify(lo, hi, delta / 2, r),
                  Rule.WELCH if welch else Rule.MEAN)


def _pairs_fit(rounds, ks, prior: Noise) -> bool:
    """Do the new code's pairs fit the prior, less the reference's drift (k steps apart)?"""
    pairs = [(a, b, k) for (a, b), k in zip(rounds, ks or []) if len(a) == len(b) == 2 and k]
    if not pairs or len(pairs) != len(rounds):
        return True
    ss = sum(((b[1] - b[0]) - (a[1] - a[0]) / k) ** 2 / (1 + 1 / k ** 2) for a, b, k in pairs)
    return prior_fits(ss, len(pairs), 2 * prior.sigma ** 2)


def _welch(d: float, rounds, n_ref: int, n_new: int, alpha: float, family: int,
           prior: Noise) -> tuple[float, float, float, int]:
    """_interval where the rounds reject the prior: each arm's own variance (_arm), Welch dof."""
    arms = [_arm([a for a, _ in rounds], prior), _arm([b for _, b in rounds], prior)]
    parts = [var / n for var, _, n in arms]
    se2 = sum(parts)
    if not (math.isfinite(se2) and se2 > 0):
        return -math.inf, math.inf, math.nan, 0
    dof = se2 ** 2 / sum(p ** 2 / a[1] for p, a in zip(parts, arms))
    half = _t(alpha, family, dof) * math.sqrt(se2)
    return d - half, d + half, math.sqrt(se2 / (1 / n_ref + 1 / n_new)), int(dof)


def _arm(groups: list[list[float]], prior: Noise) -> tuple[float, int, int]:
    """(unit variance, dof, units) of an arm: its values, or its round means (F-test)."""
    from scipy import stats as st
    xs = [x for g in groups for x in g]
    within, w_dof = sum(_ss(g) for g in groups), sum(len(g) - 1 for g in groups)
    means = [sum(g) / len(g) for g in groups]
    grand = sum(xs) / len(xs)
    between = sum(len(g) * (m - grand) ** 2 for g, m in zip(groups, means))
    if len(groups) > 1 and w_dof and (
            within <= 0 < between
            or within > 0 and st.f.sf(between / (len(groups) - 1) / (within / w_dof),
                                      len(groups) - 1, w_dof) < PRIOR_FIT):
        dof = len(means) - 1
        return _ss(means) / dof, dof, len(means)
    ss, dof = _ss(xs), len(xs) - 1
    if dof >= 1 and prior_fits(ss, dof, prior.sigma ** 2):
        ss, dof = prior.pool(ss, dof)
    return (ss / dof if dof else math.inf), dof, len(xs)


def aa_stable(first, last, delta: float, alpha: float = 1e-3, family: int = 1,
              prior: Noise | None = None, new_pairs=None, k=None) -> tuple[bool, Effect | None]:
    """The A/A control: (stable?, the reference's move less k times the new code's)."""
    diffs = [b - a for a, b in (_logs(p) for p in zip(first, last))]
    if not diffs:
        return True, None
    kmax = 0
    for i, pair, ki in zip(range(len(diffs)), new_pairs or [], k or []):
        n1, n2 = _logs(pair)
        diffs[i] -= ki * (n2 - n1)
        kmax = max(kmax, ki)
    r, m, ss = len(diffs), sum(diffs) / len(diffs), _ss(diffs)
    scale = 2 * (1 + kmax ** 2)
    lo, hi, sd, dof = _interval(m, ss, r - 1, prior, scale, 1 / math.sqrt(r), alpha, family)
    if not dof:
        return True, None
    e = Effect(m, lo, hi, sd, dof, r, r, classify(lo, hi, delta / 4))
    fits = prior is None or prior_fits(ss, r - 1, scale * prior.sigma ** 2, alpha / family)
    return e.verdict not in (DROP, FASTER) and fits, e


def reachable(e: Effect, delta: float, cap: int, alpha: float = 1e-3, family: int = 1) -> bool:
    """Overtime: would this estimate, held, be a DROP by the round cap?"""
    if not (math.isfinite(e.lo) and math.isfinite(e.hi)) or e.dof < 1:
        return False
    rounds = max(1, e.n_new // 2)
    more = max(cap, rounds) - rounds
    if e.rule is Rule.WELCH:   # its interval's dof is fractional; e.dof is truncated
        se = e.sigma * math.sqrt(1 / e.n_ref + 1 / e.n_new)
    else:
        se = (e.hi - e.lo) / 2 / _t(alpha, family, e.dof)
    if e.rule is Rule.TRIMMED:   # each arm's 2 values a round, less those the trim cuts more
        gain = sum(2 * more - 2 * (_cut(n + 2 * more) - _cut(n)) for n in (e.n_ref, e.n_new))
    else:
        gain = more              # one a round: the mean rule with its own or no prior; Welch
    return e.estimate + _t(alpha, family, e.dof + gain) * se * math.sqrt(rounds / (rounds + more)) \
        < -delta / 2


def _cut(n: int) -> int:
    """The values a trimmed mean of n cuts at each end."""
    return int(TRIM * n)


def _yuen(xs: list[float]) -> tuple[float, float, int, int]:
    """(trimmed mean, winsorized variance, n, h = n - 2g values kept) of log values."""
    n = len(xs)
    g = _cut(n)
    s = sorted(xs)
    w = [min(max(x, s[g]), s[n - g - 1]) for x in xs]
    return sum(s[g:n - g]) / (n - 2 * g), _ss(w) / max(n - 1, 1), n, n - 2 * g


def trimmed_noise(parts) -> tuple[Noise, float] | None:
    """(the robust prior, a value's share of a trimmed mean) of A/A values, a list per GPU."""
    dof = var = per_value = 0.0
    for values in parts:
        xs = _logs(values)
        if _cut(len(xs)) < 1:
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
    """The robust rule, Yuen's trimmed means; None where the mean rule decides."""
    lr, ln = ([x for r in rounds for x in _logs(r)] for rounds in (ref_rounds, new_rounds))
    if prior is None or _cut(min(len(lr), len(ln))) < 1:
        return None
    _check(delta, alpha, family)
    (mr, vr, nr, hr), (mn, vn, nn, hn) = _yuen(lr), _yuen(ln)
    lo, hi, sd, dof = _interval(mn - mr, (hr - 1) * vr + (hn - 1) * vn, hr + hn - 2, prior, 1.0,
                                math.sqrt((nr - 1) / (hr * (hr - 1)) + (nn - 1) / (hn * (hn - 1))),
                                alpha, family)
    rounds = sum(1 for a, b in zip(ref_rounds, new_rounds) if a and b)
    return Effect(mn - mr, lo, hi, sd, dof, nr, nn, classify(lo, hi, delta / 2, rounds),
                  Rule.TRIMMED)
