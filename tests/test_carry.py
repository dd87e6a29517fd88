"""UNRESOLVED is never a silent pass (gemm.track.confirm): a large series UNRESOLVED at the
commits just before is a candidate again, measured first, with the rounds kept against the
anchor where the code is the same; it fails the gate once UNRESOLVED at three commits running."""
import math
from types import SimpleNamespace

import pytest

from gemm.track import codeid
from gemm.store import verdicts
from gemm.track import abreport, abrun, abtest, confirm
from gemm.track.gate import GateConfig, Row, Verdict, failed
from tests.test_layers import imported_modules
from tests.test_plan import _cal, _fake

KEY = ("09_cp_async_pipeline", "4096", "tflops")
REAL_MOVED = confirm.ABRun.moved     # tests.test_plan._fake stubs it out


def _row(verdict=Verdict.OK, change=0.0):
    return Row(*KEY, 10, 30.0, 30.0 * (1 + change), change, 0.005, verdict, reference="c3",
               anchor="anc", anchor_change=change, min_effect=0.01)


def _keep(root, commit, verdict, values=None, carry_ok=True):
    effects = ([{"against": "anc", "verdict": verdict, "values": values, "carry": carry_ok}]
               if values else [])
    verdicts.save(root, "h200", commit, [{"kernel": KEY[0], "size": KEY[1], "metric": KEY[2],
                                          "verdict": verdict, "effects": effects}])


def test_unresolved_at_the_commits_before_is_a_candidate_and_fails_at_three(tmp_path):
    runs = [SimpleNamespace(commit=c) for c in ("c1", "c2", "c3")]
    _keep(tmp_path, "c1", "noise")
    _keep(tmp_path, "c2", "UNRESOLVED")
    _keep(tmp_path, "c3", "UNRESOLVED")
    r = _row()
    assert confirm.carry([r], tmp_path, "h200", runs) == [r]
    assert r.carried == ["c3", "c2"] and r.verdict == Verdict.CANDIDATE   # c1 ends the run
    assert "UNRESOLVED at 2 commit(s) before" in r.note
    r.verdict = Verdict.UNRESOLVED
    assert failed([r], GateConfig()) == [r]                       # the third commit running
    assert failed([r], GateConfig(carry_commits=4)) == []
    r.carried = ["c3"]
    assert failed([r], GateConfig()) == []
    small = Row("09_cp_async_pipeline", "512", "tflops", 10, 30.0, 30.0, 0.0, 0.025, Verdict.OK)
    assert confirm.carry([small], tmp_path, "h200", runs) == []     # large series only


def test_the_kept_rounds_against_the_anchor_come_with_it_where_the_code_is_the_same(
        tmp_path, monkeypatch):
    runs = [SimpleNamespace(commit="c3")]
    kept = {"first": [30.0], "last": [30.0], "new": [29.4, 29.4], "k": [3]}
    _keep(tmp_path, "c3", "UNRESOLVED", kept)
    r = _row()
    confirm.carry([r], tmp_path, "h200", runs)
    monkeypatch.setattr(confirm, "same_code", lambda *a: True)
    _keep(tmp_path, "c3", "UNRESOLVED", kept, carry_ok=False)      # rounds the A/A rejected
    assert confirm.evidence([r], tmp_path, "h200", ".", "new") == 0
    _keep(tmp_path, "c3", "UNRESOLVED", {**kept, "k": [None]})      # an incomplete round
    assert confirm.evidence([r], tmp_path, "h200", ".", "new") == 0
    _keep(tmp_path, "c3", "UNRESOLVED", kept)
    monkeypatch.setattr(confirm, "same_code", lambda *a: False)
    assert confirm.evidence([r], tmp_path, "h200", ".", "new") == 0 and not r.carried_rounds
    monkeypatch.setattr(confirm, "same_code", lambda *a: True)
    assert confirm.evidence([r], tmp_path, "h200", ".", "new") == 1
    assert r.carried_rounds == {"anc": kept}
    ab = confirm.ABRun([(r, "anc")], GateConfig(), "new", {}, print, None)
    c = ab.comps[0]                   # before any round here: the kept round
    assert (c.refs, c.news, c.ks, c.kept) == ([[30.0, 30.0]], [[29.4, 29.4]], [3], 1)
    assert ab.priority(c)[0] == 1     # its kept rounds (-2 %) past its minimum effect: with
                                      # the likeliest DROPs, before the other unmeasured


