"""The sensitive gate on the CPU, with stand-in `gemm` packages in real git commits whose
'measurements' follow a recipe committed with them (a level, deterministic process-to-process
noise, a drift of the machine, an injected delay read from GEMM_INJECT_DELAY):

  the adaptive A/B (rounds until decided, UNRESOLVED at the cap, --strict), the A/A control
  (a GPU that moves during the A/B), calibration files (missing, stale, other machine), the
  anchor (explicit, tag, file; drift across commits; change points naming the commits),
  `gemm calibrate` end to end, and the gate's verdict page."""
import json
import math
import shutil
import time

import pytest

from gemm.cli import main as cli_main
from gemm.store import calibration as calibration_file
from gemm.track import abreport, abrun, anchor, calibration, decision
from gemm.calibrate.runner import trial_settings
from gemm.track.gate import GateConfig
from tests.asvfake import write_benchmarks, write_run
from tests.stubrepo import ARGS, commit_package, git, new_repo

STUB = '''
import json, os, sys
cfg = json.load(open(os.path.join(os.path.dirname(__file__), "recipe.json")))
''' + ARGS + '''
counter = os.path.join(cfg["state"], "count")
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
share = float(os.environ.get("GEMM_INJECT_DELAY") or 0)
wiggle = ((n * 7919) % 11 - 5) / 5.0          # -1 .. 1, deterministic per process
v = cfg["level"] * (1 + cfg["noise"] * wiggle) * (1 - cfg.get("drift", 0) * n) / (1 + share)
if n >= cfg.get("step_at", 1e9):          # the GPU throttles from this process on
    v *= 1 - cfg["step"]
if cfg.get("flip") and n % 4 >= 2:         # a GPU that keeps changing: 2 processes fast, 2 slow
    v *= 1 - cfg["flip"]
if n >= cfg.get("break_at", 1e9):         # the code stops measuring (an A/B that breaks off)
    sys.exit(5)
values = [{"kernel": k, "size": s, "status": "ok", "error": "",
           "metrics": {"tflops": v, "pct_of_cublas": 2 * v}} for k, s in pairs]
doc = {"schema": "gemm.measure/1", "device": {"name": "NVIDIA H200"},
       "package": os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.py"),
       "values": values}
open(args[args.index("--json") + 1], "w").write(json.dumps(doc))
'''


def commit(repo, level, msg, noise=0.0005, drift=0.0, **more):
    pkg = repo / "gemm"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(STUB)
    (pkg / "recipe.json").write_text(json.dumps({"level": level, "noise": noise, "drift": drift,
                                                 "state": str(repo.parent), **more}))
    return commit_package(repo, msg)


@pytest.fixture
def repo(tmp_path):
    return new_repo(tmp_path / "repo")


def record(repo, values: list[tuple[str, float]]):
    """A fresh history: these (commit, TFLOPS) runs, in this order."""
    res = repo.parent / "results"
    shutil.rmtree(res, ignore_errors=True)
    write_benchmarks(res, ["09_pipe"], ["4096"])
    for i, (sha, v) in enumerate(values):
        write_run(res, sha, 1_000_000 + i, {("09_pipe", "4096"): v}, ["09_pipe"], ["4096"],
                  noise=0.0)
    return res


def gate(repo, res, *extra):
    return cli_main(["regress", "--results", str(res), "--machine", "h200", "--repo", str(repo),
                     "--verdicts", str(repo.parent / "verdicts"),
                     "--calibration", str(repo.parent / "calibration"), *extra])


def notes(repo) -> str:
    """The whole notes of the last gate(..., "--json", repo.parent / "r.json") (the console
    gives an UNRESOLVED series a short note, gemm.record.unresolved)."""
    return " ".join(r["note"] for r in json.loads((repo.parent / "r.json").read_text())["rows"])


def test_a_one_percent_code_drop_is_confirmed_and_a_machine_shift_dismissed(repo, gpu_here,
                                                                              capsys):
    shas = [commit(repo, 30.0, f"c{i}") for i in range(4)]
    slow = commit(repo, 29.7, "one percent slower")
    res = record(repo, [(s, 30.0) for s in shas] + [(slow, 29.7)])
    assert gate(repo, res, "--no-anchor") == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 09_pipe at 4096: TFLOPS DROP" in out and ": DROP" in out
    # the same recorded drop, but both codes measure alike here: the machine, dismissed
    same = commit(repo, 30.0, "unchanged code, recorded on a slower GPU")
    res = record(repo, [(s, 30.0) for s in shas] + [(same, 29.7)])
    assert gate(repo, res, "--no-anchor") == 0
    assert ": SAME" in capsys.readouterr().out


def test_an_unresolved_ab_passes_unless_strict(repo, gpu_here, capsys):
    shas = [commit(repo, 30.0, f"c{i}", noise=0.01) for i in range(4)]   # 1 % noise per process
    new = commit(repo, 29.85, "half a percent", noise=0.01)
    res = record(repo, [(s, 30.0) for s in shas] + [(new, 29.7)])
    assert gate(repo, res, "--no-anchor", "--max-rounds", "2", "--json",
                str(repo.parent / "r.json")) == 0
    out = capsys.readouterr()
    assert "UNRESOLVED" in out.out and "2 measured 2 rounds, undecided at the round cap" in out.out
    assert "still ambiguous after 2 rounds" in notes(repo)
    assert "at this noise a decision takes about" in notes(repo) and ", needs ~" in out.out
    assert out.err.count("A/B round") == 2 * 4            # two rounds of A B B A
    assert gate(repo, res, "--no-anchor", "--max-rounds", "2", "--strict") == 1


def test_an_effect_on_the_margin_is_said_to_be_there(repo, gpu_here, capsys):
    """A 0.5 % drop with a 1 % minimum effect: however quiet the GPU, the interval straddles
    the margin; the note says why, instead of asking for rounds the noise does not need."""
    shas = [commit(repo, 30.0, f"c{i}") for i in range(4)]
    new = commit(repo, 30.0 * (1 - 0.005), "half a percent")
    res = record(repo, [(s, 30.0) for s in shas] + [(new, 29.7)])   # the screen flags it
    quiet_runner(repo)
    assert gate(repo, res, "--no-anchor", "--json", str(repo.parent / "r.json")) == 0
    out = capsys.readouterr().out
    assert "UNRESOLVED" in out and "lies on the decision margin (-0.5 %)" in notes(repo)
    assert "at this noise a decision takes" not in notes(repo)
    assert "rounds: -0.5" in out and ", on the decision margin" in out and "needs ~" not in out


def quiet_runner(repo):
    calibration_file.save(repo.parent / "calibration", "h200", {"noise": [
        {"kernel": "09_pipe", "size": "4096", "metric": m, "sigma": 0.0005, "dof": 40}
        for m in ("tflops", "pct_of_cublas")]})


def test_a_linear_drift_of_the_gpu_cancels_in_the_ab(repo, gpu_here, capsys):
    shas = [commit(repo, 30.0, f"c{i}", drift=0.004) for i in range(4)]   # -0.4 % per process
    new = commit(repo, 30.0, "same code", drift=0.004)
    res = record(repo, [(s, 30.0) for s in shas] + [(new, 29.7)])
    quiet_runner(repo)
    assert gate(repo, res, "--no-anchor") == 0
    out = capsys.readouterr()
    assert "the A/A control moved" not in out.err and ": SAME" in out.out


def test_a_gpu_that_steps_once_during_the_ab_is_measured_again(repo, gpu_here, capsys):
    shas = [commit(repo, 30.0, f"c{i}", step_at=2, step=0.01) for i in range(4)]
    new = commit(repo, 30.0, "same code", step_at=2, step=0.01)   # throttles mid-round 1
    res = record(repo, [(s, 30.0) for s in shas] + [(new, 29.7)])
    quiet_runner(repo)
    assert gate(repo, res, "--no-anchor") == 0
    out = capsys.readouterr()
    assert out.err.count("the A/A control moved") == 1 and ": SAME" in out.out


def test_a_gpu_that_keeps_changing_is_not_trusted(repo, gpu_here, capsys):
    shas = [commit(repo, 30.0, f"c{i}", flip=0.01) for i in range(4)]
    new = commit(repo, 30.0, "same code", flip=0.01)
    res = record(repo, [(s, 30.0) for s in shas] + [(new, 29.7)])
    quiet_runner(repo)
    assert gate(repo, res, "--no-anchor") == 0          # UNRESOLVED passes ...
    out = capsys.readouterr()
    assert "the A/A control moved" in out.err
    assert "UNRESOLVED" in out.out and "unstable" in out.out
    assert gate(repo, res, "--no-anchor", "--strict") == 1   # ... unless --strict


def test_borrowed_noise_does_not_judge_the_gpu(repo, gpu_here, capsys):
    """A series whose noise is borrowed from other series (here: only another kernel was
    calibrated at its size) does not call the GPU unstable: the same code moving 3 % between
    its processes is that series' own noise as far as the gate knows (the H200's 11 at 1000,
    own sd 0.5 %, read as a GPU move on borrowed 0.19 %). The log says the rounds went
    unguarded; the series' own calibration brings the control back."""
    shas = [commit(repo, 30.0, f"c{i}", flip=0.03) for i in range(4)]
    new = commit(repo, 30.0, "same code", flip=0.03)
    res = record(repo, [(s, 30.0) for s in shas] + [(new, 29.7)])
    calibration_file.save(repo.parent / "calibration", "h200", {"noise": [
        {"kernel": "05_other", "size": "4096", "metric": m, "sigma": 0.0005, "dof": 40}
        for m in ("tflops", "pct_of_cublas")]})
    # 4 rounds at most: borrowed noise enters with the run's own dof, so at 2 the series'
    # minimum effect (decision.detectable) would be far past this 1 % and nothing flagged
    assert gate(repo, res, "--no-anchor", "--min-rounds", "2", "--max-rounds", "4") == 0
    out = capsys.readouterr()
    assert "the A/A control moved" not in out.err and "unstable" not in out.out
    said = "regress: no A/A control from here on: every series still undecided has noise borrowed"
    assert out.err.count(said) == 1                                  # said once, at round 2 ...
    assert out.err.index(said) < out.err.index("A/B round 3/4")      # ... not again at round 3
    quiet_runner(repo)                     # the series' own calibration: the control is back
    assert gate(repo, res, "--no-anchor", "--max-rounds", "2") == 0
    out = capsys.readouterr()
    assert "the A/A control moved" in out.err and "no A/A control" not in out.err
    # no calibration at all: the rounds' own spread judges the GPU (no unguarded rounds)
    calibration_file.path_for(repo.parent / "calibration", "h200").unlink()
    assert gate(repo, res, "--no-anchor", "--max-rounds", "3") == 0
    out = capsys.readouterr()
    assert "no A/A control" not in out.err and "no calibration" in out.err


