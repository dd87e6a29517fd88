"""The A/B keeps to its time budget (gemm.track.plan, gemm.track.confirm.ABRun.choose): a
round takes what fits in the time left, the most suspicious first; a comparison that joins
in a later round is paired with the new code's processes of its own rounds; the guess of a
round's cost before anything was measured here; measure's per-target wall times."""
import json
import math
from pathlib import Path
from types import SimpleNamespace

from gemm.core.policy import CONFIRM, SUITE
from gemm.track import abreport, abrun, abtest, confirm, decision, plan
from gemm.track.gate import GateConfig, Row


def _rows(n, reference="c1"):
    # k1 the furthest past its 0.5 % screen (-3 %), k6 the least (-2 %)
    return [Row(f"k{i}", "4096", "tflops", 4, 30.0, 30.0 * (1 - c), -c, 0.005, "drop?",
                reference=reference, min_effect=0.01)
            for i, c in enumerate([0.03 - 0.002 * j for j in range(n)], start=1)]


def _fake(monkeypatch, level, start_s=5.0, target_s=5.0, noise=0.0005):
    """Stand-ins on a fake clock: each arm's process takes start_s plus target_s per target
    and says so (walls); level(tree, kernel, calls of that tree) is what it measures."""
    now, calls = [0.0], {}

    def measure(tree, series, tasks=None, walls=None, **kw):
        calls[tree] = calls.get(tree, 0) + 1
        out, n = {}, 0
        for k, sizes in series.items():
            for sz in sizes:
                v = level(tree, k, calls[tree]) * math.exp(noise * ((calls[tree] * 7 + n) % 3 - 1))
                out.update({(k, sz, "tflops"): v, (k, sz, "pct_of_cublas"): 2 * v})
                if walls is not None:
                    walls[(k, sz)] = target_s
                n += 1
        if walls is not None:
            walls[None] = start_s
        now[0] += start_s + target_s * n
        return out
    monkeypatch.setattr(abtest, "measure", measure)
    monkeypatch.setattr(abrun, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(confirm.ABRun, "moved", lambda self: [])
    return now, calls


def _cal(noise):
    return SimpleNamespace(prior=lambda *a: decision.Noise(noise, 40),
                           robust_prior=lambda *a: None, borrowed=lambda *a: False)


def test_a_round_takes_what_fits_the_time_left_the_most_suspicious_first(monkeypatch):
    """Six flagged series, none slower (a GPU slower than the history's): each process costs
    5 s + 5 s a target, a round 4 x that. Guessed before (6 s + 6.25 s a target), round 1 fits
    k1-k4 (the furthest past their screen) in 145 s, and takes 100 s; learned then, round 2
    fits k5 in the 45 s left; k6 is UNRESOLVED, not measured, and says so; the A/B ends
    within its budget."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0)
    rows = _rows(6)
    logs = []
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(budget_s=145.0, overtime_s=60.0),
                       "NEW", abtest.in_trees({"c1": "c1", "NEW": "NEW"}), logs.append, _cal(0.0005))
    ab.run()
    abreport.finish(ab)
    assert [r.verdict for r in rows] == ["noise"] * 5 + ["UNRESOLVED"], [r.note for r in rows]
    assert rows[0].effects[0]["n_new"] == 2 and rows[4].effects[0]["n_new"] == 2
    assert "not measured: out of the A/B time budget (145 s)" in rows[5].note
    assert now[0] == 140.0 and calls["NEW"] == 4          # two rounds of R N N R
    assert any("1 of 6 comparisons not measured" in line for line in logs)
    firsts = [line for line in logs if "round 1/" in line]
    assert all("k4" in line and "k5" not in line for line in firsts) and len(firsts) == 4
    assert all("k5" in line and "k4" not in line for line in logs if "round 2/" in line)


def test_a_speed_up_the_ab_finds_is_improved_not_noise(monkeypatch):
    """A candidate the A/B finds 3 % faster (FASTER) is "improved", its note led by "faster"
    (not "confirmed": FASTER may rest on one round, a DROP may not); one it finds alike stays
    "noise" (throwaway 69ee0736b5 on the H200: 07 +3.6 % [+2.6, +4.6] was reported as noise)."""
    for cfg, rounds in ((GateConfig(budget_s=600.0), 1), (GateConfig(budget_s=600.0, min_rounds=2), 2)):
        _fake(monkeypatch, lambda tree, k, n: 30.9 if tree == "NEW" and k == "k1" else 30.0)
        rows = _rows(2)
        ab = confirm.ABRun([(r, "c1") for r in rows], cfg, "NEW",
                           abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None,
                           _cal(0.0005))
        ab.run()
        abreport.finish(ab)
        assert [r.verdict for r in rows] == ["improved", "noise"], [r.note for r in rows]
        assert rows[0].note.startswith("faster: ") and "FASTER" in rows[0].note
        assert rows[0].effects[0]["n_new"] == 2 * rounds
        assert rows[1].note.startswith("not confirmed: ")


def test_the_first_round_takes_one_comparison_whatever_the_budget(monkeypatch):
    """A budget too short for any round: the first round still measures the most suspicious
    comparison (its other metric comes free: same target, same arms); the rest wait, and no
    second round starts."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0)
    rows = _rows(3)
    pct = Row("k1", "4096", "pct_of_cublas", 4, 60.0, 58.5, -0.025, 0.005, "drop?",
              reference="c1", min_effect=0.01)
    ab = confirm.ABRun([(r, "c1") for r in rows] + [(pct, "c1")],
                       GateConfig(budget_s=1.0, overtime_s=0.0), "NEW",
                       abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, _cal(0.0005))
    ab.run()
    abreport.finish(ab)
    assert rows[0].verdict == "noise" and pct.verdict == "noise"
    assert [r.verdict for r in rows[1:]] == ["UNRESOLVED"] * 2 and calls["NEW"] == 2


def test_past_the_budget_only_what_is_on_course_goes_on(monkeypatch):
    """A 2 % drop beside an unchanged series, both measured in round 1 (60 s of an 80-s
    budget), neither decided on this noise: no second round fits, so the unchanged one is
    closed at the budget and the drop, on course, goes on alone (overtime) to its DROP in
    rounds that fit in the overtime."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0 * (0.98 if tree == "NEW" and
                                                                k == "k2" else 1.0),
                       noise=0.006)
    rows = _rows(2)
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(budget_s=80.0, overtime_s=120.0),
                       "NEW", abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, _cal(0.006))
    ab.run()
    abreport.finish(ab)
    assert rows[1].verdict == "DROP" and rows[1].effects[0]["overtime"], rows[1].note
    assert rows[1].effects[0]["n_new"] > 2
    assert "out of the A/B time budget (80 s) after 1 rounds" in rows[0].note, rows[0].note
    assert now[0] <= 80.0 + 120.0


def test_a_comparison_that_joins_later_is_paired_with_its_own_rounds(monkeypatch):
    """A row compared with c1 from round 1 and with c2 from round 2 only: c2's comparison
    pairs its one reference round with the new code's processes of round 2, not of round 1
    (the new code measured 3 % slow in round 1 only)."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0 * (0.97 if tree == "NEW" and n <= 2
                                                                else 1.0))
    row = _rows(1)[0]
    ab = confirm.ABRun([(row, "c1"), (row, "c2")], GateConfig(), "NEW",
                       abtest.in_trees({"c1": "c1", "c2": "c2", "NEW": "NEW"}), lambda s: None, _cal(0.0005))
    c1, c2 = ab.comps
    ab.measure_round(1, [c1])
    ab.measure_round(2, [c1, c2])
    late, early = ab.effect(c2), ab.effect(c1)
    assert late.n_new == 2 and late.n_ref == 2 and abs(late.change) < 0.002
    assert early.n_new == 4 and early.change < -0.01
    assert len(c2.refs) == len(c2.news) == 1 and c2.ks == [3]   # R1 R2 N N R2 R1: R2 3 apart


