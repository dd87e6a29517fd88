"""The A/B's decision rule (gemm.track.decision) on synthetic per-process values: drops,
no change, noise, ambiguous cases, the family-wise level, and an unstable A/A control."""
import math
import random

import pytest

from gemm.track import decision as d


def procs(centre, sd, n, seed):
    rng = random.Random(seed)
    return [centre * math.exp(rng.gauss(0, sd)) for _ in range(n)]


PRIOR = d.Noise(0.001, 10)   # a calibrated runner: 0.1 % per process, 10 dof


def rounds_of(xs):
    return [xs[i:i + 2] for i in range(0, len(xs), 2)]


def effect(ref, new, *a, **kw):
    """The mean rule on values in rounds of two per arm."""
    return d.effect_rounds(rounds_of(ref), rounds_of(new), *a, **kw)


def test_a_one_percent_drop_is_a_drop_and_no_change_is_same():
    ref = procs(30.0, 0.001, 4, 1)
    assert effect(ref, procs(29.7, 0.001, 4, 2), 0.01, family=40, prior=PRIOR).verdict == d.DROP
    assert effect(ref, procs(30.0, 0.001, 4, 3), 0.01, family=40, prior=PRIOR).verdict == d.SAME
    assert effect(ref, procs(30.6, 0.001, 4, 4), 0.01, family=40, prior=PRIOR).verdict == d.FASTER


def test_every_trial_detects_one_percent_and_no_trial_flags_no_change():
    """Four A B B A rounds at the calibrated noise, the gate's rule (effect_rounds)."""
    def rounds(xs):
        return [xs[i:i + 2] for i in range(0, len(xs), 2)]
    drops = sames = 0
    for t in range(200):
        ref = rounds(procs(30.0, 0.001, 8, 10 + t))
        drops += d.effect_rounds(ref, rounds(procs(29.7, 0.001, 8, 1000 + t)), 0.01,
                                 family=40, prior=PRIOR).verdict == d.DROP
        sames += d.effect_rounds(ref, rounds(procs(30.0, 0.001, 8, 5000 + t)), 0.01,
                                 family=40, prior=PRIOR).verdict == d.DROP
    assert drops == 200 and sames == 0


def test_half_the_minimum_effect_is_the_decision_margin():
    sharp = d.Noise(0.0002, 30)
    e = effect([30.0] * 4, [29.85] * 4, 0.01, prior=sharp)       # -0.5 %: on the margin
    assert e.verdict == d.AMBIGUOUS and math.isclose(e.change, -0.005, rel_tol=1e-9)
    assert effect([30.0] * 4, [29.82] * 4, 0.01, prior=sharp).verdict == d.DROP
    assert effect([30.0] * 4, [29.88] * 4, 0.01, prior=sharp).verdict == d.SAME


def test_noise_widens_the_interval_until_it_is_ambiguous():
    ref, new = procs(30.0, 0.01, 4, 5), procs(29.7, 0.01, 4, 6)   # 1 % noise, 1 % drop
    assert effect(ref, new, 0.01, family=40).verdict == d.AMBIGUOUS
    e = effect(ref, new, 0.01, family=40, prior=d.Noise(0.01, 30))
    assert e.verdict == d.AMBIGUOUS and e.dof == 31


def test_the_calibration_is_pooled_with_the_rounds_own_spread():
    ref, new = [30.0] * 4, [29.7] * 4               # no spread of their own
    no_prior = effect(ref, new, 0.01)
    assert no_prior.dof == 1 and no_prior.sigma == 0 and no_prior.verdict == d.DROP
    pooled = effect(ref, new, 0.01, prior=d.Noise(0.002, 8))
    assert pooled.dof == 9 and math.isclose(pooled.sigma, 0.002 * math.sqrt(8 / 9))
    assert effect([30.0], [29.7], 0.01).verdict == d.AMBIGUOUS   # no dof, no interval