def test_an_ab_that_breaks_off_keeps_its_decisions_and_never_falls_back_to_history(
        repo, gpu_here, capsys):
    shas = [commit(repo, 30.0, f"c{i}") for i in range(4)]
    new = commit(repo, 30.0, "same code", break_at=6)   # measures 6 processes, then fails
    res = record(repo, [(s, 30.0) for s in shas] + [(new, 29.0)])   # -3.3 % on the history
    assert gate(repo, res, "--no-anchor", "--min-rounds", "2", "--json",
                str(repo.parent / "r.json")) == 0
    out = capsys.readouterr()
    assert "broke off" in out.err and "UNRESOLVED" in out.out and "no A/B" in notes(repo)
    assert "the A/B broke off (a commit could not be checked out or measured)" in out.out


def test_the_time_budget_stops_new_rounds(repo, gpu_here, capsys):
    shas = [commit(repo, 30.0, f"c{i}", noise=0.01) for i in range(4)]
    new = commit(repo, 29.85, "noisy", noise=0.01)
    res = record(repo, [(s, 30.0) for s in shas] + [(new, 29.7)])
    assert gate(repo, res, "--no-anchor", "--budget", "0.001") == 0
    out = capsys.readouterr()
    assert "2 measured 1 round, undecided at the 0.001-s budget" in out.out
    assert out.err.count("A/B round") == 4


def test_past_the_budget_a_drop_on_course_is_measured_to_its_verdict(repo, gpu_here, capsys):
    """Overtime: a 2.5 % drop still ambiguous when the budget is spent (a noisy runner: its
    calibrated 0.4 % makes the series' minimum effect 1.9 %, decision.detectable), its
    estimate past the margin, is measured on, alone, until it is a DROP; --overtime 0 leaves
    it UNRESOLVED at the budget, as before."""
    shas = [commit(repo, 30.0, f"c{i}", noise=0.002) for i in range(4)]
    slow = commit(repo, 30.0 * 0.975, "two and a half percent slower", noise=0.002)
    res = record(repo, [(s, 30.0) for s in shas] + [(slow, 29.25)])
    calibration_file.save(repo.parent / "calibration", "h200", {"noise": [
        {"kernel": "09_pipe", "size": "4096", "metric": m, "sigma": 0.004, "dof": 40}
        for m in ("tflops", "pct_of_cublas")]})
    assert gate(repo, res, "--no-anchor", "--budget", "0.001", "--overtime", "0", "--json",
                str(repo.parent / "r.json")) == 0
    out = capsys.readouterr()
    assert "UNRESOLVED" in out.out and "undecided at the 0.001-s budget" in out.out
    assert "out of the A/B time budget (0 s) after 1 rounds" in notes(repo)
    assert "1.9 %" in out.out                      # the series' minimum effect, shown
    assert out.err.count("A/B round") == 4 and "overtime" not in out.err
    assert gate(repo, res, "--no-anchor", "--budget", "0.001") == 1
    out = capsys.readouterr()
    assert ("overtime (up to 60 s more, within 8 rounds) for what is on course for a DROP: "
            "09_pipe at 4096") in out.err
    assert "REGRESSION: 09_pipe at 4096: TFLOPS DROP" in out.out
    assert "(overtime: measured past the time budget" in out.out
    assert 4 < out.err.count("A/B round") <= 4 * 8
    # unchanged code, the same noise: its estimate is not past the margin, so no overtime
    same = commit(repo, 30.0, "unchanged", noise=0.002)
    res = record(repo, [(s, 30.0) for s in shas] + [(same, 29.25)])
    assert gate(repo, res, "--no-anchor", "--budget", "0.001") == 0
    out = capsys.readouterr()
    assert "overtime" not in out.err and out.err.count("A/B round") <= 4