def test_what_a_round_costs_before_anything_was_measured():
    """The guess from the record's speeds and a policy's stop rule: the H200's record spent
    1.9 s on 02_coalesced at 8192 (0.196 s a launch, cuBLAS 0.0216 s) and 0.27 s on a kernel
    of a few ms at 4096; CONFIRM's five operand sets cost more than SUITE's one. TFLOPS and %
    of cuBLAS give the launch times."""
    slow = plan.guess_target_s(0.196, 0.0216, SUITE)
    assert 1.9 * 0.85 < slow < 1.9 * 1.25
    assert 0.2 < plan.guess_target_s(0.0033, 0.0027, SUITE) < 0.4
    assert plan.guess_target_s(0.0033, 0.0027, CONFIRM) > 2 * plan.guess_target_s(
        0.0033, 0.0027, SUITE)
    rows = [Row("k", "4096", "tflops", 4, 42.0, 41.2, 0, 0.005, "ok"),
            Row("k", "4096", "pct_of_cublas", 4, 83.0, 82.4, 0, 0.005, "ok")]
    (launch, base), = plan.speeds(rows).values()
    assert math.isclose(launch, 2 * 4096 ** 3 / 41.2e12) and math.isclose(base, launch * 0.824)
    costs = plan.Costs(plan.speeds(rows))
    guessed = costs.round_s({"c1": {("k", "4096")}, "NEW": {("k", "4096")}})
    costs.learn("c1", {("k", "4096"): 2.0, None: 3.0})
    assert costs.round_s({"c1": {("k", "4096")}, "NEW": {("k", "4096")}}) == 2 * 2 * (3 + 2)
    assert math.isclose(guessed, 2 * 2 * (plan.START_S + plan.MARGIN * plan.guess_target_s(
        launch, base)))