def test_a_larger_family_needs_more_evidence():
    ref, new = [30.0, 30.03, 29.97, 30.0], [29.7, 29.73, 29.67, 29.7]
    narrow = effect(ref, new, 0.01, family=1, prior=d.Noise(0.001, 6))
    wide = effect(ref, new, 0.01, family=10_000_000, prior=d.Noise(0.001, 6))
    assert wide.hi - wide.lo > narrow.hi - narrow.lo
    assert narrow.verdict == d.DROP and wide.verdict == d.AMBIGUOUS


def test_the_aa_control_catches_a_gpu_that_moved():
    ok, _ = d.aa_stable([30.0, 30.01], [30.0, 29.99], 0.01, prior=PRIOR)
    assert ok
    moved, e = d.aa_stable([30.0, 30.01], [29.7, 29.69], 0.01, prior=PRIOR)   # -1 % within a run
    assert not moved and "-1.0" in e.describe()


def test_the_aa_control_lets_a_linear_drift_pass_but_not_a_step():
    # R N N R with -0.4 % per process: the reference's last is 3 steps below its first, the new
    # code's second 1 step below its first; the A/B's estimate cancels it, and so does the control
    g = 0.996
    rounds = [(30.0 * g ** (4 * i), 30.0 * g ** (4 * i + 3)) for i in range(2)]
    news = [(30.0 * g ** (4 * i + 1), 30.0 * g ** (4 * i + 2)) for i in range(2)]
    first, last = [a for a, _ in rounds], [b for _, b in rounds]
    ok, _ = d.aa_stable(first, last, 0.01, prior=PRIOR, new_pairs=news, k=[3, 3])
    assert ok
    assert not d.aa_stable(first, last, 0.01, prior=PRIOR)[0]     # uncorrected, it would trip
    # a step of -1 % between the new code's two processes (the GPU throttled there)
    first, last = [30.0, 30.0], [29.7, 29.7]
    news = [(30.0, 29.7), (30.0, 29.7)]
    assert not d.aa_stable(first, last, 0.01, prior=PRIOR, new_pairs=news, k=[3, 3])[0]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="positive"):
        effect([30.0, None], [29.0], 0.01)
    with pytest.raises(ValueError):
        effect([30.0], [29.0], 0.0)
    with pytest.raises(ValueError):
        d.Noise(-1.0, 3)


def test_rounds_needed_grows_with_noise():
    quiet = d.rounds_needed(0.001, 0.01, family=40, prior_dof=10)
    noisy = d.rounds_needed(0.003, 0.01, family=40, prior_dof=10)
    assert 1 <= quiet < noisy


def test_an_astronomically_wide_interval_is_said_plainly():
    # one round and no calibration leave 1 dof: t at 1e-5 is ~6e4, and exp() of the bound
    # printed as a percentage was a 300-digit number in the gate's table
    e = d.Effect(-0.003, -40.0, 700.0, 0.004, 1, 4, 4, d.AMBIGUOUS)
    assert e.describe().startswith("-0.30 % [< -90 %, > +900 %]")


# --- the robust rule (GateConfig.robust): Yuen's trimmed means, a winsorized-variance prior --

def slow_state(centre, n, seed, slow_every=8, slow=0.007, sd=0.0009):
    """Processes like 07 at 2048's: sd 0.09 %, and every `slow_every`-th one 0.7 % slow."""
    return [v * (1 - slow if i % slow_every == slow_every - 1 else 1)
            for i, v in enumerate(procs(centre, sd, n, seed))]


def test_trimmed_noise_sees_past_the_tail_and_not_one_gpus_offset():
    aa = slow_state(41.2, 32, 7)
    p, per_value = d.trimmed_noise([aa])
    plain = math.sqrt(sum((math.log(x) - sum(map(math.log, aa)) / len(aa)) ** 2
                          for x in aa) / (len(aa) - 1))
    # one value's share of a trimmed mean lies between the bulk's sd and the inflated plain sd
    assert 0.0007 < per_value < plain / 1.25 and plain > 0.0019 and p.sigma < per_value
    assert p.dof == 32 - 2 * 6 - 1
    other = [v * 1.02 for v in slow_state(41.2, 32, 8)]          # a GPU 2 % faster
    pooled, _ = d.trimmed_noise([aa, other])
    assert pooled.sigma < 1.5 * p.sigma and pooled.dof == 2 * p.dof
    assert d.trimmed_noise([[41.0, 41.1, 41.2, 41.1]]) is None     # too few values to trim


