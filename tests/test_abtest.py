"""The gate's A/B confirmation, on the CPU: real git worktrees and real subprocesses, each
commit carrying a stand-in `gemm` package whose 'measurement' is a number fixed in that commit.
This checks the plumbing the GPU run relies on: the right code is checked out and measured
through its own entry point (`python -m gemm measure --task`), both sides are measured in
turns, and the gate judges code against code, so a machine shift is dismissed and a code
regression is not."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gemm.cli import main as cli_main
from gemm.track import codeid
from gemm.track import abtest
from tests.asvfake import write_benchmarks, write_run
from tests.stubrepo import commit_fixed, commit_package, git, new_repo

@pytest.fixture
def stub_repo(tmp_path):
    return new_repo(tmp_path / "repo")


def ab_rounds(repo, reference, new, series, rounds=1, log=lambda s: None) -> dict:
    """`rounds` R N N R rounds of the gate's engine (gemm.track.abrun) over `series` with both
    commits' code in worktrees: {(kernel, size, metric): {"reference": [...], "new": [...]}}."""
    from gemm.track.abrun import ABRun
    from gemm.track.abtest import in_trees
    from gemm.track.gate import GateConfig, Row
    rows = [Row(k, s, m, 0, None, None, None, None, "drop?", min_effect=0.01)
            for k, sizes in series.items() for s in sizes for m in abtest.METRICS]
    tree: dict = {}
    ab = ABRun([(r, reference) for r in rows], GateConfig(min_rounds=rounds, max_rounds=rounds),
               new, in_trees(tree), log, None)
    with abtest.trees(repo, [reference, new]) as trees:
        tree.update(trees)
        ab.run()
    got = {}
    for c in ab.comps:
        got[c.key] = {"reference": [x for p in c.refs for x in p],
                      "new": [x for p in c.news for x in p]}
    return got


def test_the_ab_measures_each_commits_own_code_in_turns(stub_repo):
    a = commit_fixed(stub_repo, 30.0, "a")
    b = commit_fixed(stub_repo, 27.0, "b")
    log = []
    got = ab_rounds(stub_repo, a, b, {"05_2d": ["4096", "8192"]}, rounds=2, log=log.append)
    assert got[("05_2d", "4096", "tflops")] == {"reference": [30.0] * 4, "new": [27.0] * 4}
    assert got[("05_2d", "8192", "pct_of_cublas")]["new"] == [54.0] * 4
    sides = [line.split(": ")[1].split()[0] for line in log]
    assert sides == ["reference", "new", "new", "reference"] * 2   # A B B A rounds
    assert "gemm-ab-" not in git(stub_repo, "worktree", "list")  # worktrees removed


def test_unknown_commit_and_broken_code_raise_aberror(stub_repo):
    a = commit_fixed(stub_repo, 30.0, "a")
    with pytest.raises(abtest.ABError, match="rev-parse"):
        ab_rounds(stub_repo, "f" * 40, a, {"k": ["512"]}, log=lambda s: None)
    (stub_repo / "gemm" / "__main__.py").write_text(
        "import sys\nif '--help' in sys.argv: sys.exit(0)\nraise ImportError('broken on purpose')\n")
    git(stub_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "broken")
    broken = git(stub_repo, "rev-parse", "HEAD")
    with pytest.raises(abtest.ABError, match="broken on purpose"):
        ab_rounds(stub_repo, a, broken, {"k": ["512"]}, log=lambda s: None)


def history_for(stub_repo, commits_values):
    res = stub_repo.parent / "results"
    write_benchmarks(res, ["05_2d"], ["4096"])
    for i, (sha, v) in enumerate(commits_values):
        write_run(res, sha, 1_000_000 + i, {("05_2d", "4096"): v}, ["05_2d"], ["4096"])
    return res


def gate(stub_repo, res, *extra):
    """The gate on this stand-in history only: no calibration, no anchor of the real repo."""
    return cli_main(["regress", "--results", str(res), "--machine", "h200", "--repo",
                     str(stub_repo), "--verdicts", str(stub_repo.parent / "verdicts"),
                     "--calibration", str(stub_repo.parent / "calibration"), "--no-anchor",
                     *extra])