def test_measure_reports_each_targets_seconds_and_the_rest(tmp_path, monkeypatch):
    """abtest.measure(walls=): each asked-for target's records' opening, checking and timing;
    the process's other seconds (start-up) under None; records not asked for count there.
    Opening seconds come by phase (a dict: the H200's first A/B at 7e8ca50 broke off on
    that, its walls read as numbers); what it cannot read never fails the arm."""
    tree = tmp_path / "t"
    (tree / "gemm" / "cli").mkdir(parents=True)
    (tree / "gemm" / "cli" / "main.py").write_text('me.add_argument("--task")\n')
    clock = iter([100.0, 110.0])
    monkeypatch.setattr(abtest, "time", SimpleNamespace(monotonic=lambda: next(clock)))

    def fake_run(t, args, timeout, env=None):
        Path(args[args.index("--json") + 1]).write_text(json.dumps({
            "values": [{"kernel": "k1", "size": "8192", "status": "ok",
                        "metrics": {"tflops": 1.0}}],
            "records": [{"kernel": "k1", "size": "8192", "role": "kernel",
                         "wall": {"open_s": {"kernel_load": 0.25, "baseline": 0.25},
                                 "check_s": 1.0, "time_s": 4.0}},
                        {"kernel": "cublas_fp32", "size": "8192", "role": "baseline",
                         "wall": {"check_s": 1.0, "time_s": 1.0}}]}))
        return SimpleNamespace(returncode=0, stderr="")
    monkeypatch.setattr(abtest, "_run", fake_run)
    walls = {}
    abtest.measure(tree, {"k1": ["8192"]}, walls=walls)
    assert walls == {("k1", "8192"): 5.5, None: 4.5}
    odd = {}
    abtest._walls({"records": [{"kernel": "k1", "size": "8192", "wall": {"time_s": "x"}},
                               {"kernel": "k1", "size": "8192", "wall": None}, 7]},
                  {"k1": ["8192"]}, 3.0, odd)
    assert odd == {("k1", "8192"): 0.0, None: 3.0}


def test_overtime_only_where_a_drop_can_still_be_reached():
    """decision.reachable: a -2.4 % estimate after one round with a half-width of 7 % (a
    tensor-core TFLOPS series of ~1 % noise on the H200) cannot become a DROP by round 8; a
    -1.2 % one with a half-width of 1 % can; an interval without bounds cannot."""
    lg = math.log1p

    def eff(change, hw, n_new=2):
        d = lg(change)
        return decision.Effect(d, d - hw, d + hw, 0.01, 20, n_new, n_new, decision.AMBIGUOUS)
    assert not decision.reachable(eff(-0.024, 0.07), 0.01, 8)
    assert decision.reachable(eff(-0.012, 0.01), 0.01, 8)
    assert not decision.reachable(eff(-0.012, 0.01, n_new=16), 0.01, 8)   # at the cap
    inf = decision.Effect(lg(-0.02), -math.inf, math.inf, math.nan, 0, 2, 2, decision.AMBIGUOUS)
    assert not decision.reachable(inf, 0.01, 8)