def test_the_robust_rule_calls_a_drop_the_mean_rule_leaves_open_and_no_change_same():
    """A 1 % drop at 4 rounds, the reference arm having drawn a slow process: the mean rule
    with the calibrated (tail-inflated) sd cannot decide; trimmed means can. Unchanged code
    with a slow process in the new arm is not a drop."""
    robust, _ = d.trimmed_noise([slow_state(41.2, 64, 11)])
    mean_prior = d.Noise(0.0022, 68)
    ref = procs(41.2, 0.0009, 8, 12)
    ref[0] *= 0.993                                               # a slow reference process
    new = procs(41.2 * 0.99, 0.0009, 8, 13)
    fam = 288
    assert d.effect_rounds(rounds_of(ref), rounds_of(new), 0.01, 1e-3, fam,
                           mean_prior).verdict == d.AMBIGUOUS
    e = d.effect_trimmed(rounds_of(ref), rounds_of(new), 0.01, 1e-3, fam, robust)
    assert e.verdict == d.DROP and -0.012 < e.change < -0.008 and e.rule == "trimmed"
    same = procs(41.2, 0.0009, 8, 14)
    same[3] *= 0.993                                              # a slow new process
    assert d.effect_trimmed(rounds_of(ref), rounds_of(same), 0.01, 1e-3, fam,
                            robust).verdict in d.PASSING
    # without a prior, or with an arm too small to trim (2 rounds), the mean rule decides
    assert d.effect_trimmed(rounds_of(ref), rounds_of(new), 0.01, 1e-3, fam, None) is None
    assert d.effect_trimmed(rounds_of(ref[:4]), rounds_of(new[:4]), 0.01, 1e-3, fam,
                            robust) is None


def test_the_robust_rule_flags_no_change_in_no_trial():
    robust, _ = d.trimmed_noise([slow_state(41.2, 64, 21)])
    flagged = 0
    for t in range(100):
        ref, new = slow_state(41.2, 8, 100 + t, slow_every=5), slow_state(41.2, 8, 300 + t, slow_every=3)
        flagged += d.effect_trimmed(rounds_of(ref), rounds_of(new), 0.01, 1e-3, 288,
                                    robust).verdict == d.DROP
    assert flagged == 0


def test_a_prior_the_rounds_reject_gives_way_to_each_arms_own_spread():
    """Rounds whose own spread the calibrated noise cannot explain (a GPU that stepped between
    them) are judged on each arm's own spread (Welch): the prior's dof does not join the arm
    that rejects it, and a step of 3 % in one round of two stays undecided."""
    prior = d.Noise(0.001, 40)
    steady = d.effect_rounds([[30.0, 30.0], [30.0, 30.0]], [[29.7, 29.7], [29.71, 29.71]],
                             0.01, family=10, prior=prior)
    assert steady.dof == 41 and steady.verdict == d.DROP and steady.rule == "mean"
    stepped = d.effect_rounds([[30.0, 30.0], [30.0, 30.0]], [[29.1, 29.1], [30.0, 30.0]],
                              0.01, family=10, prior=prior)
    assert stepped.rule == "welch" and stepped.dof <= 3 and stepped.verdict == d.AMBIGUOUS


# 07 at 4096 (% of cuBLAS) slowed 17 % in its code, trial 3 on the H200 (docs/evidence.md):
# the slowed code ran 0.2 % per process apart, the calibrated noise is 0.08 %
SLOWED_07 = ([[82.4883559703373, 82.46095738975342], [82.4533462203345, 82.48925599729017]],
             [[68.55461400810628, 68.66224569609588], [68.32920843535831, 68.45523835931515]])


