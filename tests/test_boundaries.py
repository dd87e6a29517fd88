"""The gate's statistics AT their decision boundaries (gemm.track.decision, gate, calibration).

The other tests put 1 % effects against 0.1 % noise, far from any boundary, so a wrong
quantile, a missing factor of the Bonferroni family or of a variance changes no verdict there.
Here every interval is computed again from first principles (scipy's t quantile at the exact
family and the two-sided level, the exact pooled variance) and the effect is placed a hair
(EPS in log units) on either side of the boundary: anything that moves the interval's end by
more than that flips one of the two verdicts. Each test's docstring names the mutation(s) it
guards against (the numbering of the boundary-tests brief):

 1. the looks factor (max_rounds - min_rounds + 1) dropped from the family
 2. the x2 restart factor dropped from the family
 3. a one-sided quantile, 1 - alpha / family, where two-sided 1 - alpha / family / 2 is meant
 4. the robust rule ignoring the family (family -> 1 in effect_trimmed)
 5. the robust rule omitting the new arm's variance
 6. the A/A guard's variance factor 2 (1 + k^2) replaced by 2
 7. decision.TAIL_RATIO 1.25 -> 1.7 (which series the committed calibration sends to the
    robust rule, trimmed means)
"""
import json
import math
from pathlib import Path

from scipy import stats as st

from gemm.track import calibration, decision as d
from gemm.track.gate import GateConfig, Row

ALPHA, DELTA = 1e-3, 0.01          # the gate's defaults (large size class)
MARGIN = DELTA / 2                 # a DROP's interval ends below -MARGIN
FAMILY = 3 * 8 * 2                 # 3 comparisons x 8 looks (rounds 1..8) x 2 (one restart)
EPS = 1e-9                         # how far from a boundary each effect is put (log units)
BASE = 30.0
ROOT = Path(__file__).resolve().parents[1]


def t2(dof: int, family: int = FAMILY) -> float:
    """Student's t, two-sided at family-wise level ALPHA over `family` intervals."""
    return float(st.t.ppf(1 - ALPHA / (2 * family), dof))


def values(centre_log: float, offsets) -> list[float]:
    return [BASE * math.exp(centre_log + o) for o in offsets]


def test_family_size_counts_comparisons_looks_and_the_restart():
    """Mutations 1 and 2: the family is comparisons x (max - min + 1) looks x 2."""
    assert d.family_size(3, 1, 8) == FAMILY == 48
    assert d.family_size(1, 1, 1) == 2           # one comparison, one look: the restart alone
    assert d.family_size(5, 3, 5) == 5 * 3 * 2
    assert d.family_size(2, 2, 9) == 2 * 8 * 2


def test_the_ab_and_the_calibration_trials_count_the_same_family(monkeypatch):
    """Mutations 1 and 2 (as the gate and `gemm calibrate` use them): ABRun.family and the
    family calibrate.trial decides with are the exact Bonferroni family."""
    from gemm.calibrate import runner as calibrate
    from gemm.track import calibration, confirm
    row = Row("09_cp_async_pipeline", "4096", "tflops", 5, 30.0, 29.5, -0.017, 0.005, "drop?")
    comps = [(row, "a" * 40), (row, "c" * 40), (row, "e" * 40)]
    assert confirm.ABRun(comps, GateConfig(), "b" * 40, {}, print, None).family == 48
    assert confirm.ABRun(comps, GateConfig(min_rounds=2, max_rounds=5), "b" * 40, {}, print,
                         None).family == 3 * 4 * 2
    seen = []

    class Spy(GateConfig):
        def decide(self, ref_rounds, new_rounds, delta, family, prior, robust_prior, ks=None):
            seen.append(family)
            return super().decide(ref_rounds, new_rounds, delta, family, prior, robust_prior,
                                  ks)
    monkeypatch.setattr(calibrate.abtest, "measure", lambda root, series, env=None, **kw: {
        (k, s, m): 30.0 for k, ss in series.items() for s in ss for m in calibrate.METRICS})
    prior = {("09", "4096", m): d.Noise(0.003, 29) for m in calibrate.METRICS}
    calibrate.trial(".", ["09"], ["4096"], [0.02], Spy(max_rounds=3),
                    calibration.Calibration("h200", None, "", noise=prior), lambda s: None,
                    clock=lambda: 0.0)
    assert seen and set(seen) == {2 * 3 * 2}     # 1 kernel x 1 size x 2 metrics, 3 looks, x2