def test_reachable_counts_the_dof_the_rounds_to_the_cap_add():
    """Trial 10 (docs/evidence.md): 05 at 8192, % of cuBLAS, a true 1.4 % drop, fell back to
    Welch and read -1.28 % [-5.79, +3.45] after 2 rounds, sd 0.184 % over 4 vs 4 processes, 4
    dof (truncated) at a 24-comparison family's quantile. With at least the 6 dof the rounds to
    the cap add (t about 9.5) its standard error, halved, projects the interval's top to about
    -0.7 %: a DROP is reachable. Scaling the width alone (the quantile of 4 dof kept) says
    +1.0 %: it was closed without overtime. The estimate decides too: -0.3 % at the same width
    is not on course."""
    lg = math.log1p
    family = decision.family_size(24, 1, 8)

    def eff(change, lo, hi, dof=4, n_new=4, rule=decision.Rule.WELCH):
        return decision.Effect(lg(change), lg(lo), lg(hi), 0.0018377, dof, n_new, n_new,
                               decision.AMBIGUOUS, rule)
    assert decision.reachable(eff(-0.0128, -0.0579, 0.0345), 0.01, 8, 1e-3, family)
    assert not decision.reachable(eff(-0.003, -0.048, 0.044), 0.01, 8, 1e-3, family)
    # many dof already (a calibrated prior): the quantile barely moves, the width decides
    assert not decision.reachable(eff(-0.0075, -0.0144, -0.0005, dof=69, rule=decision.Rule.MEAN),
                                  0.01, 8, 1e-3, family)


def test_the_ab_projects_with_its_own_level_and_family():
    """ABRun.reachable hands decision.reachable the level and family its intervals are built
    with: a mean-rule interval of 4 dof at the family of 24 comparisons (standard error 0.15 %),
    -1.5 % [-7.1, +4.4], projects past the margin by the cap with that family's quantile, and
    not with one comparison's (the standard error then read 4.5 times too large)."""
    from gemm.track import confirm
    rows = [Row(f"k{i}", "4096", "tflops", 5, 30.0, 29.5, -0.017, 0.005, "drop?",
                min_effect=0.01) for i in range(24)]
    ab = confirm.ABRun([(r, "a" * 40) for r in rows], GateConfig(), "b" * 40, {}, print, None)
    assert ab.family == decision.family_size(24, 1, 8)
    d = math.log1p(-0.015)
    hw = decision._t(ab.cfg.alpha, ab.family, 4) * 0.0015
    e = decision.Effect(d, d - hw, d + hw, 0.002, 4, 4, 4, decision.AMBIGUOUS)
    assert ab.reachable(ab.comps[0], e)
    assert not decision.reachable(e, 0.01, 8, ab.cfg.alpha, 1)


def test_unmeasured_comparisons_go_by_their_drop_over_their_noise(monkeypatch):
    """Of two series never measured, a -1 % drop of a series of 0.1 % noise (2 screens past)
    goes before a -1.5 % drop of one of 1 % noise (3 screens past, 1.5 noise sds)."""
    _fake(monkeypatch, lambda tree, k, n: 30.0)
    quiet = Row("q", "4096", "tflops", 4, 30.0, 29.7, -0.01, 0.005, "drop?", reference="c1",
                min_effect=0.01)
    noisy = Row("n", "4096", "tflops", 4, 30.0, 29.55, -0.015, 0.005, "drop?", reference="c1",
                min_effect=0.01)
    cal = SimpleNamespace(prior=lambda k, s, m: decision.Noise(0.001 if k == "q" else 0.01, 40),
                          robust_prior=lambda *a: None, borrowed=lambda *a: False)
    ab = confirm.ABRun([(noisy, "c1"), (quiet, "c1")], GateConfig(), "NEW",
                       abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, cal)
    assert sorted(ab.comps, key=ab.priority) == ab.comps[::-1]
    assert ab.priority(ab.comps[1]) < ab.priority(ab.comps[0])