def _ab(monkeypatch, comps, level, cfg, noise=0.003, seed=1, moved_at=None):
    """An ABRun on stand-ins: each arm's process takes 100 s of a fake clock and measures
    level(sha, kernel, arm count) with lognormal noise; the calibration's prior is that noise;
    `moved_at`: the A/A control reports a move at that check."""
    import random
    from types import SimpleNamespace
    from gemm.track import abtest, confirm
    rng, now, calls, checks = random.Random(seed), [0.0], [0], [0]

    def measure(tree, series, tasks=None, walls=None, **kw):
        now[0] += 100.0
        calls[0] += 1
        if walls is not None:      # as abtest.measure: the process's seconds
            walls[None] = 100.0
        out = {}
        for k, sizes in series.items():
            for sz in sizes:
                v = level(tree, k, calls[0]) * math.exp(rng.gauss(0, noise))
                out.update({(k, sz, "tflops"): v, (k, sz, "pct_of_cublas"): 2 * v})
        return out

    def moved(self):
        checks[0] += 1
        hit = checks[0] == moved_at     # as the real control: only what has rounds here
        return [(c, "a stand-in move") for c in self.undecided() if hit and c.rounds > c.kept]
    monkeypatch.setattr(abtest, "measure", measure)
    monkeypatch.setattr(abrun, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(confirm.ABRun, "moved", moved)
    cal = SimpleNamespace(prior=lambda *a: decision.Noise(noise, 40),
                          robust_prior=lambda *a: None, borrowed=lambda *a: False)
    trees = {c: c for _, c in comps} | {"NEW": "NEW"}
    logs = []
    ab = confirm.ABRun(comps, cfg, "NEW", abtest.in_trees(trees), logs.append, cal)
    ab.run()
    abreport.finish(ab)
    return ab, logs


def _row(kernel):
    from gemm.track.gate import Row
    return Row(kernel, "4096", "tflops", 4, 30.0, 29.0, -0.03, 0.005, "drop?", min_effect=0.01)


def test_overtime_never_leaves_the_rest_of_the_ab_worse_off(monkeypatch):
    """An A/A move in an overtime round leaves open only what ran overtime (said why); the
    DROP decided within the budget stands. A comparison closed at the budget whose row then
    becomes a DROP in overtime against another commit is MOOT, as within the budget. One that
    falls back inside the margin in overtime is closed, and said so. With --min-rounds 2 and
    the budget spent after round 1, a large drop goes on to its first decision."""
    from gemm.track.gate import GateConfig
    cfg = GateConfig(budget_s=150.0, overtime_s=5000.0)
    big, small = _row("k1"), _row("k2")
    # a round of both (R N N R) takes 400 s: the budget holds two rounds (no DROP from one,
    # decision.DROP_MIN_ROUNDS), the third is overtime, its A/A check (the third) moves
    ab, logs = _ab(monkeypatch, [(big, "c1"), (small, "c1")],
                   lambda sha, k, n: 30.0 * ({"k1": 0.97, "k2": 0.99}[k] if sha == "NEW" else 1),
                   GateConfig(budget_s=850.0, overtime_s=5000.0), noise=0.002, moved_at=3)
    assert big.verdict == "DROP" and big.effects[0]["verdict"] == "DROP"
    assert not big.effects[0]["overtime"] and small.effects[0]["overtime"]
    assert small.verdict == "UNRESOLVED" and "A/A control moved during overtime" in small.note
    assert not any("measured again" in line for line in logs)

    row = _row("k1")                 # as slow as c1, 1.2 % slower than c2
    ab, logs = _ab(monkeypatch, [(row, "c1"), (row, "c2")],
                   lambda sha, k, n: 30.0 * (1.0 if sha == "c2" else 0.988), cfg)
    assert row.verdict == "DROP", row.note
    assert [e["verdict"] for e in row.effects] == ["MOOT", "DROP"]
    assert row.effects[1]["overtime"] and "not needed: the drop against c2" in row.note
    assert row.effects[0]["n_new"] == row.effects[0]["n_ref"]   # its own rounds only

    back = _row("k1")                # 1.2 % slow in round 1, then 1 % fast
    ab, logs = _ab(monkeypatch, [(back, "c1")],
                   lambda sha, k, n: 30.0 * ((0.988 if n <= 4 else 1.01) if sha == "NEW" else 1),
                   cfg)
    assert back.verdict == "UNRESOLVED", back.note
    assert "no longer on course for a DROP after 2 rounds (overtime)" in back.note

    early = _row("k1")
    ab, logs = _ab(monkeypatch, [(early, "c1")],
                   lambda sha, k, n: 30.0 * (0.95 if sha == "NEW" else 1),
                   GateConfig(budget_s=150.0, overtime_s=5000.0, min_rounds=2))
    assert early.verdict == "DROP" and early.effects[0]["n_new"] == 4


def test_a_calibration_trial_runs_a_drop_on_course_past_the_budget(monkeypatch):
    """As the gate does (a trial's A/B of a share is the gate's): when the budget is spent,
    the series on course for a DROP go on (overtime) to their verdict; a share inside the
    margin stops at the budget; overtime stops when its own time is spent. (At sd 0.3 % and
    5 rounds the series' minimum effect is 1.8 %, as the gate's: a 1.65 % share is past its
    margin but decided only at round 4.)"""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    now = [0.0]

    def measure(root, series, env=None, walls=None, **kw):
        share = float((env or {}).get("GEMM_INJECT_DELAY") or 0)
        now[0] += 30.0
        walls.update({None: 0.0, ("09", "4096"): 30.0})   # as abtest.measure: its seconds
        return {(k, s, m): 30.0 * (1 - share) for k, ss in series.items() for s in ss
                for m in calibrate.METRICS}
    monkeypatch.setattr(calibrate.abtest, "measure", measure)
    cal = calibration.Calibration("h200", None, "", noise={
        ("09", "4096", m): decision.Noise(0.003, 29) for m in calibrate.METRICS})
    one, small = ("09", "4096", "tflops", 0.0165), ("09", "4096", "tflops", 0.004)

    def run(**cfg):
        now[0] = 0.0
        return calibrate.trial(".", ["09"], ["4096"], [0.004, 0.0165], GateConfig(
            budget_s=250.0, max_rounds=5, **cfg), cal, lambda s: None, clock=lambda: now[0])
    # a round (R N N R) costs 4 x 30 s = 120 s: the 250-s budget has room for two rounds
    got = run(overtime_s=1000.0)
    assert got[small]["verdict"] == decision.AMBIGUOUS and got[small]["stopped"] == "budget"
    assert got[small]["n_new"] == 4 and not got[small]["overtime"]
    assert got[one]["verdict"] == decision.DROP and got[one]["overtime"] and got[one]["n_new"] > 4
    got = run(overtime_s=120.0)      # room for one round of overtime (130 s left of 370)
    assert got[one]["verdict"] == decision.AMBIGUOUS and got[one]["n_new"] == 6
    assert got[one]["stopped"] == "budget" and got[one]["overtime"]
    got = run(overtime_s=0.0)
    assert got[one]["verdict"] == decision.AMBIGUOUS and got[one]["n_new"] == 4
    assert not got[one]["overtime"]
    # no decision before --min-rounds, as in the gate: stopped there, a clear drop is left
    # open; with overtime it goes on to its first decision
    big = ("09", "4096", "tflops", 0.03)
    now[0] = 0.0
    got = calibrate.trial(".", ["09"], ["4096"], [0.03], GateConfig(
        budget_s=50.0, max_rounds=5, min_rounds=2, overtime_s=0.0), cal, lambda s: None,
        clock=lambda: now[0])
    assert got[big]["verdict"] == decision.AMBIGUOUS and got[big]["n_new"] == 2
    got = run(overtime_s=1000.0, min_rounds=3)
    assert got[one]["verdict"] == decision.DROP and got[one]["n_new"] >= 6 and got[one]["overtime"]


def test_borrowed_noise_comes_from_kernels_of_the_same_precision():
    """% of cuBLAS is against the cuBLAS of the kernel's precision (TF32's at 1000 takes
    ~14 us, FP32's ~50), so an uncalibrated series borrows from calibrated kernels of its own
    precision where its size class has any, and from every calibrated kernel only where it
    has none (or the kernel is unknown here, as an older commit's may be)."""
    N = decision.Noise

    def B(sigma, dof):          # a prior borrowed from other series (Noise.borrowed)
        return N(sigma, dof, borrowed=True)
    cal = calibration.Calibration("h200", None, "", noise={
        ("05_2d_blocktiling", "1000", "pct_of_cublas"): N(0.002, 60),
        ("11_tf32_wmma", "1000", "pct_of_cublas"): N(0.005, 20),
        ("05_2d_blocktiling", "2048", "pct_of_cublas"): N(0.0015, 60)})
    assert cal.prior("12_tf32_mma_sync", "1000", "pct_of_cublas") == B(0.005, 20)
    assert cal.prior("13_tf32_wgmma_tma", "1024", "pct_of_cublas") == B(0.005, 20)  # bracketing
    assert cal.prior("08_warptiling", "1000", "pct_of_cublas") == B(0.002, 60)
    assert cal.prior("12_tf32_mma_sync", "2048", "pct_of_cublas") == B(0.0015, 60)   # none alike
    assert cal.prior("14_bf16_wgmma_tma", "1000", "pct_of_cublas") == B(0.005, 20)   # worst of all
    assert cal.prior("99_gone", "1000", "pct_of_cublas") == B(0.005, 20)
    assert cal.borrowed("12_tf32_mma_sync", "1000", "pct_of_cublas")
    assert not cal.borrowed("11_tf32_wmma", "1000", "pct_of_cublas")
    assert cal.prior("11_tf32_wmma", "1000", "pct_of_cublas") == N(0.005, 20)   # its own
    # its precision calibrated only a farther size than another kernel did: the worse of the
    # two stands in (a quiet TF32 1000 says no more about 1024 than FP32's own 1024 does)
    far = calibration.Calibration("h200", None, "", noise={
        ("11_tf32_wmma", "1000", "tflops"): N(0.001, 20),
        ("05_2d_blocktiling", "1024", "tflops"): N(0.003, 60)})
    assert far.prior("12_tf32_mma_sync", "1024", "tflops") == B(0.003, 20)
    assert far.prior("12_tf32_mma_sync", "1000", "tflops") == B(0.001, 20)


def test_calibration_files_missing_stale_or_from_another_machine(tmp_path):
    root = tmp_path / "calibration"
    cal, why = calibration.load(root, "h200")
    assert cal is None and "no calibration" in why
    calibration_file.save(root, "h200", {"gpu_name": "NVIDIA H200", "noise": [
        {"kernel": "09", "size": "4096", "metric": "tflops", "sigma": 0.001, "dof": 5},
        {"kernel": "07", "size": "4096", "metric": "tflops", "sigma": 0.003, "dof": 3}]})
    cal, why = calibration.load(root, "h200", gpu_name="NVIDIA H200")

    def B(sigma, dof):          # a prior borrowed from other series (Noise.borrowed)
        return decision.Noise(sigma, dof, borrowed=True)
    assert why == "" and cal.prior("09", "4096", "tflops") == decision.Noise(0.001, 5)
    assert cal.prior("09", "512", "tflops") is None        # its size class has nothing calibrated
    # a size nobody calibrated borrows from the nearest calibrated one of its class
    assert cal.prior("09", "8192x1024x4096", "tflops") == B(0.003, 3)
    assert cal.prior("09", "2048", "tflops") == B(0.003, 3)
    # ... and between two calibrated sizes, the worse of the two that bracket it
    from gemm.track.calibration import bracketing_sizes
    assert bracketing_sizes("8192x1024x4096", {"2048", "4096", "8192", "1024"}) == ["2048", "4096"]
    assert bracketing_sizes("3001x2999x3003", {"2048", "4096"}) == ["2048", "4096"]
    assert bracketing_sizes("16384", {"2048", "4096"}) == ["4096"]
    assert bracketing_sizes("4096", {"2048", "4096"}) == ["4096"]
    quiet = calibration.Calibration("h200", None, "", noise={
        ("09", "2048", "tflops"): decision.Noise(0.0023, 9),
        ("09", "4096", "tflops"): decision.Noise(0.0008, 12)})
    assert quiet.prior("05", "8192x1024x4096", "tflops") == B(0.0023, 9)
    assert cal.prior("05", "4096", "tflops") == B(0.003, 3)   # borrowed: the worst
    assert cal.borrowed("05", "4096", "tflops") and not cal.borrowed("09", "4096", "tflops")
    assert "NVIDIA H100" in calibration.load(root, "h200", gpu_name="NVIDIA H100")[1]
    later = time.time() + 400 * 86400
    assert "days old" in calibration.load(root, "h200", now=later)[1]
    from gemm.core.policy import Policy
    assert "stale" in calibration.load(root, "h200", policy=Policy(min_samples=20))[1]
    (root / "h100.json").write_text((root / "h200.json").read_text())
    assert "made for machine 'h200'" in calibration.load(root, "h100")[1]
    (root / "h200.json").write_text("{not json")
    assert "unreadable" in calibration.load(root, "h200")[1]


def test_the_prior_is_the_calibrated_sd_a_tail_included(tmp_path):
    """A few A/A processes on a slow operand placement (07 at 2048) inflate the sd; the gate's
    prior is that sd with its degrees of freedom, the tail included (a robust sd given the
    same degrees of freedom would overstate what the values tell: ci/probes/power_sim.py).
    The robust sd is what `gemm show` prints beside it."""
    from gemm.core.policy import SUITE
    from gemm.calibrate.runner import robust_sd, sigma_of, tail_of
    bulk = [40.0 * (1 + 0.001 * x) for x in (-1.0, -0.5, 0.0, 0.5, 1.0, -0.7, 0.3, 0.8, -0.2, 0.1)]
    tail = bulk + [40.0 * 0.994, 40.0 * 0.9935]               # two processes ~0.6 % slow
    sd, dof = sigma_of(tail)
    root = tmp_path / "calibration"
    calibration_file.save(root, "h200", {"gpu_name": "NVIDIA H200", "noise": [
        {"kernel": "07", "size": "2048", "metric": "tflops", "sigma": sd, "dof": dof,
         "values": tail}]})
    cal, why = calibration.load(root, "h200")
    assert why == "" and cal.prior("07", "2048", "tflops") == decision.Noise(sd, 11)
    robust, beyond = tail_of(tail)
    assert robust == pytest.approx(robust_sd(tail)) and 0.0004 < robust < 0.5 * sd
    assert beyond == 2                                          # the two slow processes
    assert robust_sd([30.0, 31.0]) is None                      # under 3 values
    # the record's policy is not the A/B's: a calibration is made under CONFIRM
    assert "stale" in calibration.load(root, "h200", policy=SUITE)[1]


def test_the_calibrated_noise_is_what_the_ab_pools(repo, gpu_here, capsys):
    shas = [commit(repo, 30.0, f"c{i}") for i in range(4)]
    slow = commit(repo, 29.7, "slower")
    res = record(repo, [(s, 30.0) for s in shas] + [(slow, 29.7)])
    calibration_file.save(repo.parent / "calibration", "h200", {"noise": [
        {"kernel": "09_pipe", "size": "4096", "metric": m, "sigma": 0.0005, "dof": 40}
        for m in ("tflops", "pct_of_cublas")]})
    assert gate(repo, res, "--no-anchor", "--json", str(repo.parent / "r.json")) == 1
    rows = json.loads((repo.parent / "r.json").read_text())["rows"]
    # two rounds (no DROP from one: decision.DROP_MIN_ROUNDS): 1 dof of its own + 40
    assert all(r["effects"][0]["dof"] == 41 for r in rows)
    # the per-process values it was decided on are kept (a later rule can be tried on them):
    # two rounds R N N R, the reference's first and last, the new code's two, per round
    for r in rows:
        v = r["effects"][0]["values"]
        assert len(v["first"]) == len(v["last"]) == 2 and len(v["new"]) == 4
        assert v["k"] == [3, 3]
        assert r["effects"][0]["n_ref"] == 4 and r["effects"][0]["n_new"] == 4
        assert r["effects"][0]["rule"] == "mean"     # no A/A values in this file: no tail


def test_the_gate_uses_no_calibration_made_on_another_gpu(repo, gpu_here, monkeypatch):
    import gemm.measure.facts
    shas = [commit(repo, 30.0, f"c{i}") for i in range(4)]
    slow = commit(repo, 29.7, "slower")
    res = record(repo, [(s, 30.0) for s in shas] + [(slow, 29.7)])
    calibration_file.save(repo.parent / "calibration", "h200", {"gpu_name": "NVIDIA H200", "noise": [
        {"kernel": "09_pipe", "size": "4096", "metric": m, "sigma": 0.0005, "dof": 40}
        for m in ("tflops", "pct_of_cublas")]})
    out = repo.parent / "r.json"
    for name, used in (("NVIDIA H200", True), ("NVIDIA H100 80GB HBM3", False)):
        monkeypatch.setattr(gemm.measure.facts, "gpu_name", lambda n=name: n)
        gate(repo, res, "--no-anchor", "--json", str(out))
        doc = json.loads(out.read_text())
        assert (doc["calibration"] is not None) == used
        if not used:
            assert "made on a NVIDIA H200" in doc["calibration_note"]
            assert all(r["effects"][0]["dof"] < 40 for r in doc["rows"] if r["effects"])


def test_a_drop_against_the_anchor_ends_the_ab_of_its_series(repo, gpu_here):
    """A drift step: 0.5 % against the previous commit (on the decision margin: never decided)
    and 1.5 % against the anchor (a DROP as soon as one may be: round 2,
    decision.DROP_MIN_ROUNDS). The row is a DROP after two rounds; its comparison with the
    previous commit is left open (MOOT), not measured to the cap."""
    base = [commit(repo, 30.0, f"c{i}") for i in range(4)]
    git(repo, "tag", "perf-anchor-x", base[-1])
    a = commit(repo, 30.0 * 0.99, "a")
    b = commit(repo, 30.0 * 0.99 * 0.995, "b")
    res = record(repo, [(s, 30.0) for s in base] + [(a, 29.7), (b, 30.0 * 0.99 * 0.995)])
    calibration_file.save(repo.parent / "calibration", "h200", {"noise": [
        {"kernel": "09_pipe", "size": "4096", "metric": m, "sigma": 0.0005, "dof": 40}
        for m in ("tflops", "pct_of_cublas")]})
    assert gate(repo, res, "--json", str(repo.parent / "r.json")) == 1
    rows = json.loads((repo.parent / "r.json").read_text())["rows"]
    for r in rows:
        by = {e["against"]: e for e in r["effects"]}
        assert r["verdict"] == "DROP" and by[base[-1]]["verdict"] == "DROP"
        assert by[a]["verdict"] == "MOOT" and by[a]["n_new"] == 4      # two rounds, not eight
        assert "decides the row" in r["note"]


def test_the_anchor_is_found_by_flag_tag_or_file(repo, tmp_path):
    a = commit(repo, 30.0, "a")
    b = commit(repo, 30.0, "b")
    assert anchor.resolve(repo) == (None, anchor.resolve(repo)[1])
    (repo / "anchor.toml").write_text(f'commit = "{a}"\n')
    assert anchor.resolve(repo)[0] == a
    git(repo, "tag", "perf-anchor-1", b)
    assert anchor.resolve(repo) == (b, "tag perf-anchor-1")
    assert anchor.resolve(repo, a[:8])[0] == a
    with pytest.raises(ValueError, match="not a commit"):
        anchor.resolve(repo, "f" * 40)
    assert anchor.unusable(repo, a, b, {a}) == "" and anchor.unusable(repo, b, a, {b})


def test_drift_in_small_steps_fails_against_the_anchor_and_names_the_commits(repo, gpu_here,
                                                                             capsys):
    base = [commit(repo, 30.0, f"c{i}") for i in range(8)]
    git(repo, "tag", "perf-anchor-accepted", base[-1])
    chain, level, values = [], 30.0, [(s, 30.0) for s in base]
    results = []
    for i in range(4):                         # four commits, each 0.5 % slower
        level *= 0.995
        sha = commit(repo, level, f"drift {i + 1}")
        chain.append(sha)
        values.append((sha, level))
        res = record(repo, values)
        results.append(gate(repo, res, "--json", str(repo.parent / f"d{i}.json")))
        capsys.readouterr()
    # the screen sees -1.0 % at the second step; -1.5 % against the anchor at the third
    assert results[0] == 0 and 1 in results[1:3] and results[3] == 1
    report = json.loads((repo.parent / "d3.json").read_text())
    assert report["anchor"] == base[-1]
    tf = next(r for r in report["rows"] if r["metric"] == "tflops")
    assert tf["verdict"] == "DROP" and base[-1] in tf["against"]
    named = {c["commit"] for c in tf["changepoints"]}
    assert named and named <= set(chain) and all(c["change"] < 0 for c in tf["changepoints"])


def test_calibrate_measures_noise_and_detects_injected_delays(repo, monkeypatch, capsys):
    import gemm.track.confirm
    commit(repo, 30.0, "the code", noise=0.0005)
    monkeypatch.setattr(gemm.track.confirm, "gpu_present", lambda: (True, ""))
    out_dir = repo.parent / "calibration"
    assert cli_main(["calibrate", "--repo", str(repo), "--machine", "h200", "-k", "09_cp_async_pipeline",
                     "--sizes", "4096", "--processes", "4", "--inject-kernel", "09_cp_async_pipeline",
                     "--inject-sizes", "4096", "--shares", "0.005", "0.02", "--trials", "2",
                     "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "A/A noise on NVIDIA H200" in out and "2/2" in out
    cal, why = calibration.load(out_dir, "h200")
    assert why == "" and cal.prior("09_cp_async_pipeline", "4096", "tflops").dof == 3
    summary = cal.doc["summary"][0]
    assert summary["detected"]["0.02"] == "2/2" and summary["smallest_always_detected"] <= 0.02
    # a noise-only run with more processes replaces the noise and keeps the detection table
    assert cli_main(["calibrate", "--repo", str(repo), "--machine", "h200", "-k", "09_cp_async_pipeline",
                     "--sizes", "4096", "--processes", "6", "--trials", "0",
                     "--out", str(out_dir)]) == 0
    cal, why = calibration.load(out_dir, "h200")
    assert why == "" and cal.prior("09_cp_async_pipeline", "4096", "tflops").dof == 5
    assert cal.doc["summary"][0] == summary and cal.doc["trials"] == 2
    # trials alone on the file's noise, added to its table (a table built over sessions) ...
    args = ["calibrate", "--repo", str(repo), "--machine", "h200", "-k", "09_cp_async_pipeline",
            "--sizes", "4096", "--processes", "0", "--inject-kernel", "09_cp_async_pipeline",
            "--inject-sizes", "4096", "--shares", "0.005", "0.02", "--trials", "1",
            "--out", str(out_dir)]
    # ... but not to trials made with other noise (the table kept from before the new noise)
    assert cli_main(args + ["--add-trials"]) == 2
    assert "made with other noise than it holds now" in capsys.readouterr().err
    assert cli_main(args) == 0                  # a new table on the new noise
    made = calibration.load(out_dir, "h200")[0].date
    time.sleep(1.1)
    assert cli_main(args + ["--add-trials"]) == 0
    cal, _ = calibration.load(out_dir, "h200")
    assert cal.date == made                     # the noise's age is kept: it was not measured
    assert cal.doc["trials"] == 2 and {d["trial"] for d in cal.doc["detection"]} == {1, 2}
    assert cal.doc["summary"][0]["detected"]["0.02"] == "2/2"
    assert cal.prior("09_cp_async_pipeline", "4096", "tflops").dof == 5     # the noise kept
    assert all(d["prior_dof"] == 5 for d in cal.doc["detection"])
    assert len({d["id"] for d in cal.doc["detection"]}) == 2     # each trial has its identity
    # new noise and added trials at once: refused before anything is measured
    assert cli_main(args[:args.index("--processes") + 1] + ["3"]
                    + args[args.index("--processes") + 2:] + ["--add-trials"]) == 2
    assert "--add-trials needs --processes 0" in capsys.readouterr().err
    # a trial of one of the shares only: trials are counted per share
    one = args[:args.index("--shares") + 1] + ["0.02"] + args[args.index("--trials"):]
    assert cli_main(one + ["--add-trials"]) == 0
    cal, _ = calibration.load(out_dir, "h200")
    assert cal.doc["summary"][0]["detected"] == {"0.005": "0/2", "0.02": "3/3"}
    assert cal.doc["trials"] == 2 and cal.doc["shares"] == [0.005, 0.02]
    # trials made under other gate settings, or of other kernels or sizes, are not mixed in
    assert cli_main(args + ["--add-trials", "--max-rounds", "3"]) == 2
    assert "other gate settings, kernels or sizes" in capsys.readouterr().err
    assert cli_main(args + ["--add-trials", "--inject-sizes", "2048"]) == 2
    assert cli_main(args + ["--min-rounds", "0"]) == 2                 # refused, not defaulted
    assert calibration.load(out_dir, "h200")[0].doc["trials"] == 2
    # a noise-only run keeps the table and the gate settings it was made with
    assert cli_main(["calibrate", "--repo", str(repo), "--machine", "h200", "-k", "09_cp_async_pipeline",
                     "--sizes", "4096", "--processes", "3", "--trials", "0", "--max-rounds", "3",
                     "--out", str(out_dir)]) == 0
    doc = calibration.load(out_dir, "h200")[0].doc
    assert doc["trials"] == 2 and doc["gate"]["max_rounds"] == GateConfig().max_rounds
    # a run cut short before its first trial ends leaves the file's table as it was
    import gemm.calibrate.runner

    def cut(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(gemm.calibrate.runner, "trial", cut)
    assert cli_main(args) != 0                  # the CLI reports the interruption
    assert calibration.load(out_dir, "h200")[0].doc["trials"] == 2
    monkeypatch.undo()
    monkeypatch.setattr(gemm.track.confirm, "gpu_present", lambda: (True, ""))
    # without --add-trials the new trials replace the table
    assert cli_main(args) == 0
    assert calibration.load(out_dir, "h200")[0].doc["trials"] == 1


def test_the_verdict_page_shows_what_the_gate_decided(tmp_path):
    from gemm.record import verdict_page
    from gemm.store import verdicts
    rows = [{"kernel": "09", "size": "4096", "metric": "tflops", "verdict": "DROP",
             "change": -0.012, "effects": [{"against": "c" * 40, "change": -0.011, "lo": -0.014, "hi": -0.008}]},
            {"kernel": "02", "size": "8192", "metric": "tflops", "verdict": "noise",
             "change": -0.021, "effects": [{"against": "c" * 40, "change": 0.0002, "lo": -0.002, "hi": 0.002}]}]
    verdicts.save(tmp_path / "v", "h200", "a" * 40, rows, "NVIDIA H200 GPU-x",
                  summary={"counts": {"DROP": 1, "noise": 1}, "exit": 1, "anchor": "b" * 40,
                           "rows": rows})
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text(
        '<body><li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li></body>')
    page = verdict_page.write(html, tmp_path / "v", ["h200"]).read_text()
    assert "aaaaaaaaaa" in page and "FAIL" in page
    assert "09 4096 TFLOPS: history -1.20 % A/B vs cccccccc -1.10 % [-1.40 %, -0.80 %]" in page
    assert "02 8192 TFLOPS: history -2.10 % A/B vs cccccccc +0.02 %" in page
    assert 'href="gate.html"' in (html / "index.html").read_text()
    assert "fails on 1 DROP</div>" in page
    stuck = [{"kernel": k, "size": "8192", "metric": "tflops", "verdict": "UNRESOLVED",
              "carried": ["c" * 40, "d" * 40], "open": [{"against": "e" * 40, "stop": "budget",
                                                        "rounds": rounds, "kept": 0}]}
             for k, rounds in (("05", 0), ("07", 2))]
    young = dict(stuck[0], kernel="08", carried=["c" * 40])
    verdicts.save(tmp_path / "v", "h200", "f" * 40, [], None,
                  summary={"counts": {"UNRESOLVED": 3}, "exit": 1, "anchor": "b" * 40,
                           "rows": stuck + [young]})
    page = verdict_page.write(html, tmp_path / "v", ["h200"]).read_text()
    assert ("fails on 2 UNRESOLVED at 3 or more commits running (1 not measured here: out of "
            "the A/B&#x27;s time)") in page


def test_the_fault_injection_switches():
    from gemm.core import faults, registry
    spec = registry.get("09")
    assert faults.delay_share(spec, {}) is None                       # off by default
    assert faults.delay_share(spec, {faults.ENV: "0.01"})[0] == 0.01
    assert faults.delay_share(spec, {faults.ENV: "05=0.02,09=0.005"})[0] == 0.005
    assert faults.delay_share(spec, {faults.ENV: "05=0.02"}) is None
    import dataclasses
    marked = dataclasses.replace(spec, inject_delay=0.005)
    assert faults.delay_share(marked, {}) == (0.005, "registry inject_delay")
    with pytest.raises(ValueError, match="in \\[0, 1\\)"):
        faults.parse("09=1.5")
    with pytest.raises(ValueError, match="inject_delay"):
        dataclasses.replace(spec, inject_delay=2.0).validate()
    assert all(s.inject_delay == 0 for s in registry.registry().values())   # never on main


def test_gemm_record_refuses_fault_injection_unless_asked(tmp_path, monkeypatch, capsys):
    import shutil as sh
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    repo = tmp_path / "r"
    (repo / "kernels").mkdir(parents=True)
    text = (root / "kernels" / "kernels.toml").read_text()
    (repo / "kernels" / "kernels.toml").write_text(
        text.replace('name = "09_cp_async_pipeline"\n',
                     'name = "09_cp_async_pipeline"\ninject_delay = 0.005\n', 1))
    for f in (root / "kernels").glob("*.cu*"):
        sh.copy(f, repo / "kernels")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert cli_main(["record", "--repo", str(repo)]) == 2
    assert "09_cp_async_pipeline inject_delay = 0.005" in capsys.readouterr().err
    (repo / "kernels" / "kernels.toml").write_text(text)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "y")
    monkeypatch.setenv("GEMM_INJECT_DELAY", "0.01")
    assert cli_main(["record", "--repo", str(repo)]) == 2
    assert "GEMM_INJECT_DELAY=0.01" in capsys.readouterr().err


def test_an_anchor_without_a_recorded_run_is_said_and_not_used(repo, gpu_here, capsys):
    shas = [commit(repo, 30.0, f"c{i}") for i in range(4)]
    res = record(repo, [(s, 30.0) for s in shas[1:]])      # shas[0] was never recorded
    git(repo, "tag", "perf-anchor-old", shas[0])
    assert gate(repo, res) == 0
    assert "has no recorded run before it on this machine; not used" in capsys.readouterr().out


def test_a_calibration_trial_measures_only_what_is_undecided(monkeypatch):
    """As the gate's A/B (one per share, R S S R): a share decided after round 2 (no DROP
    from one round: decision.DROP_MIN_ROUNDS) is not measured again, nor is the reference
    for it."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    calls = []

    def measure(root, series, env=None, **kw):
        share = float((env or {}).get("GEMM_INJECT_DELAY") or 0)
        calls.append((share, {k: tuple(v) for k, v in series.items()}))
        n = len(calls)
        wiggle = 1 + 0.0005 * ((n * 7919) % 11 - 5) / 5
        return {(k, s, m): 30.0 * wiggle / (1 + share) for k, ss in series.items() for s in ss
                for m in calibrate.METRICS}
    monkeypatch.setattr(calibrate.abtest, "measure", measure)
    prior = decision.Noise(0.0005, 29)
    keys = [(k, "4096", m) for k in ("05", "09") for m in calibrate.METRICS]
    got = calibrate.trial(".", ["05", "09"], ["4096"], [0.005, 0.03], GateConfig(max_rounds=5),
                          calibration.Calibration("h200", None, "", noise={k: prior for k in keys}),
                          lambda s: None)
    raw = {k: o["values"] for k, o in got.items()}
    # each decision keeps the per-process values it was made on: the 3 % share its two rounds,
    # the 0.5 % share all five
    assert all(len(raw[k + (0.03,)]["ref"]) == len(raw[k + (0.03,)]["new"]) == 4 for k in keys)
    assert all(len(raw[k + (0.005,)]["ref"]) == len(raw[k + (0.005,)]["new"]) == 10 for k in keys)
    assert all(abs(raw[k + (0.03,)]["new"][0] * 1.03 - 30.0) < 0.1 for k in keys)
    assert all(got[k + (0.03,)]["verdict"] == decision.DROP for k in keys)
    assert all(got[k + (0.005,)]["verdict"] == decision.AMBIGUOUS for k in keys)   # at the margin
    # five rounds R S1 S1 R, then two R S2 S2 R: the decided share no longer measured
    assert [c[0] for c in calls] == [0, 0.005, 0.005, 0] * 5 + [0, 0.03, 0.03, 0] * 2
    e = got[keys[0] + (0.005,)]
    assert e["n_ref"] == e["n_new"] == 10


def _cal_file(d, machine="h200", trials=(1,), sigma=0.001, shares=(0.01,), gate=None, **over):
    from gemm.track.gate import GateConfig
    g = GateConfig(max_rounds=5)
    gate = gate or {"screen": trial_settings(g)["screen"], "min_effect": g.min_effect, "alpha": g.alpha,
                    "min_rounds": g.min_rounds, "max_rounds": g.max_rounds, "budget_s": g.budget_s,
                    "procedure": "a gate A/B per share"}
    det = [{"trial": t, "id": f"{d.name}-{t}", "kernel": "09", "size": "4096", "metric": "tflops", "share": sh,
            "verdict": "DROP", "change": -sh, "lo": -2 * sh, "hi": -sh / 2, "n_ref": 4, "n_new": 4,
            "prior_sigma": sigma, "prior_dof": 29} for t in trials for sh in shares]
    doc = {"gpu_name": "NVIDIA H200", "processes": 30, "gate": gate,
           "noise": [{"kernel": "09", "size": "4096", "metric": "tflops", "sigma": sigma,
                      "dof": 29, "median": 47.8, "values": []}],
           "shares": list(shares), "trials": len(trials), "detection": det,
           "summary": calibrate_summary(det, shares), **over}
    return calibration_file.save(d, machine, doc)


def calibrate_summary(det, shares):
    from gemm.calibrate import runner as calibrate
    return calibrate.summarize(det, shares)


def test_calibration_trials_from_other_lanes_join_the_file(tmp_path, capsys):
    base, lane = tmp_path / "cal", tmp_path / "lane1"
    _cal_file(base, trials=(1, 2))
    other = _cal_file(lane, trials=(1,))
    assert cli_main(["calibrate", "--join", str(other), "--out", str(base)]) == 0
    assert "trials per share: +1 %: 3 (joined from 1 more files)" in capsys.readouterr().out
    doc = calibration.load(base, "h200")[0].doc
    assert sorted({d["trial"] for d in doc["detection"]}) == [1, 2, 3]
    assert doc["summary"][0]["detected"]["0.01"] == "3/3" and doc["trials"] == 3
    # a lane that measured other shares: its trials are counted per share
    assert cli_main(["calibrate", "--join", str(_cal_file(tmp_path / "lane2", shares=(0.005, 0.02))),
                     "--out", str(base)]) == 0
    doc = calibration.load(base, "h200")[0].doc
    assert doc["shares"] == [0.005, 0.01, 0.02] and doc["trials"] == 1
    assert doc["summary"][0]["detected"] == {"0.005": "1/1", "0.01": "3/3", "0.02": "1/1"}
    # refused, and nothing written: other noise, other gate settings, another GPU, no trials
    for i, bad in enumerate((dict(sigma=0.002), dict(gate={"max_rounds": 3}),
                             dict(gpu_name="NVIDIA H100"), dict(trials=()))):
        f = _cal_file(tmp_path / f"bad{i}", **bad)
        assert cli_main(["calibrate", "--join", str(f), "--out", str(base)]) == 2
    assert calibration.load(base, "h200")[0].doc["detection"] == doc["detection"]
    # the file itself, or a lane's copy of it: nothing new, refused
    assert cli_main(["calibrate", "--join", str(base / "h200.json"), "--out", str(base)]) == 2
    assert "no detection trials the base file lacks" in capsys.readouterr().err
    # a lane that started from a copy and added a trial: only that trial joins
    copy = dict(doc, detection=doc["detection"] + [dict(doc["detection"][0], id="new", trial=4)])
    for k in ("schema", "machine", "policy"):
        copy.pop(k)
    calibration_file.save(tmp_path / "lane3", "h200", copy)
    assert cli_main(["calibrate", "--join", str(tmp_path / "lane3" / "h200.json"),
                     "--out", str(base)]) == 0
    doc = calibration.load(base, "h200")[0].doc
    assert doc["summary"][0]["detected"]["0.01"] == "4/4"
    # a base without trials still checks the gate settings the joined trials were made with
    empty = _cal_file(tmp_path / "empty", trials=()).parent
    assert cli_main(["calibrate", "--join", str(_cal_file(tmp_path / "bad9", gate={"max_rounds": 3})),
                     "--out", str(empty)]) == 2


def test_a_calibration_trial_drops_each_series_once_decided(monkeypatch):
    """A quiet series decides in round 2 (the first that may end in a DROP:
    decision.DROP_MIN_ROUNDS) and is measured no more; a noisy one goes on alone, the
    reference arm measuring it and nothing else."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    calls = []

    def measure(root, series, env=None, **kw):
        share = float((env or {}).get("GEMM_INJECT_DELAY") or 0)
        calls.append((share, {k: tuple(v) for k, v in series.items()}))
        n = len(calls)
        out = {}
        for k, ss in series.items():
            noise = 0.006 if k == "05" else 0.0002
            wiggle = 1 + noise * ((n * 7919) % 11 - 5) / 5
            for s in ss:
                for m in calibrate.METRICS:
                    out[(k, s, m)] = 30.0 * wiggle / (1 + share)
        return out
    monkeypatch.setattr(calibrate.abtest, "measure", measure)
    priors = {("09", "4096", m): decision.Noise(0.0002, 29) for m in calibrate.METRICS}
    priors.update({("05", "4096", m): decision.Noise(0.006, 29) for m in calibrate.METRICS})
    got = calibrate.trial(".", ["05", "09"], ["4096"], [0.02], GateConfig(),
                          calibration.Calibration("h200", None, "", noise=priors), lambda s: None)
    assert got[("09", "4096", "tflops", 0.02)]["n_new"] == 4   # decided in round 2
    assert got[("05", "4096", "tflops", 0.02)]["n_new"] > 4
    assert all(series == {"05": ("4096",)} for _, series in calls[8:])   # 05 alone after
    assert [sh for sh, _ in calls[8:12]] == [0, 0.02, 0.02, 0]


def test_a_calibration_trial_keeps_to_the_gates_time_budget(monkeypatch):
    """A share's A/B plans its rounds to fit the gate's budget, as the gate does (a round's
    cost learned from its processes); its open series stay AMBIGUOUS, stopped by the budget,
    not the cap."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    now = [0.0]

    def measure(root, series, env=None, walls=None, **kw):
        share = float((env or {}).get("GEMM_INJECT_DELAY") or 0)
        now[0] += 30.0                                 # each arm's process takes 30 s
        walls.update({None: 0.0, ("09", "4096"): 30.0})   # as abtest.measure: its seconds
        return {(k, s, m): 30.0 / (1 + share) for k, ss in series.items() for s in ss
                for m in calibrate.METRICS}
    monkeypatch.setattr(calibrate.abtest, "measure", measure)
    cal = calibration.Calibration("h200", None, "", noise={
        ("09", "4096", m): decision.Noise(0.0005, 29) for m in calibrate.METRICS})
    key = ("09", "4096", "tflops", 0.005)
    got = calibrate.trial(".", ["09"], ["4096"], [0.005], GateConfig(budget_s=250.0, max_rounds=5),
                          cal, lambda s: None, clock=lambda: now[0])
    # round 1 takes 4 x 30 s = 120 s: a second fits in the 130 s left; a third would not
    assert got[key]["verdict"] == decision.AMBIGUOUS and got[key]["n_new"] == 4
    assert got[key]["stopped"] == "budget"
    got = calibrate.trial(".", ["09"], ["4096"], [0.005], GateConfig(budget_s=1e6, max_rounds=5),
                          cal, lambda s: None, clock=lambda: now[0])
    assert got[key]["n_new"] == 10 and got[key]["stopped"] == "cap"


def test_the_noise_table_shows_a_heavy_tail(tmp_path, capsys):
    """A few processes far from the rest inflate the sd the gate pools; the robust sd and the
    tail count say so (gemm calibrate prints it, gemm show prints it from the file)."""
    from gemm.calibrate.runner import sigma_of, tail_of
    even = [100.0 * (1 + 0.001 * x) for x in (-2, -1, -1, 0, 0, 0, 0, 1, 1, 2) * 3]
    tailed = even[:27] + [99.3, 99.3, 99.2]            # three processes 0.7-0.8 % slow
    sd_even, sd_tailed = sigma_of(even)[0], sigma_of(tailed)[0]
    r_even, n_even = tail_of(even)
    r_tailed, n_tailed = tail_of(tailed)
    assert n_even == 0 and n_tailed == 3
    assert sd_tailed > 2 * sd_even and abs(r_tailed - r_even) < 0.3 * r_even
    assert tail_of([1.0, 1.0]) is None and tail_of([1.0, 1.0, 1.0]) == (0.0, 0)
    root = tmp_path / "calibration"
    calibration_file.save(root, "h200", {"gpu_name": "NVIDIA H200", "processes": 30, "noise": [
        {"kernel": "07", "size": "2048", "metric": "tflops", "sigma": sd_tailed, "dof": 29,
         "median": 100.0, "values": tailed},
        {"kernel": "09", "size": "2048", "metric": "tflops", "sigma": sd_even, "dof": 29,
         "median": 100.0, "values": even}]})
    assert cli_main(["show", str(root / "h200.json")]) == 0
    out = capsys.readouterr().out
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.startswith(("07 ", "09 "))}
    assert "robust sd %" in out and rows["07"][6] == "3" and rows["09"][6] == "0"
    assert rows["07"][4] == f"{100 * sd_tailed:.3f}"


def test_a_detection_table_says_which_rule_it_was_made_under(tmp_path, capsys):
    """`gemm show` of a calibration names the gate settings its trials were made under and
    where today's gate differs, so a table made before a change of rule is read as such."""
    from gemm.track.gate import GateConfig
    _cal_file(tmp_path, gate={**_gate_dict(), "robust": True})          # before overtime
    assert cli_main(["show", str(tmp_path / "h200.json")]) == 0
    out = capsys.readouterr().out
    assert ("made under: alpha 0.001, minimum effect 1 % at 2048^3 and up, rounds 1-8, "
            "budget 180 s, Huber locations for heavy-tailed series, no overtime "
            "(today's gate: trimmed means for heavy-tailed series, "
            f"overtime {GateConfig().overtime_s:g} s)") in out
    _cal_file(tmp_path, gate={**_gate_dict(), "robust": "trimmed",
                              "overtime_s": GateConfig().overtime_s})
    assert cli_main(["show", str(tmp_path / "h200.json")]) == 0
    out = capsys.readouterr().out
    assert "made under:" in out and "today's gate" not in out


def test_gemm_show_of_a_calibration_needs_no_scipy(tmp_path, monkeypatch, capsys):
    """A plain install (no track extra) still prints the file; only the rounds column, which
    needs scipy's t quantiles, is left out, and it says so."""
    import sys
    root = tmp_path / "calibration"
    calibration_file.save(root, "h200", {"gpu_name": "NVIDIA H200", "processes": 4, "noise": [
        {"kernel": "09", "size": "2048", "metric": "tflops", "sigma": 0.001, "dof": 3,
         "median": 47.0, "values": [47.0, 47.05, 46.95, 47.02]}]})
    monkeypatch.setitem(sys.modules, "scipy", None)      # import scipy raises ImportError
    assert cli_main(["show", str(root / "h200.json")]) == 0
    out = capsys.readouterr().out
    assert "scipy is not installed" in out
    row = next(ln.split() for ln in out.splitlines() if ln.startswith("09 "))
    assert row[-2] == "-" and row[4] == "0.100"
    assert row[-1] == "mean"          # which rule decides needs no scipy


def test_an_interrupted_calibration_keeps_its_processes_but_not_over_better_noise(tmp_path, monkeypatch):
    """`timeout -s INT` or Ctrl-C during the A/A: the processes measured so far are written
    (a policy study's scratch calibration keeps what it got), but a series the file already
    knows from more processes keeps that noise, and no trial runs on unfinished noise."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    calls = []

    def measure(root, series, env=None, **kw):
        calls.append(1)
        if len(calls) > 4:
            raise KeyboardInterrupt
        w = 1 + 0.001 * (len(calls) % 3 - 1)
        return {(k, s, m): 30.0 * w for k, ss in series.items() for s in ss for m in calibrate.METRICS}
    monkeypatch.setattr(calibrate.abtest, "measure", measure)
    _cal_file(tmp_path, sigma=0.001)                 # 09 at 4096 known from 30 processes
    with pytest.raises(KeyboardInterrupt):
        calibrate.run(".", "h200", ["05", "09"], ["4096"], 30, ["09"], ["4096"], [0.01], 1,
                      GateConfig(), tmp_path, log=lambda s: None, gpu_name="NVIDIA H200")
    cal, why = calibration.load(tmp_path, "h200", gpu_name="NVIDIA H200")
    assert why == "" and cal.doc["processes"] == 4
    assert cal.prior("05", "4096", "tflops").dof == 3                       # new: 4 processes
    assert cal.prior("09", "4096", "tflops") == decision.Noise(0.001, 29)   # better: kept
    assert len(calls) == 5                                                  # no trial ran
    # interrupted before two processes: nothing to write, the file as it was
    calls.clear(); calls.extend([1] * 4)
    before = (tmp_path / "h200.json").read_text()
    with pytest.raises(KeyboardInterrupt):
        calibrate.run(".", "h200", ["05"], ["2048"], 30, ["09"], ["4096"], [0.01], 0,
                      GateConfig(), tmp_path, log=lambda s: None, gpu_name="NVIDIA H200")
    assert (tmp_path / "h200.json").read_text() == before


def _aa_file(d, values: dict, pci: str, gpu: str | None = None, date: str | None = None):
    """A calibration file of one GPU's A/A values {(kernel, size): [TFLOPS per process]}."""
    from gemm.calibrate import runner as calibrate
    got = {(k, s, "tflops"): v for (k, s), v in values.items()}
    doc = {"gpu_name": "NVIDIA H200", "processes": max(len(v) for v in values.values()),
           "device": {"name": "NVIDIA H200", "pci_bus_id": pci}, "gpu": gpu,
           "noise": calibrate.noise_rows(got)}
    if date:
        doc["date"] = date
    return calibration_file.save(d, "h200", doc)


def test_noise_of_several_gpus_pools_within_gpu_spread_only(tmp_path, capsys):
    """`gemm calibrate --pool`: per series the dof-weighted mean of each GPU's variance, the
    dof summed; one GPU running 2 % faster than another adds nothing. Series only one file
    has keep its noise; the detection table (made with the old noise) is emptied; the file
    says which GPUs it pooled, and the gate's prior is the pooled noise."""
    import math
    from gemm.calibrate import runner as calibrate
    quiet = [42.0 * (1 + 0.0005 * e) for e in (-2, -1, 0, 1, 2)]
    loud = [42.84 * (1 + 0.002 * e) for e in (-2, -1, 0, 1, 2, 0, 0, 0, 0)]   # 2 % faster
    base = _aa_file(tmp_path / "a", {("07", "8192"): quiet, ("09", "4096"): quiet},
                    "0000:00:06.0", "NVIDIA H200 GPU-aaaa")
    doc = json.loads(base.read_text())
    doc["detection"] = [{"trial": 1, "share": 0.01, "kernel": "07", "size": "8192",
                         "metric": "tflops"}]
    base.write_text(json.dumps(doc))
    other = _aa_file(tmp_path / "b", {("07", "8192"): loud}, "0000:00:07.0", "NVIDIA H200 GPU-bbbb")
    assert cli_main(["calibrate", "--pool", str(other), "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr()
    assert "pooled over 2 A/A runs on 2 GPUs (GPU-aaaa x 5, GPU-bbbb x 9)" in out.out
    assert "detection table of 1 trial(s) is dropped" in out.err
    cal = calibration.load(tmp_path / "a", "h200")[0]
    sa = calibrate.sigma_of(quiet)[0]
    sb = calibrate.sigma_of(loud)[0]
    want = math.sqrt((4 * sa ** 2 + 8 * sb ** 2) / 12)
    p07, p09 = cal.prior("07", "8192", "tflops"), cal.prior("09", "4096", "tflops")
    assert (p07.sigma, p07.dof) == (pytest.approx(want), 12)
    assert (p09.sigma, p09.dof) == (pytest.approx(sa), 4)
    assert cal.doc["detection"] == [] and cal.doc["processes"] == 14
    row = next(r for r in cal.doc["noise"] if r["kernel"] == "07")
    assert [p["source"]["gpu"] for p in row["parts"]] == ["NVIDIA H200 GPU-aaaa",
                                                          "NVIDIA H200 GPU-bbbb"]
    # the values shown are each GPU's, brought to the first one's median: no 2 % step in them
    assert max(row["values"]) / min(row["values"]) < 1.01
    # pooling the same GPU's noise twice, or a file that is not usable here: refused
    assert cli_main(["calibrate", "--pool", str(other), "--out", str(tmp_path / "a")]) == 2
    assert "already in the base file" in capsys.readouterr().err
    h100 = calibration_file.save(tmp_path / "c", "h200", {"gpu_name": "NVIDIA H100", "noise": []})
    assert cli_main(["calibrate", "--pool", str(h100), "--out", str(tmp_path / "a")]) == 2
    # a pooled file pools on: a third GPU adds its part
    third = _aa_file(tmp_path / "d", {("07", "8192"): quiet}, "0000:00:06.0", "NVIDIA H200 GPU-cccc")
    assert cli_main(["calibrate", "--pool", str(third), "--out", str(tmp_path / "a")]) == 0
    cal = calibration.load(tmp_path / "a", "h200")[0]
    assert cal.prior("07", "8192", "tflops").dof == 16
    assert len(cal.doc["sources"]) == 3
    # pooling only series no trial decided (another kernel's noise) keeps the detection table
    doc = json.loads(calibration_file.path_for(tmp_path / "a", "h200").read_text())
    p07 = cal.prior("07", "8192", "tflops")
    doc["detection"] = [{"trial": 1, "share": 0.01, "kernel": "07", "size": "8192",
                         "metric": "tflops", "prior_sigma": p07.sigma, "prior_dof": p07.dof}]
    calibration_file.path_for(tmp_path / "a", "h200").write_text(json.dumps(doc))
    capsys.readouterr()
    tc = _aa_file(tmp_path / "e", {("11", "1000"): loud}, "0000:00:07.0", "NVIDIA H200 GPU-eeee")
    assert cli_main(["calibrate", "--pool", str(tc), "--out", str(tmp_path / "a")]) == 0
    assert "detection table of 1 trial(s) is kept" in capsys.readouterr().err
    cal = calibration.load(tmp_path / "a", "h200")[0]
    assert len(cal.doc["detection"]) == 1 and cal.prior("11", "1000", "tflops").dof == 8
    assert cal.prior("07", "8192", "tflops").dof == 16
    # ... unless a series it decided borrowed its noise, and the pooled series moves that
    doc = json.loads(calibration_file.path_for(tmp_path / "a", "h200").read_text())
    p05 = cal.prior("05", "8192", "tflops")                  # borrowed from 07's
    doc["detection"].append({"trial": 1, "share": 0.01, "kernel": "05", "size": "8192",
                             "metric": "tflops", "prior_sigma": p05.sigma, "prior_dof": p05.dof})
    calibration_file.path_for(tmp_path / "a", "h200").write_text(json.dumps(doc))
    louder = [42.0 * (1 + 0.01 * e) for e in (-2, -1, 0, 1, 2)]
    more = _aa_file(tmp_path / "f", {("06", "8192"): louder}, "0000:00:07.0", "NVIDIA H200 GPU-ffff")
    assert cli_main(["calibrate", "--pool", str(more), "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "detection table of 1 trial(s) is dropped" in err and "05 at 8192" in err
    assert calibration.load(tmp_path / "a", "h200")[0].doc["detection"] == []


def test_a_pooled_calibration_is_as_old_as_its_oldest_part(tmp_path):
    from gemm.calibrate import runner as calibrate
    vals = {("07", "8192"): [42.0, 42.1, 41.9]}
    base = _aa_file(tmp_path / "a", vals, "0000:00:06.0", "G-a")
    month_ago = time.time() - 30 * 86400
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(month_ago))
    old = _aa_file(tmp_path / "b", vals, "0000:00:07.0", "G-b", date=stamp)
    calibrate.pool(tmp_path / "a", "h200", [old], log=lambda s: None)
    assert json.loads(base.read_text())["date"] == stamp
    # stale when its oldest part is: 180 days after that part, not after the pooling
    late = month_ago + (calibration_file.MAX_AGE_DAYS + 1) * 86400
    assert calibration.load(tmp_path / "a", "h200", now=late)[0] is None
    assert calibration.load(tmp_path / "a", "h200", now=late - 2 * 86400)[0] is not None


def test_a_lane_copy_pools_only_what_it_measured_and_new_aa_joins_a_pooled_file(tmp_path,
                                                                             monkeypatch):
    """A lane's file starts as a copy of the base and keeps the rows it did not measure again:
    pooling it adds only the runs the base lacks (no series counted twice). A/A measured on a
    pooled file (gemm calibrate --processes N) joins each series as this GPU's part, in place
    of an earlier part of the same GPU, instead of un-pooling it."""
    import shutil
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    quiet = [42.0 * (1 + 0.0005 * e) for e in (-2, -1, 0, 1, 2)]
    src_a = {"gpu": "G-a", "pci_bus_id": "0000:00:06.0", "date": "2026-11-30T10:00:00Z",
             "processes": 5, "id": "run-a"}
    got = {("07", "8192", "tflops"): quiet, ("09", "4096", "tflops"): quiet}
    calibration_file.save(tmp_path / "a", "h200", {"gpu_name": "NVIDIA H200", "processes": 5,
                                              "noise": calibrate.noise_rows(got, src_a)})
    shutil.copytree(tmp_path / "a", tmp_path / "lane")
    lane = json.loads((tmp_path / "lane" / "h200.json").read_text())
    src_b = dict(src_a, gpu="G-b", id="run-b")
    lane["noise"] = [r for r in lane["noise"] if r["kernel"] != "07"] + calibrate.noise_rows(
        {("07", "8192", "tflops"): quiet[:4]}, src_b)
    (tmp_path / "lane" / "h200.json").write_text(json.dumps(lane))
    calibrate.pool(tmp_path / "a", "h200", [tmp_path / "lane" / "h200.json"], log=lambda s: None)
    cal = calibration.load(tmp_path / "a", "h200")[0]
    assert cal.prior("07", "8192", "tflops").dof == 4 + 3
    assert cal.prior("09", "4096", "tflops").dof == 4          # not 8: the lane only copied it
    # new A/A processes on G-b join the pooled file, replacing G-b's earlier part
    monkeypatch.setattr(calibrate, "noise", lambda *a: (
        {("07", "8192", "tflops"): quiet + quiet}, {"name": "NVIDIA H200",
                                                    "pci_bus_id": "0000:00:07.0"}, 10, False))
    calibrate.run(".", "h200", ["07"], ["8192"], 10, ["07"], ["8192"], [0.01], 0,
                  GateConfig(), tmp_path / "a", log=lambda s: None, gpu="G-b")
    cal = calibration.load(tmp_path / "a", "h200")[0]
    row = next(r for r in cal.doc["noise"] if r["kernel"] == "07")
    assert sorted(p["source"]["gpu"] for p in row["parts"]) == ["G-a", "G-b"]
    assert cal.prior("07", "8192", "tflops").dof == 4 + 9
    assert cal.prior("09", "4096", "tflops").dof == 4
    assert cal.doc["date"] == "2026-11-30T10:00:00Z" and len(cal.doc["sources"]) == 2


def test_calibration_keeps_each_processs_per_placement_medians(monkeypatch, tmp_path):
    """Whether a slow A/A process was slow on all its operand placements or on a few (07 at
    2048's tail) can be read from the file: the A/A rows and the trials' TFLOPS rows keep the
    kernel's median per placement, per process, as `gemm measure` reported them."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    doc = {"records": [
        {"kernel": "07", "size": "2048", "role": "kernel",
         "kernel_time": {"per_set": [{"median_s": 4.1e-4}, {"median_s": 4.2e-4}]}},
        {"kernel": "cublas_fp32", "size": "2048", "role": "baseline",
         "baseline_time": {"per_set": [{"median_s": 3.4e-4}]}},
        {"kernel": "05", "size": "2048", "role": "kernel", "kernel_time": {}}]}
    assert calibrate.placements_of(doc) == {("07", "2048"): [4.1e-4, 4.2e-4]}
    n = [0]

    def measure(root, series, env=None, docs=None, **kw):
        n[0] += 1
        slow = 1.0 + 0.005 * (n[0] % 3 == 0)
        if docs is not None:
            docs.append({"records": [{"kernel": "07", "size": "2048", "role": "kernel",
                                      "kernel_time": {"per_set": [{"median_s": 4.1e-4 * slow},
                                                                  {"median_s": 4.1e-4}]}}]})
        share = float((env or {}).get("GEMM_INJECT_DELAY") or 0)
        return {("07", "2048", m): 41.0 / slow / (1 + share) for m in calibrate.METRICS}
    monkeypatch.setattr(calibrate.abtest, "measure", measure)
    places: dict = {}
    got, _, _, _ = calibrate.noise(".", ["07"], ["2048"], 3, lambda s: None, places)
    rows = {r["metric"]: r for r in calibrate.noise_rows(got, placements=places)}
    assert rows["tflops"]["placements"] == [[4.1e-4, 4.1e-4], [4.1e-4, 4.1e-4],
                                            [4.1e-4 * 1.005, 4.1e-4]]
    assert "placements" not in rows["pct_of_cublas"]
    values = {k: o["values"] for k, o in calibrate.trial(
        ".", ["07"], ["2048"], [0.02], GateConfig(), calibration.Calibration(
            "h200", None, "", noise={("07", "2048", m): decision.Noise(0.002, 29)
                                     for m in calibrate.METRICS}), lambda s: None).items()}
    kept = values[("07", "2048", "tflops", 0.02)]
    assert len(kept["placements"]["ref"]) == len(kept["ref"]) >= 2
    assert all(len(p) == 2 for p in kept["placements"]["new"])
    assert "placements" not in values[("07", "2048", "pct_of_cublas", 0.02)]


def test_a_trial_names_the_gpu_it_ran_on(tmp_path, monkeypatch):
    """Each detection row keeps the GPU of its trial (the design counts trials and false-alarm
    runs per GPU; joined lanes come from different GPUs)."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig

    def measure(root, series, env=None, **kw):
        w = 0.97 if env else 1.0        # the injected share's arm: 3 % slower
        return {(k, s, m): 30.0 * w for k, ss in series.items() for s in ss
                for m in calibrate.METRICS}
    monkeypatch.setattr(calibrate.abtest, "measure", measure)
    _cal_file(tmp_path, trials=())
    calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.03], 1,
                  GateConfig(), tmp_path, log=lambda s: None, gpu_name="NVIDIA H200",
                  gpu="NVIDIA H200 GPU-abc")
    det = calibration.load(tmp_path, "h200")[0].doc["detection"]
    assert det and {d["gpu"] for d in det} == {"NVIDIA H200 GPU-abc"}
    assert {d["verdict"] for d in det if d["metric"] == "tflops"} == {"DROP"}
    assert {d["rule"] for d in det} == {"mean"}     # no A/A values in this file: no tail known


def test_the_robust_rule_reads_its_prior_from_the_files_aa_values(tmp_path):
    """Calibration.robust_prior: from a series' own A/A values (per GPU where pooled); none
    for a series the file does not hold (no borrowing); GateConfig.decide uses it only when
    the robust rule is on."""
    import random
    from gemm.track.gate import GateConfig
    rng = random.Random(3)
    per_gpu = [[41.2 * g * math.exp(rng.gauss(0, 0.001)) * (0.993 if i % 8 == 7 else 1)
                for i in range(24)] for g in (1.0, 1.02)]
    quiet = [[47.3 * g * math.exp(rng.gauss(0, 0.001)) for _ in range(24)] for g in (1.0, 1.01)]
    a = _aa_file(tmp_path / "a", {("07", "2048"): per_gpu[0], ("09", "2048"): quiet[0]},
                 "00:06.0", gpu="G-a")
    b = _aa_file(tmp_path / "b", {("07", "2048"): per_gpu[1], ("09", "2048"): quiet[1]},
                 "00:07.0", gpu="G-b")
    assert cli_main(["calibrate", "--pool", str(b), "--out", str(a.parent)]) == 0
    cal = calibration.load(a.parent, "h200")[0]
    rp = cal.robust_prior("07", "2048", "tflops")
    assert rp == decision.trimmed_noise(per_gpu)[0] and rp.sigma < cal.prior("07", "2048", "tflops").sigma
    assert cal.robust_prior("05", "2048", "tflops") is None        # borrowed noise: no robust prior
    assert cal.robust_prior("09", "2048", "tflops") is None        # no tail: the mean rule
    assert decision.trimmed_noise(quiet) is not None
    ref = [[41.2, 41.21], [41.19, 41.2 * 0.993], [41.2, 41.19]]
    new = [[40.8, 40.79], [40.81, 40.8], [40.8, 40.8]]
    off, on = GateConfig(robust=False), GateConfig()
    mean = off.decide(ref, new, 0.01, 40, cal.prior("07", "2048", "tflops"), rp)
    assert mean == decision.effect_rounds(ref, new, 0.01, off.alpha, 40,
                                          cal.prior("07", "2048", "tflops"))
    rob = on.decide(ref, new, 0.01, 40, cal.prior("07", "2048", "tflops"), rp)
    assert rob == decision.effect_trimmed(ref, new, 0.01, on.alpha, 40, rp) != mean
    assert rob.rule == "trimmed" and mean.rule == "mean"
    assert on.decide(ref, new, 0.01, 40, None, None) == decision.effect_rounds(
        ref, new, 0.01, on.alpha, 40, None)


def test_trials_under_the_robust_rule_do_not_join_trials_of_the_mean_rule(tmp_path, monkeypatch):
    """The file's gate settings name the robust rule only when it is on, so a table made under
    the mean rule refuses robust trials (--add-trials) and keeps its own settings as they were."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    monkeypatch.setattr(calibrate.abtest, "measure", lambda root, series, env=None, **kw: {
        (k, s, m): 30.0 * (0.97 if env else 1.0) for k, ss in series.items() for s in ss
        for m in calibrate.METRICS})
    _cal_file(tmp_path, trials=(1,), gate={**_gate_dict(), "max_rounds": GateConfig().max_rounds})
    with pytest.raises(calibrate.Refused, match="other gate settings"):
        calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.01], 1,
                      GateConfig(overtime_s=0.0), tmp_path, log=lambda s: None,
                      add_trials=True)
    calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.01], 1,
                  GateConfig(robust=False, overtime_s=0.0), tmp_path, log=lambda s: None,
                  add_trials=True)
    doc = calibration.load(tmp_path, "h200")[0].doc
    assert "robust" not in doc["gate"] and "overtime_s" not in doc["gate"] and doc["trials"] == 2


def test_trials_with_overtime_do_not_join_trials_made_without_it(tmp_path, monkeypatch):
    """Overtime changes the procedure where the budget binds, so the file's gate settings name
    it: a table made without it (the robust rule alone) refuses trials made with it."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    monkeypatch.setattr(calibrate.abtest, "measure", lambda root, series, env=None, **kw: {
        (k, s, m): 30.0 * (0.97 if env else 1.0) for k, ss in series.items() for s in ss
        for m in calibrate.METRICS})
    _cal_file(tmp_path, trials=(1,), gate={**_gate_dict(), "robust": "trimmed"})
    with pytest.raises(calibrate.Refused, match="other gate settings"):
        calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.01], 1,
                      GateConfig(), tmp_path, log=lambda s: None, add_trials=True)
    calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.01], 1,
                  GateConfig(overtime_s=0.0), tmp_path, log=lambda s: None, add_trials=True)
    assert calibration.load(tmp_path, "h200")[0].doc["trials"] == 2
    calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.01], 1,
                  GateConfig(), tmp_path, log=lambda s: None)      # a new table
    doc = calibration.load(tmp_path, "h200")[0].doc
    assert doc["gate"]["overtime_s"] == GateConfig().overtime_s and doc["trials"] == 1
    assert doc["detection"][0]["overtime"] is False