def _mean_rule_case(side: float):
    """Three A B B A rounds whose per-round effects e_i = dd + (-s, 0, +s) put the interval's
    upper end `side` * EPS from -MARGIN; the prior Noise(0.003, 20), two processes per arm
    (sd of e_i: sigma sqrt(1/2 + 1/2))."""
    s, prior, r = 0.002, d.Noise(0.003, 20), 3
    ss = 2 * s * s + prior.dof * 1.0 * prior.sigma ** 2     # own spread + the prior's
    dof = r - 1 + prior.dof
    half = t2(dof) * math.sqrt(ss / dof) / math.sqrt(r)
    dd = -MARGIN - half + side * EPS
    ref = [[BASE, BASE]] * r
    new = [values(dd + dev, (0.0, 0.0)) for dev in (-s, 0.0, s)]
    return ref, new, prior, dd + half


def test_the_mean_rule_at_the_drop_boundary():
    """Mutations 1, 2, 3 (_interval): the interval at the exact family, two-sided level and
    pooled variance; a hair below -delta/2 is a DROP, a hair above is AMBIGUOUS. A smaller
    family or a one-sided quantile narrows it and makes the second a DROP."""
    family = d.family_size(3, 1, 8)
    ref, new, prior, hi = _mean_rule_case(-1)
    e = d.effect_rounds(ref, new, DELTA, ALPHA, family, prior)
    assert e.verdict == d.DROP and abs(e.hi - hi) < EPS / 10 and e.dof == 22
    ref, new, prior, hi = _mean_rule_case(+1)
    e = d.effect_rounds(ref, new, DELTA, ALPHA, family, prior)
    assert e.verdict == d.AMBIGUOUS and abs(e.hi - hi) < EPS / 10
    # the gate's own path (GateConfig.decide) without a robust prior is the mean rule
    assert GateConfig().decide(ref, new, DELTA, family, prior, None).verdict == d.AMBIGUOUS


# the robust rule: Yuen's 20 % trimmed means; 6 reference values, 8 new ones (one cut at each
# end of each arm), with a winsorized-variance prior
ROBUST = d.Noise(0.003, 30)
REF_OFF = (-0.003, 0.002, -0.001, 0.001, 0.0, 0.004)
NEW_OFF = (-0.002, 0.002, 0.001, -0.001, 0.0, 0.003, -0.004, 0.0005)


def _robust_case(side: float):
    """The interval from first principles (scipy's trim_mean and winsorize): each arm's
    variance (n - 1) s_w^2 / (h (h - 1)), s_w^2 both arms' winsorized sums of squares pooled
    with the prior's by dof (h - 1 per arm), placed `side` * EPS from -MARGIN."""
    import numpy as np
    from scipy.stats import mstats, trim_mean
    arms = [np.array(REF_OFF), np.array(NEW_OFF)]
    hs = [len(a) - 2 * int(0.2 * len(a)) for a in arms]
    wss = [np.var(np.asarray(mstats.winsorize(a, limits=(0.2, 0.2))), ddof=1) * (h - 1)
           for a, h in zip(arms, hs)]
    dof = ROBUST.dof + sum(h - 1 for h in hs)
    var = (ROBUST.dof * ROBUST.sigma ** 2 + sum(wss)) / dof
    se = math.sqrt(var * sum((len(a) - 1) / (h * (h - 1)) for a, h in zip(arms, hs)))
    half = t2(dof) * se
    dd = -MARGIN - half + side * EPS
    shift = dd - (trim_mean(NEW_OFF, 0.2) - trim_mean(REF_OFF, 0.2))
    ref = [values(0.0, REF_OFF[i:i + 2]) for i in (0, 2, 4)]
    new = [values(shift, NEW_OFF[i:i + 2]) for i in (0, 2, 4, 6)]
    return ref, new, dd + half


def test_the_robust_rule_at_the_drop_boundary():
    """Mutations 3 (effect_trimmed), 4 and 5: the gate (GateConfig.decide with a robust prior)
    decides by Yuen's trimmed means at the exact family, two-sided level, pooled winsorized
    variance and both arms' shares of it: a hair below -delta/2 is a DROP, a hair above
    AMBIGUOUS. Family 1, a one-sided quantile or no new arm's share narrow it: the second
    becomes a DROP."""
    family = d.family_size(3, 1, 8)
    ref, new, hi = _robust_case(-1)
    e = GateConfig().decide(ref, new, DELTA, family, d.Noise(0.003, 30), ROBUST)
    assert e.verdict == d.DROP and abs(e.hi - hi) < EPS / 10 and e.dof == 30 + 3 + 5
    assert (e.n_ref, e.n_new, e.rule) == (6, 8, "trimmed")
    ref, new, hi = _robust_case(+1)
    e = GateConfig().decide(ref, new, DELTA, family, d.Noise(0.003, 30), ROBUST)
    assert e.verdict == d.AMBIGUOUS and abs(e.hi - hi) < EPS / 10
    # robust off: the mean rule, which this case does not put on its boundary
    assert GateConfig(robust=False).decide(ref, new, DELTA, family, d.Noise(0.003, 30),
                                           ROBUST).hi != e.hi


