"""`record` never damages the committed history: asv writes into a staging copy, and only a
complete, valid result file is moved in. A stand-in `asv` on PATH plays each failure."""
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from gemm.record import recorder as track

FAKE_ASV = r'''#!{python}
import json, os, sys
args = sys.argv[1:]
conf = json.load(open(args[args.index("--config") + 1]))
machine = args[args.index("--machine") + 1]
commit = args[args.index("--set-commit-hash") + 1]
d = os.path.join(conf["results_dir"], machine)
os.makedirs(d, exist_ok=True)
mode = os.environ["FAKE_ASV_MODE"]
path = os.path.join(d, commit[:8] + "-existing-py.json")
good = {{"version": 2, "commit_hash": commit,
        "result_columns": ["result", "params", "version"],
        "results": {{"bench_gemm.Kernel_05_2d.track_tflops": [[29.4], [["'4096'"]], "v"]}}}}
if mode == "legacy":
    good["results"] = {{"bench_gemm.Kernels.track_tflops": [[29.4, 31.0],
                       [["'05_2d'", "'04_1d'"], ["'4096'"]], "gemm-suite-1"]}}
if mode == "nothing":
    sys.exit(1)
if mode == "truncated":          # killed while writing
    open(path, "w").write(json.dumps(good)[:40]); sys.exit(1)
if mode == "all_failed":         # no GPU: every benchmark null
    good["results"]["bench_gemm.Kernel_05_2d.track_tflops"][0] = [None]
open(path, "w").write(json.dumps(good))
open(os.path.join(conf["results_dir"], "benchmarks.json"), "w").write("{{}}")
sys.exit(2 if mode == "all_failed" else 0)
'''


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "results" / "h200").mkdir(parents=True)
    (root / "asv.conf.json").write_text(json.dumps({"version": 1, "results_dir": "results",
                                                    "benchmark_dir": "benchmarks"}))
    old = root / "results" / "h200" / "11111111-existing-py.json"
    old.write_text('{"version": 2, "kept": true}')
    (root / "results" / "h200" / "machine.json").write_text('{"machine": "h200"}')
    bindir = tmp_path / "bin"
    bindir.mkdir()
    asv = bindir / "asv"
    asv.write_text(FAKE_ASV.format(python=sys.executable))
    asv.chmod(asv.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return root


def snapshot(root):
    return {p.relative_to(root): p.read_bytes() for p in (root / "results").rglob("*") if p.is_file()}


@pytest.mark.parametrize("mode,msg", [("nothing", "wrote no result file"),
                                      ("truncated", "not readable JSON"),
                                      ("all_failed", "every benchmark failed")])
def test_failed_runs_leave_history_untouched(repo, monkeypatch, mode, msg):
    monkeypatch.setenv("FAKE_ASV_MODE", mode)
    before = snapshot(repo)
    with pytest.raises(track.RecordError, match=msg):
        track.record(repo, "h200", "ab" * 20)
    assert snapshot(repo) == before


def test_good_run_is_moved_in_and_history_kept(repo, monkeypatch):
    monkeypatch.setenv("FAKE_ASV_MODE", "good")
    out = track.record(repo, "h200", "cd" * 20)
    assert out.name == "cdcdcdcd-existing-py.json"
    files = snapshot(repo)
    assert json.loads(files[out.relative_to(repo)])["commit_hash"] == "cd" * 20
    assert b'"kept": true' in (repo / "results" / "h200" / "11111111-existing-py.json").read_bytes()
    assert not list((repo / "results").rglob("*.tmp"))


def test_record_into_another_results_directory(repo, tmp_path, monkeypatch):
    """Backfill: measure a worktree's code, write into the main history."""
    monkeypatch.setenv("FAKE_ASV_MODE", "good")
    main_results = tmp_path / "main-results"
    shutil.copytree(repo / "results", main_results)
    track.record(repo, "h200", "ef" * 20, results=main_results)
    assert (main_results / "h200" / "efefefef-existing-py.json").exists()
    assert not (repo / "results" / "h200" / "efefefef-existing-py.json").exists()


def test_record_command_names_a_bad_commit(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    out = subprocess.run([sys.executable, "-m", "gemm", "record", "--repo", str(tmp_path),
                          "--machine", "h200", "--commit", "nope"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.returncode == 2 and "cannot name commit 'nope'" in out.stderr


def test_a_backfilled_commits_old_layout_is_normalized(repo, monkeypatch):
    """An older commit measured with its own (layout-1) suite: its rows are split into today's
    layout, and its suite's benchmarks.json does not replace today's."""
    monkeypatch.setenv("FAKE_ASV_MODE", "legacy")
    (repo / "results" / "benchmarks.json").write_text('{"today": true}')
    out = track.record(repo, "h200", "ee" * 20)
    data = json.loads(out.read_text())
    assert set(data["results"]) == {"bench_gemm.Kernel_05_2d.track_tflops",
                                    "bench_gemm.Kernel_04_1d.track_tflops"}
    assert data["results"]["bench_gemm.Kernel_04_1d.track_tflops"][0] == [31.0]
    assert json.loads((repo / "results" / "benchmarks.json").read_text()) == {"today": True}


def test_a_backfill_into_another_history_keeps_todays_suite(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_ASV_MODE", "good")
    main_results = tmp_path / "main-results"
    shutil.copytree(repo / "results", main_results)
    (main_results / "benchmarks.json").write_text('{"today": 1, "version": 2}')
    track.record(repo, "h200", "ab" * 20, results=main_results)
    assert json.loads((main_results / "benchmarks.json").read_text())["today"] == 1
    track.record(repo, "h200", "ac" * 20)                      # its own history: replaced
    assert "today" not in json.loads((repo / "results" / "benchmarks.json").read_text())


def test_record_refuses_a_checkout_at_another_commit(tmp_path):
    def g(*a):
        return subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True,
                              text=True).stdout.strip()
    g("init", "-q")
    for i in range(2):
        (tmp_path / "f").write_text(str(i))
        g("add", "f")
        g("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", str(i))
    out = subprocess.run([sys.executable, "-m", "gemm", "record", "--repo", str(tmp_path),
                          "--commit", "HEAD~1"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.returncode == 2 and "not at" in out.stderr and "worktree" in out.stderr


def test_a_kernel_name_for_record_becomes_its_class():
    from gemm.cli.main import _bench_regex
    import re
    rx = _bench_regex("10")
    assert re.search(rx, "bench_gemm.Kernel_10_autotuned.track_tflops('4096')")
    assert not re.search(rx, "bench_gemm.Kernel_01_naive.track_tflops('1024')")
    assert _bench_regex("track_seconds") == "track_seconds"


@pytest.mark.parametrize("extra,shared", [((), True), (("-b", "Kernel_05_2d_blocktiling"), False)])
def test_the_whole_suite_shares_one_sweep_and_chosen_classes_do_not(repo, monkeypatch, extra,
                                                                     shared):
    """gemm record of the whole suite names a shared-sweep file in the staging area (one
    worker for every class: gemm.record.suite.sweep); `-b` runs sweep only their classes."""
    monkeypatch.setenv("FAKE_ASV_MODE", "good")
    monkeypatch.setenv("GEMM_SHARED_SWEEP", "/left/over/from/outside")
    seen = {}
    real = subprocess.call

    def call(cmd, cwd=None, env=None):
        seen.update(env or {})
        return real(cmd, cwd=cwd, env=env)
    monkeypatch.setattr(track.subprocess, "call", call)
    track.record(repo, "h200", "abcdef1234567890", list(extra))
    got = seen.get("GEMM_SHARED_SWEEP")
    if shared:
        assert got == str(repo.resolve() / ".asv" / "staging" / "shared-sweep.json")
    else:
        assert got is None