def _gate_dict():
    from gemm.track.gate import GateConfig
    g = GateConfig()
    return {"screen": trial_settings(g)["screen"], "min_effect": g.min_effect, "alpha": g.alpha,
            "min_rounds": g.min_rounds, "max_rounds": g.max_rounds, "budget_s": g.budget_s,
            "procedure": "a gate A/B per share", "prior_rejected": "welch, new pairs tested"}


def test_trials_under_the_welch_fallback_do_not_join_trials_made_before_it(tmp_path, monkeypatch):
    """Where the rounds reject the prior, trials decide by Welch since 2e332d0 (before: by the
    rounds' spread alone); the file's gate settings say so, and a table without it refuses the
    new trials (--add-trials)."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    monkeypatch.setattr(calibrate.abtest, "measure", lambda root, series, env=None, **kw: {
        (k, s, m): 30.0 * (0.97 if env else 1.0) for k, ss in series.items() for s in ss
        for m in calibrate.METRICS})
    before = {k: v for k, v in _gate_dict().items() if k != "prior_rejected"}
    _cal_file(tmp_path, trials=(1,), gate={**before, "robust": "trimmed",
                                            "overtime_s": GateConfig().overtime_s})
    with pytest.raises(calibrate.Refused, match="other gate settings"):
        calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.01], 1,
                      GateConfig(), tmp_path, log=lambda s: None, add_trials=True)
    assert trial_settings(GateConfig())["prior_rejected"] == "welch, new pairs tested"


def test_trials_of_the_gates_engine_do_not_join_trials_made_before_it(tmp_path, monkeypatch):
    """Trials run as one gate A/B per share (gemm.track.abrun) say so in the file's gate
    settings: a table of the earlier procedure (its own round loop, shares interleaved)
    refuses them (--add-trials); a new table names it."""
    from gemm.calibrate import runner as calibrate
    from gemm.track.gate import GateConfig
    monkeypatch.setattr(calibrate.abtest, "measure", lambda root, series, env=None, **kw: {
        (k, s, m): 30.0 * (0.97 if env else 1.0) for k, ss in series.items() for s in ss
        for m in calibrate.METRICS})
    before = {k: v for k, v in _gate_dict().items() if k != "procedure"}
    _cal_file(tmp_path, trials=(1,), gate={**before, "robust": True, "overtime_s": 60.0})
    with pytest.raises(calibrate.Refused, match="other gate settings"):
        calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.01], 1,
                      GateConfig(), tmp_path, log=lambda s: None, add_trials=True)
    calibrate.run(".", "h200", ["09"], ["4096"], 0, ["09"], ["4096"], [0.01], 1,
                  GateConfig(), tmp_path, log=lambda s: None)
    doc = calibration.load(tmp_path, "h200")[0].doc
    assert doc["gate"]["procedure"] == calibrate.PROCEDURE and doc["trials"] == 1


def test_the_verdicts_and_the_noise_table_say_which_rule_decides(tmp_path, capsys):
    """`gemm show` of a calibration names each series' rule (trimmed where the A/A has a heavy
    tail: Calibration.heavy_tailed)."""
    import random
    rng = random.Random(9)
    tailed = [41.2 * math.exp(rng.gauss(0, 0.001)) * (0.993 if i % 8 == 7 else 1)
              for i in range(32)]
    quiet = [47.3 * math.exp(rng.gauss(0, 0.001)) for _ in range(32)]
    f = _aa_file(tmp_path / "c", {("07", "2048"): tailed, ("09", "2048"): quiet}, "00:06.0")
    cal = calibration.load(f.parent, "h200")[0]
    assert cal.heavy_tailed("07", "2048", "tflops") and not cal.heavy_tailed("09", "2048", "tflops")
    assert not cal.heavy_tailed("05", "2048", "tflops")           # not calibrated itself
    assert cli_main(["show", str(f)]) == 0
    rows = {ln.split()[0]: ln.split() for ln in capsys.readouterr().out.splitlines()
            if ln.startswith(("07 ", "09 "))}
    assert rows["07"][-1] == "trimmed" and rows["09"][-1] == "mean"


def test_unguarded_rounds_are_said_once_per_ab():
    """ABRun.moved, round after round, where every undecided series borrows its noise: the
    log says once that the A/B runs without an A/A control; a series calibrated itself is a
    control (nothing said)."""
    from gemm.track.confirm import ABRun
    from gemm.track.gate import Row
    N = decision.Noise
    cal = calibration.Calibration("h200", None, "", noise={
        ("05_2d_blocktiling", "4096", "tflops"): N(0.002, 60)})
    rows = [(Row("11_tf32_wmma", "4096", "tflops", 5, 30.0, 29.5, -0.017, 0.005, "drop?"),
             "a" * 40)]
    said: list = []
    run = ABRun(rows, GateConfig(), "b" * 40, {}, said.append, cal)
    assert run.moved() == [] and run.moved() == []
    assert len([s for s in said if "no A/A control" in s]) == 1
    said.clear()
    own = ABRun([(Row("05_2d_blocktiling", "4096", "tflops", 5, 30.0, 29.5, -0.017, 0.005,
                      "drop?"), "a" * 40)], GateConfig(), "b" * 40, {}, said.append, cal)
    assert own.moved() == [] and not said