def test_a_large_drop_whose_rounds_reject_the_prior_is_a_drop():
    """A drop far past the margin stays a DROP where the new code is noisier than the prior
    (07's calibrated 0.02 %, 68 dof) says: the rounds' spread (2 rounds: 1 dof) alone left it
    unbounded, UNRESOLVED, in every trial."""
    e = d.effect_rounds(*SLOWED_07, 0.01, family=d.family_size(12, 1, 8),
                        prior=d.Noise(0.00023, 68))
    assert e.rule == "welch" and e.verdict == d.DROP
    assert -0.30 < e.lo and e.hi < -0.10 and 2 <= e.dof <= 6   # log change: -26 % to -10 %


def test_the_welch_fallback_holds_its_level_and_the_gate_flags_no_change():
    """No change, the new code noisier than the prior: where the rule falls back to Welch,
    one-sided false drops stay near alpha / 2 (alpha 0.1, no margin); at the gate's own level
    and margin (alpha 1e-3 over 40, minimum effect 1 %), none at all."""
    rng = random.Random(7)
    prior = d.Noise(0.001, 40)
    for n_rounds in (2, 3, 4):
        welch = drops = gate_drops = 0
        for _ in range(1000):
            ref = [[30.0 * math.exp(rng.gauss(0, 0.001)) for _ in range(2)]
                   for _ in range(n_rounds)]
            new = [[30.0 * math.exp(rng.gauss(0, 0.005)) for _ in range(2)]
                   for _ in range(n_rounds)]
            e = d.effect_rounds(ref, new, 0.0002, alpha=0.1, family=1, prior=prior)
            if e.rule == "welch":
                welch += 1
                drops += e.verdict == d.DROP
            gate_drops += d.effect_rounds(ref, new, 0.01, family=40,
                                          prior=prior).verdict == d.DROP
        assert welch > 300, (n_rounds, welch)
        assert drops / welch < 0.05 + 0.02, (n_rounds, drops, welch)
        assert gate_drops == 0, (n_rounds, gate_drops)


def test_the_aa_guard_fails_when_its_rounds_disagree_with_the_prior():
    """The reference moved +2 % in one round and -2 % in the next: the mean move is nil, but
    no calibrated noise of 0.1 % makes rounds that far apart."""
    prior = d.Noise(0.001, 40)
    ok, _ = d.aa_stable([30.0, 30.0], [30.01, 29.99], 0.01, prior=prior)
    assert ok
    moved, _ = d.aa_stable([30.0, 30.0], [30.6, 29.4], 0.01, prior=prior)
    assert not moved


def test_a_borrowed_prior_widens_the_minimum_effect():
    from gemm.track.gate import GateConfig
    own, borrowed = d.Noise(0.003, 68), d.Noise(0.003, 68, borrowed=True)
    cfg = GateConfig()
    assert cfg.effect_for("4096", own) < cfg.effect_for("4096", borrowed)
    assert cfg.effect_for("4096", None) == cfg.effect_for("4096") == 0.01


def test_outcomes_are_one_typed_vocabulary_written_as_before():
    import json
    assert [o.value for o in d.Outcome] == ["DROP", "SAME", "FASTER", "NOT_SLOWER", "AMBIGUOUS"]
    assert (d.DROP, d.SAME, d.FASTER, d.NOT_SLOWER, d.AMBIGUOUS) == tuple(d.Outcome)
    assert all(isinstance(o, d.Outcome) for o in (d.DROP, d.AMBIGUOUS, *d.PASSING))
    e = effect(procs(30.0, 0.001, 4, 1), procs(29.7, 0.001, 4, 2), 0.01, family=40, prior=PRIOR)
    assert e.verdict is d.Outcome.DROP and e.verdict == "DROP"
    assert json.loads(json.dumps({"verdict": e.verdict})) == {"verdict": "DROP"}