def test_a_machine_shift_is_dismissed(stub_repo, gpu_here, capsys):
    # both commits' code runs at 29.0 on this machine; the history was recorded at 30 elsewhere
    shas = [commit_fixed(stub_repo, 29.0, f"c{i}") for i in range(4)]
    res = history_for(stub_repo, [(shas[0], 30.0), (shas[1], 30.1), (shas[2], 29.9),
                                  (shas[3], 29.0)])
    assert gate(stub_repo, res) == 0
    out = capsys.readouterr().out
    assert "noise" in out and "A/B vs " + shas[2][:10] in out   # the newest earlier run
    assert "REGRESSION" not in out


def test_a_code_regression_is_confirmed_and_named(stub_repo, gpu_here, capsys):
    shas = [commit_fixed(stub_repo, 30.0, f"c{i}") for i in range(3)]
    shas.append(commit_fixed(stub_repo, 29.0, "slower"))
    res = history_for(stub_repo, [(shas[0], 30.0), (shas[1], 30.2), (shas[2], 30.0),
                                  (shas[3], 29.0)])
    assert gate(stub_repo, res, "--json", str(stub_repo.parent / "v.json")) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 05_2d at 4096: TFLOPS DROP" in out
    assert "A/B vs " + shas[2][:10] + " here: -3.33 % [-3.33 %, -3.33 %] (4 vs 4 processes" in out
    rows = json.loads((stub_repo.parent / "v.json").read_text())["rows"]
    tf = [r for r in rows if r["metric"] == "tflops"][0]
    assert (tf["ab_reference"], tf["ab_new"], tf["reference"]) == (30.0, 29.0, shas[2])  # the newest earlier run


def test_recorded_verdicts_stand_in_for_a_gpu_but_only_for_that_value(stub_repo, monkeypatch,
                                                                        capsys):
    import gemm.measure.facts
    import gemm.track.confirm
    shas = [commit_fixed(stub_repo, 29.0, f"c{i}") for i in range(3)]
    res = history_for(stub_repo, [(shas[0], 30.0), (shas[1], 30.0), (shas[2], 29.0)])
    monkeypatch.setattr(gemm.track.confirm, "gpu_present", lambda: (True, ""))
    monkeypatch.setattr(gemm.measure.facts, "gpu_identity", lambda: "NVIDIA H200 GPU-test")
    assert gate(stub_repo, res, "--record-verdicts") == 0
    kept = stub_repo.parent / "verdicts" / "h200" / f"{shas[2]}.json"
    assert {r["verdict"] for r in json.loads(kept.read_text())["rows"]} == {"noise"}
    monkeypatch.setattr(gemm.track.confirm, "gpu_present", lambda: (False, "no GPU here"))
    capsys.readouterr()
    assert gate(stub_repo, res) == 0
    assert "recorded 20" in capsys.readouterr().out
    # the commit is re-recorded with another value: the old verdict no longer applies
    write_run(res, shas[2], 1_000_002, {("05_2d", "4096"): 28.9}, ["05_2d"], ["4096"])
    assert gate(stub_repo, res) == 1
    assert "unconfirmed: no GPU here" in capsys.readouterr().out


def test_without_an_ab_the_history_alone_never_fails_where_a_gpu_is(stub_repo, gpu_here,
                                                                     capsys):
    shas = [commit_fixed(stub_repo, 29.0, f"c{i}") for i in range(2)]
    res = history_for(stub_repo, [("e" * 40, 30.0), (shas[1], 29.0)])   # unknown reference
    assert gate(stub_repo, res) == 0          # -3.3 % on the history, but no A/B could be made
    out = capsys.readouterr()
    assert "UNRESOLVED" in out.out and "the A/B broke off" in out.out   # the why, typed
    assert "broke off" in out.err and "rev-parse" in out.err           # the error, logged
    assert gate(stub_repo, res, "--strict") == 1