def test_one_round_here_with_the_kept_round_makes_a_drop(monkeypatch):
    """A kept round and one round here are two rounds: the DROP the second commit's budget
    alone could not make (a DROP needs two rounds)."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 29.4 if tree == "new-tree" else 30.0)
    r = _row(Verdict.CANDIDATE, -0.02)
    r.carried, r.carried_rounds = ["c3"], {"anc": {"first": [30.0], "last": [30.0],
                                                   "new": [29.4, 29.4], "k": [3]}}
    ab = confirm.ABRun([(r, "anc")], GateConfig(max_rounds=2), "new",
                       abtest.in_trees({"anc": "anc-tree", "new": "new-tree"}), lambda s: None, _cal(0.002))
    ab.run()
    abreport.finish(ab)
    e = r.effects[0]
    assert r.verdict == Verdict.DROP and e["n_new"] == 4 and calls["new-tree"] == 2
    assert math.isclose(e["change"], 29.4 / 30.0 - 1, rel_tol=1e-3)
    assert "rounds kept at c3" in r.note
    fresh = _row(Verdict.CANDIDATE, -0.02)                             # no kept round: one round
    ab = confirm.ABRun([(fresh, "anc")], GateConfig(max_rounds=2), "new",
                       abtest.in_trees({"anc": "anc-tree", "new": "new-tree"}), lambda s: None, _cal(0.002))
    ab.run()
    abreport.finish(ab)
    assert fresh.effects[0]["n_new"] == 4                              # it needed two here


def test_same_code_reads_the_kernels_and_the_measuring_layers_from_git():
    import subprocess
    known = subprocess.run(["git", "cat-file", "-e", "2a9123c^{commit}"], capture_output=True)
    if known.returncode:
        pytest.skip("the recorded commits are not in this clone (shallow?)")
    # 2a9123c recorded results only; 6461483 changed 09's source; 67d74d0..9a3947d, gemm/core;
    # 89851f8 changed 04's source alone
    assert codeid.same_code(".", "2a9123c~1", "2a9123c", "14_bf16_wgmma_tma")
    assert codeid.same_code(".", "89851f8~1", "89851f8", "14_bf16_wgmma_tma")
    assert not codeid.same_code(".", "89851f8~1", "89851f8", "04_1d_blocktiling")
    assert not codeid.same_code(".", "6461483~1", "6461483", "09_cp_async_pipeline")
    assert not codeid.same_code(".", "67d74d06de", "9a3947daea", "14_bf16_wgmma_tma")
    assert not codeid.same_code(".", "2a9123c~1", "2a9123c", "no_such_kernel")
    # f96874f..56bd6d3 changed gemm/core/git.py alone of what lies under MEASURED_BY
    assert codeid.same_code(".", "f96874f", "56bd6d3", "18_bf16_pingpong_tma_store")


def test_no_measured_module_imports_what_measured_by_leaves_out():
    """MEASURED_BY leaves gemm/core/git.py out: no module under it imports the file, and the
    worker that compiles, launches and times never loads it (the CLI's entry does, through the
    gate's commands, which only the gate and gemm explain run); else a change there would be
    a change the gate calls the same code."""
    import subprocess
    import sys
    loaded = subprocess.run([sys.executable, "-c", "import sys, gemm.measure.worker; "
                             "print('gemm.core.git' in sys.modules)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "False"
    from pathlib import Path
    root = Path(codeid.__file__).resolve().parents[2]
    left_out = {p.split(")", 1)[1] for p in codeid.MEASURED_BY if p.startswith(":(exclude)")}
    assert left_out == {"gemm/core/git.py"}
    modules = {str(f.relative_to(root).with_suffix("")).replace("/", ".")
               for f in map(root.joinpath, left_out)}
    files = [f for p in codeid.MEASURED_BY if not p.startswith(":")
             for f in ([root / p] if p.endswith(".py") else sorted((root / p).rglob("*.py")))
             if str(f.relative_to(root)) not in left_out]
    assert len(files) > 20
    for f in files:
        names = imported_modules(f)
        assert not names & modules, f"{f.relative_to(root)} imports {names & modules}"


def test_a_commit_recorded_twice_counts_once(tmp_path):
    _keep(tmp_path, "c3", "UNRESOLVED")
    runs = [SimpleNamespace(commit="c2"), SimpleNamespace(commit="c3"), SimpleNamespace(commit="c3")]
    assert confirm.unresolved_before(tmp_path, "h200", runs, KEY) == ["c3"]


def test_kept_rounds_alone_decide_nothing_and_the_guard_judges_only_rounds_here(monkeypatch):
    """Kept rounds with an A/A step in them (another GPU's) neither decide the comparison
    before a round here nor make this run's A/A control call the GPU unstable."""
    now, calls = _fake(monkeypatch, lambda tree, k, n: 30.0)
    monkeypatch.setattr(confirm.ABRun, "moved", REAL_MOVED)   # the real A/A control
    r = _row(Verdict.CANDIDATE, -0.02)
    r.carried, r.carried_rounds = ["c3"], {"anc": {"first": [30.0, 30.0], "last": [27.6, 27.6],
                                                   "new": [27.0, 27.0, 27.0, 27.0], "k": [3, 3]}}
    ab = confirm.ABRun([(r, "anc")], GateConfig(max_rounds=2), "new",
                       abtest.in_trees({"anc": "anc-tree", "new": "new-tree"}), lambda s: None, _cal(0.002))
    ab.decide_round()
    assert ab.comps[0].state is abrun.State.OPEN       # nothing measured here yet
    ab.run()
    abreport.finish(ab)
    assert "unstable" not in r.note and calls["new-tree"] >= 2


def test_without_a_gpu_a_row_carried_only_stays_unresolved(tmp_path):
    runs = [SimpleNamespace(commit="c3")]
    _keep(tmp_path, "c3", "UNRESOLVED")
    r = _row()                                         # within its screen today
    confirm.carry([r], tmp_path, "h200", runs)
    confirm.decide([r], GateConfig(), "new", probe=lambda: (False, "no GPU here"))
    assert r.verdict == Verdict.UNRESOLVED and not r.unconfirmed
    assert failed([r], GateConfig()) == []             # 2 commits running
    flagged = _row(change=-0.02)                       # flagged by the screen as well
    confirm.carry([flagged], tmp_path, "h200", runs)
    confirm.decide([flagged], GateConfig(), "new", probe=lambda: (False, "no GPU here"))
    assert flagged.verdict == Verdict.DROP and flagged.unconfirmed


def test_moving_the_anchor_accepts_what_was_left_open_at_it_and_before(tmp_path):
    """An anchor moved to c2 (a reviewed commit that accepts the speed recorded there) ends
    the carry: UNRESOLVED at c2 or before is no longer asked; after it, it still is."""
    runs = [SimpleNamespace(commit=c) for c in ("c1", "c2", "c3")]
    for c in ("c1", "c2", "c3"):
        _keep(tmp_path, c, "UNRESOLVED")
    assert confirm.unresolved_before(tmp_path, "h200", runs, KEY) == ["c3", "c2", "c1"]
    assert confirm.unresolved_before(tmp_path, "h200", runs, KEY, anchor="c2") == ["c3"]
    assert confirm.unresolved_before(tmp_path, "h200", runs, KEY, anchor="c3") == []
    r = _row()
    assert confirm.carry([r], tmp_path, "h200", runs, anchor="c3") == [] and not r.carried
    assert r.verdict == Verdict.OK


def test_the_judgement_stops_the_carry_at_the_anchor_used_or_not(tmp_path, monkeypatch):
    """gemm regress's wiring of the rule above: the carry stops at the anchor even where the
    anchor cannot be compared with (git cannot place it, a shallow clone), and a judgement of
    the anchor itself carries nothing; without an anchor (--no-anchor) it is not bounded."""
    from gemm.track import judge as jd
    from tests.test_regress import flat, history, sha
    res = history(tmp_path, [flat(30.0)] * 4, kernels=["05_2d"], sizes=["4096"])
    key = ("05_2d", "4096", "tflops")
    for i in (1, 2, 3):
        verdicts.save(tmp_path / "v", "h200", sha(i), [
            {"kernel": key[0], "size": key[1], "metric": key[2], "verdict": "UNRESOLVED"}])
    monkeypatch.setattr(jd.anchors, "resolve", lambda repo, rev: (rev, "test"))

    def carried(judged, anchor, why_not="", use=True):
        monkeypatch.setattr(jd.anchors, "unusable", lambda *a: why_not)
        req = jd.Request(results=str(res), machine="h200", commit=sha(judged), anchor=anchor,
                         use_anchor=use, verdicts=str(tmp_path / "v"),
                         calibration=str(tmp_path / "cal"), config=GateConfig(confirm=False))
        rep = jd.judge(req)
        return next(r.carried for r in rep.rows if (r.kernel, r.size, r.metric) == key)
    assert carried(3, sha(0)) == [sha(2), sha(1)]
    assert carried(3, sha(1)) == [sha(2)]
    assert carried(3, sha(1), why_not="could not be placed by git") == [sha(2)]
    assert carried(2, sha(2), why_not="is the judged commit") == []
    assert carried(3, None, use=False) == [sha(2), sha(1)]