def test_a_comparison_is_paired_by_round_whatever_rounds_it_missed(monkeypatch):
    """Measured in rounds 1 and 3 but not 2 (the new code 3 % slow in round 2 only, for the
    other comparison of its row): its two rounds pair with the new code's rounds 1 and 3."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0 * (0.97 if tree == "NEW" and
                                                                n in (3, 4) else 1.0))
    row = _rows(1)[0]
    ab = confirm.ABRun([(row, "c1"), (row, "c2")], GateConfig(), "NEW",
                       abtest.in_trees({"c1": "c1", "c2": "c2", "NEW": "NEW"}), lambda s: None, _cal(0.0005))
    c1, c2 = ab.comps
    ab.measure_round(1, [c1, c2])
    ab.measure_round(2, [c1])
    ab.measure_round(3, [c1, c2])
    skipped, every = ab.effect(c2), ab.effect(c1)
    assert skipped.n_new == 4 and abs(skipped.change) < 0.002
    assert every.n_new == 6 and every.change < -0.005


def test_a_reference_that_reports_nothing_for_a_series_is_closed_not_measured_again(monkeypatch):
    """The reference's measurement lacks k2 (a size it spells otherwise, say): k2's comparison
    is UNRESOLVED at once, said why, and the later rounds leave it out."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0, noise=0.004)
    measure = confirm.abtest.measure

    def lacking(tree, series, **kw):
        got = measure(tree, series, **kw)
        return {k: v for k, v in got.items() if not (tree == "c1" and k[0] == "k2")}
    monkeypatch.setattr(confirm.abtest, "measure", lacking)
    rows = _rows(2)
    logs = []
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(budget_s=1000.0), "NEW",
                       abtest.in_trees({"c1": "c1", "NEW": "NEW"}), logs.append, _cal(0.004))
    ab.run()
    abreport.finish(ab)
    assert rows[1].verdict == "UNRESOLVED"
    assert "the reference c1's measurement here reported nothing for it" in rows[1].note
    assert sum("k2" in line for line in logs) == 4       # round 1 only
    assert rows[0].verdict in ("noise", "UNRESOLVED") and "reported nothing" not in rows[0].note


def test_only_what_overtime_measured_says_overtime(monkeypatch):
    """Two 2 % drops on course when the 80-s budget is spent; the 30 s of overtime have room
    for one more round of one of them: only that one is marked as measured past the budget,
    the other is closed out of the overtime, not marked."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0 * (0.98 if tree == "NEW" else 1.0),
                       noise=0.006)
    rows = _rows(2)
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(budget_s=80.0, overtime_s=30.0),
                       "NEW", abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, _cal(0.006))
    ab.run()
    abreport.finish(ab)
    flags = [r.effects[0]["overtime"] for r in rows]
    assert sorted(flags) == [False, True], [r.note for r in rows]
    other = rows[flags.index(False)]
    assert "(overtime: measured past" not in other.note
    assert "out of the A/B's overtime" in other.note


def test_at_the_round_cap_what_was_never_measured_says_so(monkeypatch):
    """--max-rounds 1 with room for four of six comparisons: the two never measured are
    UNRESOLVED as not measured, not as still ambiguous."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0, noise=0.004)
    rows = _rows(6)
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(budget_s=145.0, max_rounds=1),
                       "NEW", abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, _cal(0.004))
    ab.run()
    abreport.finish(ab)
    assert all("not measured" in r.note and "still ambiguous" not in r.note for r in rows[4:])
    assert not any("not measured" in r.note for r in rows[:4])


def _borrowed(noise):
    """A calibration that lends every series another's noise (its dof are the run's own)."""
    return SimpleNamespace(prior=lambda *a: decision.Noise(noise, 40, borrowed=True),
                           robust_prior=lambda *a: None, borrowed=lambda *a: True)