def test_the_real_measure_document_is_what_the_ab_reads(monkeypatch, tmp_path):
    """The contract between `gemm measure` (gemm.measure.sweep's document) and the A/B's
    reader, with the worker replaced by one that reports a timed record."""
    from pathlib import Path

    import gemm.measure.sweep as sw
    from gemm.core.problem import Problem

    def worker(job, timeout=None):
        name, p = job["tasks"][0]
        flops = 2 * p["M"] * p["N"] * p["K"]
        yield "result", {"kernel": name, "role": "kernel", "size": str(p["M"]),
                         "flops": flops, "status": "ok",
                         "kernel_time": {"samples_s": [flops / 30e12] * 3},
                         "baseline_time": {"samples_s": [flops / 50e12] * 3}}
        yield "exit", {"code": 0, "stderr": "", "timed_out": False}

    monkeypatch.setattr(sw, "run_worker", worker)
    doc = json.loads(json.dumps(sw.sweep(["05_2d_blocktiling"], [Problem.square(4096)])))
    assert doc["schema"] == "gemm.measure/1"
    tree = Path(sw.__file__).resolve().parents[2]
    got = abtest._values(doc, tree)
    assert got[("05_2d_blocktiling", "4096", "tflops")] == pytest.approx(30.0)
    assert got[("05_2d_blocktiling", "4096", "pct_of_cublas")] == pytest.approx(60.0)



def test_a_value_the_rule_cannot_take_is_a_failure_not_a_crash():
    """0, NaN or infinity from an arm's measurement is None (the target failed there): the
    decision rule takes logs of positive values and would stop the whole gate with a ValueError."""
    doc = {"values": [{"kernel": "k", "size": s, "status": "ok",
                       "metrics": {"tflops": v, "pct_of_cublas": 50.0}}
                      for s, v in (("1", 0.0), ("2", float("nan")), ("3", float("inf")),
                                   ("4", -1.0), ("5", 30.0))]}
    got = abtest._values(doc, Path("/nowhere"))
    assert [got[("k", s, "tflops")] for s in "12345"] == [None, None, None, None, 30.0]
    assert got[("k", "1", "pct_of_cublas")] == 50.0

def test_a_kernel_whose_measurement_fails_is_an_aberror_not_a_stale_document(stub_repo):
    a = commit_fixed(stub_repo, 30.0, "a")
    main = (stub_repo / "gemm" / "__main__.py").read_text()
    (stub_repo / "gemm" / "__main__.py").write_text(
        main.replace("kernel = kernels[0]",
                     "kernel = kernels[0]\n"
                     "if 'bad' in kernels:\n    sys.exit(3)"))
    git(stub_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "b")
    b = git(stub_repo, "rev-parse", "HEAD")
    with pytest.raises(abtest.ABError, match="measuring good, bad with the code"):
        ab_rounds(stub_repo, a, b, {"good": ["512"], "bad": ["512"]}, rounds=1,
                   log=lambda s: None)   # one process an arm


def test_kept_verdicts_of_other_series_survive_a_narrowed_run(tmp_path):
    from gemm.store import verdicts
    row = {"kernel": "02", "size": "4096", "metric": "tflops", "verdict": "noise", "new": 5.9}
    verdicts.save(tmp_path, "h200", "c" * 40, [row])
    verdicts.save(tmp_path, "h200", "c" * 40, [{**row, "kernel": "05", "verdict": "DROP"}])
    kept = verdicts.load(tmp_path, "h200", "c" * 40)
    assert {k: v["verdict"] for k, v in kept.items()} == {("02", "4096", "tflops"): "noise",
                                                           ("05", "4096", "tflops"): "DROP"}


def test_an_arm_is_one_process(stub_repo):
    a = commit_fixed(stub_repo, 30.0, "a")
    with abtest.checkout(stub_repo, a) as tree:
        got = abtest.measure(tree, {"k1": ["512"], "k2": ["512"], "k3": ["1024"]})
        calls = (tree / "calls.log").read_text().splitlines()
    assert calls == ["k1 k2 k3"]
    assert {k[:2] for k in got} == {("k1", "512"), ("k2", "512"), ("k3", "1024")}