def _aa_case(side: float, k: int = 3):
    """Four rounds of the A/A control: the reference's two processes sit k new-code steps
    further apart than the new code's two, which drift by g_i; after the drift correction
    the reference's moves are mm + (-s, +s, -s, +s), their sd pooled with the prior's
    (variance of one move: 2 (1 + k^2) sigma^2); the interval's lower end placed `side` * EPS
    from +delta/4."""
    s, prior, r = 0.001, d.Noise(0.0005, 20), 4
    scale = 2 * (1 + k * k)
    ss = r * s * s + prior.dof * scale * prior.sigma ** 2
    dof = r - 1 + prior.dof
    half = t2(dof) * math.sqrt(ss / dof) / math.sqrt(r)
    mm = DELTA / 4 + half + side * EPS
    drift = [0.0004 * i for i in range(r)]
    moves = [mm + dev for dev in (-s, s, -s, s)]
    first = [BASE] * r
    last = [BASE * math.exp(m + k * g) for m, g in zip(moves, drift)]
    pairs = [(BASE, BASE * math.exp(g)) for g in drift]
    return first, last, pairs, [k] * r, prior, mm - half, math.sqrt(ss / dof / scale)


def test_the_aa_guard_at_its_boundary():
    """Mutations 6 and 3 (_interval): the A/A control's interval with the variance of a
    drift-corrected move, 2 (1 + k^2) sigma^2, at the exact two-sided level: a lower end a
    hair above +delta/4 is unstable, a hair below stable. A factor 2 alone (or a one-sided
    quantile) narrows it and makes the second unstable too."""
    family = d.family_size(3, 1, 8)
    first, last, pairs, ks, prior, lo, sigma = _aa_case(+1)
    ok, e = d.aa_stable(first, last, DELTA, ALPHA, family, prior, pairs, ks)
    assert not ok and e.verdict == d.FASTER and abs(e.lo - lo) < EPS / 10
    assert math.isclose(e.sigma, sigma, rel_tol=1e-9)
    first, last, pairs, ks, prior, lo, sigma = _aa_case(-1)
    ok, e = d.aa_stable(first, last, DELTA, ALPHA, family, prior, pairs, ks)
    assert ok and e.verdict in (d.SAME, d.NOT_SLOWER) and abs(e.lo - lo) < EPS / 10


def _synthetic(sigma: float) -> calibration.Calibration:
    """One calibrated series: five A/A values at log offsets (-2, -1, 0, 1, 2) x 0.001 and
    the given calibrated sigma."""
    row = {"kernel": "07_bank_conflict_free", "size": "2048", "metric": "tflops",
           "sigma": sigma, "dof": 40, "values": values(0.0, [0.001 * o for o in range(-2, 3)])}
    return calibration.of_doc("h200", {"noise": [row]})


def test_heavy_tailed_at_the_tail_ratio():
    """Mutation 7: a series is heavy-tailed when its sd exceeds 1.25 x the sd of one value's
    share of a trimmed mean of its A/A values, sqrt(n (n - 1) / (h (h - 1))) winsorized sds.
    Offsets (-2..2) x 0.001: one cut at each end (h = 3), winsorized to (-1, -1, 0, 1, 1) x
    0.001, s_w^2 = 1e-6, so that sd is sqrt(20 / 6) e-3. A ratio a hair either side of 1.25
    flips; 1.69 (between 1.25 and 1.7) is heavy-tailed."""
    share = math.sqrt(5 * 4 / (3 * 2)) * 0.001
    key = ("07_bank_conflict_free", "2048", "tflops")
    assert not _synthetic(1.25 * (1 - 1e-6) * share).heavy_tailed(*key)
    assert _synthetic(1.25 * (1 + 1e-6) * share).heavy_tailed(*key)
    assert _synthetic(1.69 * share).heavy_tailed(*key)
    assert not _synthetic(1.69 * share).heavy_tailed("07_bank_conflict_free", "4096", "tflops")