def test_a_fresh_drop_past_its_minimum_effect_goes_before_the_carried(monkeypatch):
    """ccdb051's A/B: 76 series carried UNRESOLVED at about 0 % took its 46 s while 04 at
    3001x2999x3003, 40 % slower on the screen, was never measured. Here, with a budget that
    fits no round (the first round takes one, the overtime the drop's second), the -40 % one
    is measured and is a DROP; the carried one at 0 % waits (UNRESOLVED, not measured); a
    carried one still goes before an ordinary candidate."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0 * (0.6 if tree == "NEW" and
                                                                k == "k9" else 1.0))
    carried = Row("k1", "4096", "tflops", 4, 30.0, 30.0, 0.0, 0.005, "drop?", reference="c1",
                  min_effect=0.01)
    carried.carried = ["c0"]
    fresh = Row("k9", "4096", "tflops", 4, 30.0, 18.0, -0.4, 0.005, "drop?", reference="c1",
                min_effect=0.01)
    plain = Row("k2", "4096", "tflops", 4, 30.0, 29.5, -0.006, 0.005, "drop?", reference="c1",
                min_effect=0.01)
    comps = [(carried, "c1"), (plain, "c1"), (fresh, "c1")]
    ab = confirm.ABRun(comps, GateConfig(budget_s=1.0, overtime_s=90.0), "NEW",
                       abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, _cal(0.0005))
    assert sorted(ab.comps, key=ab.priority) == [ab.comps[i] for i in (2, 0, 1)]
    ab.run()
    abreport.finish(ab)
    assert fresh.verdict == "DROP", fresh.note
    assert carried.verdict == "UNRESOLVED" and "not measured" in carried.note


def test_a_comparison_one_round_cannot_decide_is_finished_before_new_ones_start(monkeypatch):
    """Borrowed noise (the run's own dof): after one round the interval is unbounded, so it
    goes on before an unmeasured candidate, and a round takes a comparison only where the
    rounds it still needs fit (5aca64f, b18d38c: every comparison one round, none decided):
    those that give RUN_DOF (4) dof, three with a borrowed prior (two leave 2 dof and a t
    quantile over 100), five with none; and only where the round cap leaves them."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0)
    rows = _rows(2)
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(), "NEW",
                       abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, _borrowed(0.0005))
    k1, k2 = ab.comps
    ab.measure_round(1, [k2])
    assert not math.isfinite(ab.effect(k2).hi)
    assert sorted(ab.comps, key=ab.priority) == [k2, k1]    # the started one first
    assert ab.needs(k1) == 3 and abrun.RUN_DOF == 4          # borrowed: 2 + 2 dof
    ab.costs.start, ab.costs.target = {"c1": 5.0, "NEW": 5.0}, {}
    one = 4 * (5.0 + 5.0)                                    # a round of one target
    ab.costs.target = {(a, ("k1", "4096")): 5.0 for a in ("c1", "NEW")}
    ab.costs.target.update({(a, ("k2", "4096")): 5.0 for a in ("c1", "NEW")})
    assert ab.choose(one) == []                              # it needs two more
    assert ab.choose(2 * one) == [k2]                        # its last two; k1 would need three
    assert ab.choose(3 * 4 * (5.0 + 10.0)) == [k2, k1]
    capped = confirm.ABRun([(r, "c1") for r in rows], GateConfig(max_rounds=2), "NEW", {},
                           lambda s: None, _borrowed(0.0005))
    assert capped.needs(capped.comps[0]) == 2                # no more than the cap
    none = confirm.ABRun([(r, "c1") for r in rows], GateConfig(), "NEW", {}, lambda s: None,
                         None)
    assert none.needs(none.comps[0]) == 5                    # no prior: r - 1 dof
    assert none.comps[0] in none.choose(1e9)
    none.n = 4                                               # round 5 of 8 next: too late
    assert none.choose(1e9) == []
    own = confirm.ABRun([(r, "c1") for r in rows], GateConfig(), "NEW", {}, lambda s: None,
                        _cal(0.0005))
    assert own.needs(own.comps[0]) == 1                      # its own noise: one round may do