def test_an_arm_is_one_process_of_task_pairs_under_confirm(tmp_path, monkeypatch):
    """An arm measures the whole of its series in one `gemm measure` process: its --task pairs in
    series order, whatever sizes the kernels have, under --policy confirm."""
    tree = tmp_path / "new"
    tree.mkdir()
    seen = []

    def fake_run(tree, args, timeout, env=None):
        seen.append(args)
        pairs = [args[i + 1].split("@") for i, a in enumerate(args) if a == "--task"]
        path = args[args.index("--json") + 1]
        Path(path).write_text(json.dumps({"values": [
            {"kernel": k, "size": s, "status": "ok", "metrics": {"tflops": 1.0}}
            for k, s in pairs]}))
        return SimpleNamespace(returncode=0, stderr="")
    monkeypatch.setattr(abtest, "_run", fake_run)
    series = {"k1": ["8192"], "k2": ["2048", "8192"], "k3": ["8192"]}
    got = abtest.measure(tree, series)
    assert {k[:2] for k in got} == {("k1", "8192"), ("k2", "2048"), ("k2", "8192"),
                                    ("k3", "8192")}
    assert len(seen) == 1
    args = seen[0]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--task"] == [
        "k1@8192", "k2@2048", "k2@8192", "k3@8192"]
    assert args[args.index("--policy") + 1] == "confirm"
    assert "--kernel" not in args and "--sizes" not in args


def test_the_same_measured_code_needs_no_ab_with_or_without_a_gpu(stub_repo, capsys,
                                                                    monkeypatch):
    # three commits after the first change nothing the measurement runs (codeid.MEASURED_BY):
    # the screen flags the newest (29.0 here against 30 in the history), the A/B would be an A/A
    shas = [commit_fixed(stub_repo, 29.0, "c0")]
    shas += [commit_package(stub_repo, f"docs {i}") for i in range(3)]
    assert codeid.same_code(stub_repo, shas[2], shas[3], "05_2d")
    res = history_for(stub_repo, [(shas[0], 30.0), (shas[1], 30.1), (shas[2], 29.9),
                                  (shas[3], 29.0)])
    monkeypatch.setattr("gemm.track.confirm.gpu_present",
                        lambda: pytest.fail("the GPU was asked for; no A/B was needed"))
    assert gate(stub_repo, res) == 0
    captured = capsys.readouterr()
    assert "the same measured code" in captured.out and "REGRESSION" not in captured.out
    assert "A/B round" not in captured.err
    # a change to the measured code is measured again
    shas.append(commit_fixed(stub_repo, 29.0, "c4"))
    assert not codeid.same_code(stub_repo, shas[3], shas[4], "05_2d")


def test_a_search_space_or_tuned_without_a_table_entry_is_no_build_change(tmp_path):
    """kernel_changed (the gate's A/B of every large series of a changed kernel) follows what
    builds the kernel: adding `tune` and `tuned = true` to an entry that no tuned table has
    yet changes nothing it runs (13 and 14, issue 27); a table entry for it does, a search
    log beside the tables does not, nor does another kernel's entry."""
    from gemm.track.codeid import kernel_changed
    repo = new_repo(tmp_path / "r")
    (repo / "kernels" / "tuned").mkdir(parents=True)
    (repo / "gemm" / "cuda").mkdir(parents=True)
    (repo / "gemm" / "cuda" / "loader.py").write_text("BASE_OPTIONS = ()\n")
    (repo / "kernels" / "k.cu").write_text("// k\n")
    (repo / "kernels" / "tuned" / "h200.toml").write_text(
        '["other".small]\ndefines = { BM = 64 }\n')
    entry = '[[kernel]]\nname = "k"\nfile = "k.cu"\ndefines = { BM = 128 }\n'

    def commit(msg):
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", msg)
        return git(repo, "rev-parse", "HEAD")
    (repo / "kernels" / "kernels.toml").write_text(entry)
    plain = commit("plain")
    (repo / "kernels" / "kernels.toml").write_text(entry + 'tuned = true\ntune = { BM = [64, 128] }\n')
    tuned = commit("tuned, no table entry")
    assert not kernel_changed(repo, plain, tuned, "k")
    (repo / "kernels" / "tuned" / "h200-other.json").write_text("{}")
    (repo / "kernels" / "tuned" / "h200.toml").write_text(
        '["other".small]\ndefines = { BM = 128 }\n')
    other = commit("another kernel tuned, a search log")
    assert not kernel_changed(repo, tuned, other, "k")
    (repo / "kernels" / "tuned" / "h200.toml").write_text(
        '["other".small]\ndefines = { BM = 128 }\n\n["k".small]\ndefines = { BM = 64 }\n')
    won = commit("k tuned")
    assert kernel_changed(repo, other, won, "k") and kernel_changed(repo, plain, won, "k")
    (repo / "kernels" / "kernels.toml").write_text(entry.replace("128", "256"))
    assert kernel_changed(repo, plain, commit("defaults changed"), "k")


