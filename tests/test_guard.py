"""The A/A control judges each comparison by its own reference's processes, and overtime takes
along what its rounds measure anyway (gemm.track.abrun.ABRun.guard, past_budget).

On GPU-44d39613 (2026-12-02, trial 12 of series A, docs/evidence.md) one process of 14 at 2048
read its TFLOPS some 5 % off while its % of cuBLAS held: the whole A/B was discarded for it and
its 24 comparisons, 15 of them past 1 %, ended UNRESOLVED. In trial 13, 07 at 2048 (% of cuBLAS)
went overtime and its TFLOPS, -0.89 % [-1.68, -0.09] from the same processes, was closed."""
from gemm.track import abreport, abtest, confirm, decision
from gemm.track.abrun import State, Stop
from gemm.track.gate import GateConfig, Row
from tests.test_carry import REAL_MOVED
from tests.test_plan import _cal, _fake, _rows


def test_a_move_in_one_series_discards_that_series_rounds_only(monkeypatch):
    """k1's reference reads 10 % high in its last process of round 1 (k2's does not): k1 is
    measured again from round 2 and ends SAME; k2, a true 3 % drop, keeps round 1 and is a DROP
    at round 2. A restart of the whole A/B would have taken a third round."""
    def level(tree, k, n):
        if tree == "c1":
            return 30.0 * (1.10 if k == "k1" and n == 2 else 1.0)
        return 30.0 * (0.97 if k == "k2" else 1.0)
    _, calls = _fake(monkeypatch, level)
    monkeypatch.setattr(confirm.ABRun, "moved", REAL_MOVED)
    rows = [Row(k, "4096", "tflops", 4, 30.0, 29.4, -0.02, 0.005, "drop?", reference="c1",
                min_effect=0.01) for k in ("k1", "k2")]
    logs: list = []
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(budget_s=1000.0), "NEW",
                       abtest.in_trees({"c1": "c1", "NEW": "NEW"}), logs.append, _cal(0.0005))
    ab.run()
    abreport.finish(ab)
    moved = [line for line in logs if "the A/A control moved" in line]
    assert len(moved) == 1 and "k1 at 4096" in moved[0] and "k2" not in moved[0]
    assert "of what it moved (1 comparison) are discarded" in moved[0]
    assert [c.since for c in ab.comps] == [1, 0]
    assert rows[1].verdict == "DROP" and len(rows[1].effects[0]["values"]["first"]) == 2
    assert rows[0].verdict == "noise" and len(rows[0].effects[0]["values"]["first"]) == 1
    assert ab.n == 2 and calls["NEW"] == 4        # a restart of the whole A/B: 6


def test_a_series_that_moves_twice_is_unresolved_and_the_rest_go_on(monkeypatch):
    """k1's reference jumps in rounds 1 and 2: k1 is UNRESOLVED (unstable, not carried); k2 is
    decided as if nothing happened."""
    def level(tree, k, n):
        if tree == "c1":
            return 30.0 * (1.10 if k == "k1" and n in (2, 4) else 1.0)
        return 30.0 * (0.97 if k == "k2" else 1.0)
    _fake(monkeypatch, level)
    monkeypatch.setattr(confirm.ABRun, "moved", REAL_MOVED)
    rows = _rows(2)
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(budget_s=1000.0), "NEW",
                       abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, _cal(0.0005))
    ab.run()
    abreport.finish(ab)
    assert rows[0].verdict == "UNRESOLVED" and rows[0].open[0]["stop"] == Stop.UNSTABLE
    assert "moved twice" in rows[0].note
    assert rows[1].verdict == "DROP"


def _ab_after_budget(overtime_s=60.0):
    """Two rounds done: k1 at 4096 on both metrics (% of cuBLAS -1.1 %, quiet; TFLOPS -0.3 %,
    noisy) and k2's TFLOPS (-0.3 %, noisy), each against c1."""
    rows = [Row(k, "4096", m, 4, 30.0, 29.7, -0.01, 0.005, "drop?", reference="c1",
                min_effect=0.01)
            for k, m in (("k1", "pct_of_cublas"), ("k1", "tflops"), ("k2", "tflops"))]
    cal = _cal(0.01)
    cal.prior = lambda k, s, m: decision.Noise(0.001 if m == "pct_of_cublas" else 0.01, 40)
    logs: list = []
    ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(overtime_s=overtime_s), "NEW",
                       None, logs.append, cal)
    quiet = ([[100.0, 100.05], [100.02, 99.98]], [[98.9, 98.95], [98.92, 98.88]])
    noisy = ([[30.0, 30.3], [29.7, 30.0]], [[29.9, 29.6], [30.1, 29.8]])
    for c, (refs, news) in zip(ab.comps, (quiet, noisy, noisy)):
        c.refs, c.news, c.ks = [list(p) for p in refs], [list(p) for p in news], [3, 3]
    ab.n = 2
    return ab, logs


def test_overtime_takes_along_the_other_metric_of_a_target_it_measures_anyway():
    """k1's % of cuBLAS is on course for a DROP and goes overtime; its TFLOPS, not on course
    itself, costs nothing more and stays open with it; k2's TFLOPS is closed at the budget."""
    ab, logs = _ab_after_budget()
    pct, tflops, other = ab.comps
    assert ab.on_course(pct) and not ab.on_course(tflops) and not ab.on_course(other)
    ab.past_budget()
    assert pct.state is State.OPEN and tflops.state is State.OPEN
    assert other.state is State.CLOSED and other.stop is Stop.BUDGET
    assert any("with it, measured anyway: k1 at 4096 (TFLOPS)" in line for line in logs)
    assert ab.choose(1e9)[:2] == [pct, tflops]
    ab, _ = _ab_after_budget(overtime_s=0.0)       # no overtime: nothing is taken along
    ab.past_budget()
    assert all(c.state is State.CLOSED for c in ab.comps)


def test_a_series_without_its_own_control_is_measured_again_only_if_it_was_measured():
    """k2 borrows its noise (no control of its own): when k1's control moves, k2 starts over
    if it has rounds here, and keeps its one restart if it has none yet."""
    rows = _rows(2)
    cal = _cal(0.0005)
    cal.borrowed = lambda k, s, m: k == "k2"
    for measured in (False, True):
        ab = confirm.ABRun([(r, "c1") for r in rows], GateConfig(), "NEW", None,
                           lambda s: None, cal)
        k1, k2 = ab.comps
        for c in (k1, k2) if measured else (k1,):
            c.refs, c.news, c.ks = [[30.0, 30.1]], [[29.0, 29.1]], [3]
        ab.n = 1
        ab.guard([(k1, "k1 moved")])
        assert (k1.since, k1.rounds) == (1, 0)
        assert (k2.since, k2.rounds) == ((1, 0) if measured else (0, 0))