def test_an_interval_past_any_float_is_described_not_raised():
    """Two rounds of borrowed noise (1 dof) at the gate's family can give a log bound past 709,
    where exp overflows: the report says "> +900 %" and the kept effect holds inf, as before."""
    e = d.Effect(-0.01, -1789.0, 1789.0, 0.055, 1, 4, 4, d.AMBIGUOUS)
    assert "> +900 %" in e.describe() and "< -90 %" in e.describe()
    assert d.change_of(e.hi) == math.inf and d.change_of(e.lo) == -1.0   # kept as Infinity


def test_a_shift_shared_by_a_rounds_processes_is_not_counted_as_independent_processes():
    """The new code's two processes of a round agree, its rounds do not (a shift of 1 % in one
    round of three): Welch on the processes would count 6 independent values and call a DROP
    of -3.8 % from what is one round's shift; the arm's round means (2 dof) leave it open."""
    ref = [[30.0, 30.01], [29.99, 30.0], [30.0, 30.0]]
    new = [[28.95, 28.96], [28.71, 28.72], [28.95, 28.94]]
    e = d.effect_rounds(ref, new, 0.01, family=d.family_size(12, 1, 8), prior=d.Noise(0.001, 40))
    assert e.rule == "welch" and e.verdict == d.AMBIGUOUS and e.dof <= 3


def test_the_site_says_an_unbounded_interval_plainly():
    """A kept effect's bound of inf (or a huge one kept before the guard) reads "> +900 %" on
    the verdict and series pages, not "+inf %" or a number of 300 digits."""
    from gemm.record.sitedata import pct
    from gemm.record.verdict_page import _pct
    for hi in (math.inf, 1.0142320547350045e+304):
        assert pct(hi) == "> +900 %" and _pct(hi) == "> +900 %"
    assert pct(-0.0123) == "-1.2 %" and _pct(-0.0123) == "-1.23 %"


def test_a_new_code_noisier_than_its_prior_is_caught_by_its_pairs_within_rounds():
    """Two rounds whose e_i happen to agree pass the 1-dof fit test even where the new code is
    far noisier than the prior (here its two processes of a round 1 % apart, the prior 0.1 %):
    its pairs within rounds, less the drift the reference shows (R N N R: k = 3), reject the
    prior (r dof), and Welch leaves the -1 % open instead of a DROP on the prior's sd."""
    ref, new = [[29.98, 30.01], [29.96, 30.0]], [[29.6, 29.88], [29.48, 29.79]]
    fam = d.family_size(12, 1, 8)
    e = d.effect_rounds(ref, new, 0.01, family=fam, prior=d.Noise(0.001, 40), ks=[3, 3])
    assert e.rule == "welch" and e.verdict == d.AMBIGUOUS
    rng = random.Random(3)
    drops = 0
    for _ in range(3000):           # no change, the new code 10x noisier than the prior
        r = [[30 * math.exp(rng.gauss(0, 0.001)) for _ in range(2)] for _ in range(2)]
        n = [[30 * math.exp(rng.gauss(0, 0.01)) for _ in range(2)] for _ in range(2)]
        drops += d.effect_rounds(r, n, 0.01, family=fam, prior=d.Noise(0.001, 40),
                                 ks=[3, 3]).verdict == d.DROP
    assert drops <= 10              # 1.2 % of comparisons without the pairs, 0.13 % with them


def test_a_linear_drift_passes_the_pairs_test():
    """A GPU drifting -0.4 % per process: the new code's pair moves one step, the reference's
    three; less a third of the reference's move, nothing is left: the prior stands."""
    step = 0.004
    ref = [[30.0, 30.0 * math.exp(-3 * step)]] * 2
    new = [[29.7 * math.exp(-step), 29.7 * math.exp(-2 * step)]] * 2
    e = d.effect_rounds(ref, new, 0.01, family=40, prior=d.Noise(0.001, 40), ks=[3, 3])
    assert e.rule == "mean" and e.verdict == d.DROP