def test_another_kernels_change_leaves_a_kernel_the_same_code(tmp_path):
    """same_code per kernel: a change to one kernel's source (or to a header only it includes,
    quoted or, found in kernels/ by -I, in angle brackets) is no change to another's measured
    code; a change to a header both include, to the harness (gemm measure's options in
    gemm/cli/common.py too) or to the baseline's choice file (baselines/) is one to both."""
    repo = new_repo(tmp_path / "r")
    for d in ("kernels", "gemm/cuda", "baselines"):
        (repo / d).mkdir(parents=True)
    (repo / "gemm" / "cuda" / "loader.py").write_text("BASE_OPTIONS = ()\n")
    (repo / "baselines" / "h200-choice.toml").write_text("algo = 1\n")
    (repo / "kernels" / "kernels.toml").write_text(
        '[[kernel]]\nname = "05_2d_blocktiling"\nfile = "a.cu"\n\n'
        '[[kernel]]\nname = "07_bank_conflict_free"\nfile = "b.cu"\n')
    (repo / "kernels" / "a.cu").write_text('#include "shared.cuh"\n#include <mma.h>\n// a\n')
    (repo / "kernels" / "b.cu").write_text('#include "shared.cuh"\n#include "own.cuh"\n// b\n')
    (repo / "kernels" / "shared.cuh").write_text("// shared\n")
    (repo / "kernels" / "own.cuh").write_text("// b's own\n")
    a, b = "05_2d_blocktiling", "07_bank_conflict_free"

    def commit(path, text):
        (repo / path).write_text(text)
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", path)
        return git(repo, "rev-parse", "HEAD")
    base = commit("kernels/a.cu", '#include "shared.cuh"\n#include <mma.h>\n// a\n')
    a_edit = commit("kernels/a.cu", '#include "shared.cuh"\n#include <mma.h>\n// a, faster\n')
    assert codeid.same_code(repo, base, a_edit, b) and not codeid.same_code(repo, base, a_edit, a)
    own = commit("kernels/own.cuh", "// b's own, changed\n")
    assert codeid.same_code(repo, a_edit, own, a) and not codeid.same_code(repo, a_edit, own, b)
    shared = commit("kernels/shared.cuh", "// shared, changed\n")
    assert not codeid.same_code(repo, own, shared, a) and not codeid.same_code(repo, own, shared, b)
    choice = commit("baselines/h200-choice.toml", "algo = 2\n")
    assert not codeid.same_code(repo, shared, choice, a)
    harness = commit("gemm/cuda/loader.py", "BASE_OPTIONS = ('-O3',)\n")
    assert not codeid.same_code(repo, choice, harness, a)
    assert codeid.same_code(repo, harness, harness, a)
    (repo / "gemm" / "cli").mkdir()
    policy = commit("gemm/cli/common.py", "POLICY = 'confirm'\n")   # gemm measure's options
    assert not codeid.same_code(repo, harness, policy, a)
    shadow = commit("kernels/mma.h", "// found by nvcc -I kernels/ before the toolkit's\n")
    assert not codeid.same_code(repo, policy, shadow, a) and codeid.same_code(repo, policy, shadow, b)