# the committed calibration's series whose sd exceeds 1.25 x the sd of one value's share of a
# trimmed mean (07 2048 2.09 / 1.58, 11 4096 1.47, 11 1000 1.30; 11 8192 TFLOPS 2.23 and 12
# 8192 % of cuBLAS 1.90 from 6 processes at 739e042's calibration; 13-15 at 2048-8192 pooled
# from 6 processes at 591156b and 10 at 739e042 on another GPU: 13 2048 / 8192 TFLOPS 1.78 /
# 1.63, 14 4096 / 8192 % of cuBLAS 1.46 / 1.27; 6 processes each at a947ef4 and 1cd0f7b: 08
# 2048 1.90 / 1.79, 10 2048 % of cuBLAS 1.31, 05 8192x1024x4096 TFLOPS 2.42, 07 3.33, 09
# 1024x8192x8192 % of cuBLAS 2.22, 14 8192x1024x4096 1.27 / 1.26 and 4096x4096x1024 % of
# cuBLAS 1.27, 15 8192x1024x4096 1.58 / 1.52; 6 processes each on 2026-12-04: 16
# 1024x8192x8192 / 8192x1024x4096 % of cuBLAS 1.88 / 1.80, 17 2048 3.41 / 1.35 and
# 8192x1024x4096 1.65 / 1.40, 18 2048 TFLOPS 1.65, 3001x2999x3003 % of cuBLAS 2.60,
# 4096x4096x1024 TFLOPS 1.69; every other series under 1.25)
ROBUST_SERIES = {
    ("05_2d_blocktiling", "8192x1024x4096", "tflops"),
    ("07_bank_conflict_free", "2048", "pct_of_cublas"),
    ("07_bank_conflict_free", "2048", "tflops"),
    ("07_bank_conflict_free", "8192x1024x4096", "tflops"),
    ("08_warptiling", "2048", "pct_of_cublas"),
    ("08_warptiling", "2048", "tflops"),
    ("09_cp_async_pipeline", "1024x8192x8192", "pct_of_cublas"),
    ("10_autotuned", "2048", "pct_of_cublas"),
    ("11_tf32_wmma", "1000", "tflops"),
    ("11_tf32_wmma", "4096", "tflops"),
    ("11_tf32_wmma", "8192", "tflops"),
    ("12_tf32_mma_sync", "8192", "pct_of_cublas"),
    ("13_tf32_wgmma_tma", "2048", "tflops"),
    ("13_tf32_wgmma_tma", "8192", "tflops"),
    ("14_bf16_wgmma_tma", "4096", "pct_of_cublas"),
    ("14_bf16_wgmma_tma", "4096x4096x1024", "pct_of_cublas"),
    ("14_bf16_wgmma_tma", "8192", "pct_of_cublas"),
    ("14_bf16_wgmma_tma", "8192x1024x4096", "pct_of_cublas"),
    ("14_bf16_wgmma_tma", "8192x1024x4096", "tflops"),
    ("15_bf16_pingpong", "8192x1024x4096", "pct_of_cublas"),
    ("15_bf16_pingpong", "8192x1024x4096", "tflops"),
    ("16_bf16_tma_store", "1024x8192x8192", "pct_of_cublas"),
    ("16_bf16_tma_store", "8192x1024x4096", "pct_of_cublas"),
    ("17_bf16_acc_overlap", "2048", "pct_of_cublas"),
    ("17_bf16_acc_overlap", "2048", "tflops"),
    ("17_bf16_acc_overlap", "8192x1024x4096", "pct_of_cublas"),
    ("17_bf16_acc_overlap", "8192x1024x4096", "tflops"),
    ("18_bf16_pingpong_tma_store", "2048", "tflops"),
    ("18_bf16_pingpong_tma_store", "3001x2999x3003", "pct_of_cublas"),
    ("18_bf16_pingpong_tma_store", "4096x4096x1024", "tflops"),
}


def test_the_committed_calibration_sends_exactly_these_series_to_the_robust_rule():
    """Mutation 7: the exact set of series of calibration/h200.json with a robust prior (at
    1.7 only those at 1.78 and above in the comment above would be left)."""
    doc = json.loads((ROOT / "calibration" / "h200.json").read_text())
    cal = calibration.of_doc("h200", doc)
    assert len(cal.noise) == 158
    got = {key for key in cal.noise if cal.robust_prior(*key) is not None}
    assert got == ROBUST_SERIES
    assert {key for key in cal.noise if cal.heavy_tailed(*key)} == ROBUST_SERIES