def test_a_fresh_drop_with_borrowed_noise_goes_on_past_the_budget_to_its_drop(monkeypatch):
    """The same -40 % drop with borrowed noise (04 at 3001x2999x3003's prior is borrowed):
    after one round its interval is unbounded, so no rule of the cap can call it on course;
    its estimate past -m keeps it in the overtime until it is a DROP."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0 * (0.6 if tree == "NEW" and
                                                                k == "k9" else 1.0))
    fresh = Row("k9", "4096", "tflops", 4, 30.0, 18.0, -0.4, 0.005, "drop?", reference="c1",
                min_effect=0.01)
    flat = Row("k1", "4096", "tflops", 4, 30.0, 30.0, 0.0, 0.005, "drop?", reference="c1",
               min_effect=0.01)
    ab = confirm.ABRun([(fresh, "c1"), (flat, "c1")], GateConfig(budget_s=1.0, overtime_s=130.0),
                       "NEW", abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None,
                       _borrowed(0.0005))
    ab.run()
    abreport.finish(ab)
    assert fresh.verdict == "DROP", fresh.note
    assert fresh.effects[0]["overtime"] and fresh.effects[0]["n_new"] >= 4   # 2 rounds or more
    assert flat.verdict == "UNRESOLVED"


def test_a_carried_series_ranks_by_its_kept_rounds(monkeypatch):
    """Two carried series, kept rounds against the anchor at -5 % and at 0 %: the one whose
    kept evidence is past its minimum effect goes with the likeliest DROPs."""
    _fake(monkeypatch, lambda tree, k, n: 30.0)
    rows = []
    for k, kept in (("k1", 28.5), ("k2", 30.0)):
        r = Row(k, "4096", "tflops", 4, 30.0, 30.0, 0.0, 0.005, "drop?", reference="c1",
                anchor="anc", anchor_change=0.0, min_effect=0.01)
        r.carried = ["c0"]
        r.carried_rounds = {"anc": {"first": [30.0], "last": [30.0], "new": [kept, kept],
                                    "k": [3]}}
        rows.append(r)
    ab = confirm.ABRun([(r, "anc") for r in rows], GateConfig(), "NEW", {}, lambda s: None,
                       _cal(0.0005))
    assert [ab.priority(c)[0] for c in ab.comps] == [1, 2]


def test_a_flood_with_borrowed_noise_still_catches_a_big_drop():
    """ci/probes/flood_sim.py on ccdb051's report (253 comparisons over 197 series, most
    with borrowed noise: docs/probes) at the per-commit budget: the two rows of 04 at
    3001x2999x3003, 40 % slower, are DROPs, and nothing else is. While such a comparison
    started where two rounds fit (2 dof: t about 2000 at a flood's Bonferroni level), every
    interval was too wide to decide and neither was, in 5 of 5 replays (seeds 1-5)."""
    import importlib.util
    import random
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("flood_sim", root / "ci/probes/flood_sim.py")
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    from gemm.track import calibration
    doc = json.loads((root / "calibration" / "h200.json").read_text())
    made = __import__("calendar").timegm(__import__("time").strptime(doc["date"],
                                                                    "%Y-%m-%dT%H:%M:%SZ"))
    cal, why = calibration.load(root / "calibration", "h200", now=made)
    assert cal is not None, why
    report = json.loads((root / "docs/probes/h200-ccdb051-regress.json").read_text())
    got = sim.simulate(abrun, sim.fresh(sim.comparisons(report)), cal, 180.0, random.Random(2))
    assert got["big drops"] == 2 and got["big drops DROP"] == 2, got
    assert got["DROP"] == 2, got                        # and nothing else


def test_a_cold_arm_first_process_builds_its_kernels(monkeypatch):
    """Before any process of it was timed, a reference arm's round costs COMPILE_S per kernel
    more (its first process builds them with nvcc; the new code's were built by the record;
    about 3 s a kernel on the H200). Once an arm's process is timed, its walls hold what it
    cost."""
    monkeypatch.setattr(plan, "COMPILE_S", 30.0)   # any positive guess
    costs = plan.Costs({}, warm={"NEW"})
    arms = {"ref": {("k1", "4096"), ("k1", "8192"), ("k2", "4096")},
            "NEW": {("k1", "4096"), ("k1", "8192"), ("k2", "4096")}}
    warm = plan.Costs({}, warm={"NEW", "ref"}).round_s(arms)
    assert costs.round_s(arms) == warm + 2 * 30.0        # two kernels, built once
    costs.learn("ref", {None: 5.0, ("k1", "4096"): 1.0})
    assert costs.compile_s("ref", arms["ref"]) == 0.0
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0)
    rows = _rows(6)
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(budget_s=145.0, overtime_s=60.0),
                       "NEW", abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None,
                       _cal(0.0005))
    assert len(ab.choose(145.0, first=True)) == 2          # 4 without the builds' guess


def test_a_calibration_trial_guesses_no_builds_for_its_reference(monkeypatch):
    """A detection trial's two arms are this tree's code (one slowed by the hook): its
    reference is built already, so its first round is planned without COMPILE_S."""
    from gemm.calibrate import runner
    monkeypatch.setattr(plan, "COMPILE_S", 30.0)   # any positive guess
    seen = []
    real = abrun.ABRun.__init__

    def spy(self, *a, **k):
        real(self, *a, **k)
        seen.append(self.costs.warm)
    monkeypatch.setattr(abrun.ABRun, "__init__", spy)
    monkeypatch.setattr(runner.ABRun, "run", lambda self: None)
    cal = SimpleNamespace(doc={"noise": []}, prior=lambda *a: decision.Noise(0.003, 20),
                          robust_prior=lambda *a: None, borrowed=lambda *a: False)
    runner.trial(".", ["09"], ["4096"], [0.01], GateConfig(), cal, lambda s: None)
    assert seen and seen[0] == {"+1 %", runner.REFERENCE}
