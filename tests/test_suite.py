"""The asv suite without a GPU: the classes generated from the registry, what the track_
methods return, their versions, and that `asv run -b <kernel>` sets up only that kernel's sweep."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemm.core import metrics, registry
from gemm.core.policy import SUITE
from gemm.record import suite

ROOT = Path(__file__).resolve().parent.parent


def rec(kernel, size, status="ok", k=(0.002, 0.002, 0.0021), b=(0.001, 0.001, 0.001)):
    r = {"kernel": kernel, "role": "kernel", "size": size, "flops": 2 * 1000**3,
         "status": status, "baseline": "cublas_fp32", "error": None if status == "ok" else "boom"}
    if status == "ok":
        r["kernel_time"] = {"samples_s": list(k)}
        r["baseline_time"] = {"samples_s": list(b)}
    return r


CACHE = {"records": [rec("05", "1000"), rec("05", "512", status="wrong")]}


def test_samples_protocol():
    out = suite.samples(CACHE, metrics.TFLOPS, "1000")
    assert out["number"] == 1 and out["samples"][0] == pytest.approx(1.0)
    assert suite.samples(CACHE, metrics.PCT_OF_CUBLAS, "1000")["samples"][0] == pytest.approx(50.0)
    assert suite.samples(CACHE, metrics.TIME_RATIO, "1000")["samples"][0] == pytest.approx(2.0)
    assert suite.samples(CACHE, metrics.SECONDS, "1000")["samples"][2] == 0.0021


def test_failed_kernels_fail_and_missing_sizes_skip():
    with pytest.raises(RuntimeError, match="wrong: boom"):
        suite.samples(CACHE, metrics.TFLOPS, "512")
    with pytest.raises(NotImplementedError):  # asv records a skip (NaN)
        suite.samples(CACHE, metrics.TFLOPS, "4096")


def test_a_size_the_kernel_refuses_is_a_skip_in_asv_and_a_failure_is_not():
    """Through asv_runner's own setup/run path: asv records NaN (a skip) only when setup raises
    NotImplementedError; an unsupported size must be a skip, a wrong kernel a failure."""
    from asv_runner.discovery import get_benchmark_from_name
    k = "05_2d_blocktiling"
    cache = {"records": [rec(k, "1000"), rec(k, "512", status="wrong"),
                         {**rec(k, "4096", status="unsupported"), "error": "K % 4 != 0"}]}
    name = f"bench_gemm.{metrics.kernel_class(k)}.track_tflops"
    idx = {size: i for i, size in enumerate(suite.SIZES)}
    outcomes = {}
    for size in ("1000", "512", "4096", "8192"):       # 8192: not part of this sweep
        b = get_benchmark_from_name(str(ROOT / "benchmarks"), f"{name}-{idx[size]}")
        b.set_cache(cache)
        if b.do_setup():
            outcomes[size] = "skip"
            continue
        try:
            b.do_run()
            outcomes[size] = "ok"
        except RuntimeError:
            outcomes[size] = "failed"
    assert outcomes == {"1000": "ok", "512": "failed", "4096": "skip", "8192": "skip"}


def test_baseline_measured_alone():
    r = rec("cublas_fp32", "1000")
    r.update(role="baseline", kernel_time=None)
    out = suite.samples({"records": [r]}, metrics.TFLOPS, "1000")["samples"]
    assert out == pytest.approx([2.0, 2.0, 2.0])


def test_one_class_per_kernel_with_its_own_sweep():
    cls = suite.classes("benchmarks.bench_gemm")
    assert set(cls) == {metrics.kernel_class(k) for k in registry.names()} | {"Cublas"}
    k05 = cls["Kernel_05_2d_blocktiling"]
    assert k05.params == [suite.SIZES] and k05.param_names == ["size"]
    assert k05.track_tflops.version == metrics.version(metrics.TFLOPS, SUITE)
    assert cls["Cublas"].params == [registry.baselines(), suite.SIZES]
    from asv_runner.benchmarks._base import get_setup_cache_key
    keys = {get_setup_cache_key(c.setup_cache) for c in cls.values()}
    assert len(keys) == len(cls)   # asv runs one setup_cache per key: one sweep per class


def test_versions_are_fingerprints_of_how_we_measure():
    v = metrics.version(metrics.TFLOPS, SUITE)
    assert v == metrics.version(metrics.TFLOPS, type(SUITE)())       # stable
    assert v != metrics.version(metrics.TFLOPS, type(SUITE)(batching="direct"))
    assert v != metrics.version(metrics.TFLOPS, type(SUITE)(max_noise=0.004))
    assert v != metrics.version(metrics.SECONDS, SUITE)
    assert v != metrics.version(metrics.TFLOPS, SUITE, baseline=True)


def test_sweep_refuses_without_a_gpu(monkeypatch):
    import gemm.cuda.device
    monkeypatch.setattr(gemm.cuda.device, "probe", lambda: (False, "no driver"))
    with pytest.raises(RuntimeError, match="needs a CUDA GPU: no driver"):
        suite.sweep("05_2d_blocktiling")


@pytest.mark.skipif(not shutil.which("asv"), reason="asv is not installed")
def test_asv_run_b_sets_up_only_that_kernels_sweep(tmp_path):
    from gemm.cuda.device import probe
    if probe()[0]:
        pytest.skip("a GPU is here: this would run a real sweep (the per-commit job records one)")
    """A real `asv run -b 05_2d` on this suite: without a GPU every sweep fails, but asv says
    which setup_caches it ran, and it must be that kernel's alone."""
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"),
                results_dir=str(tmp_path / "results"), html_dir=str(tmp_path / "html"),
                env_dir=str(tmp_path / "env"))
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    machine = {"version": 1, "cpu-test": {"machine": "cpu-test", "arch": "x", "cpu": "x",
                                          "num_cpu": "1", "os": "x", "ram": "1"}}
    (tmp_path / ".asv-machine.json").write_text(json.dumps(machine))
    env = {**os.environ, "ASV_PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    out = subprocess.run(["asv", "run", "--config", str(tmp_path / "asv.conf.json"),
                          "--machine", "cpu-test", "-E", f"existing:{sys.executable}", "--set-commit-hash",
                          subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=ROOT,
                                                  text=True).strip(),
                          "-b", "05_2d", "--show-stderr"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    setups = sorted({line.split("Setting up ")[1].split()[0] for line in text.splitlines()
                     if "Setting up " in line})
    assert setups and all("05_2d_blocktiling" in s for s in setups), text[-3000:]


def test_a_worker_that_reported_its_broken_launch_is_not_blamed_twice(monkeypatch):
    """A worker reports a launch_error and dies with some exit code: the sweep goes on with
    the next problem in a fresh worker instead of marking it crashed unseen."""
    import gemm.measure.sweep as sw
    from gemm.core.problem import Problem
    calls = []

    def worker(job, timeout=None):
        calls.append([p["M"] for _, p in job["tasks"]])
        name, p = job["tasks"][0]
        status = "launch_error" if p["M"] == 64 else "ok"
        yield "result", {"kernel": name, "size": str(p["M"]), "status": status,
                         "flops": 1}
        yield "exit", {"code": 134, "stderr": "abort in teardown", "timed_out": False}

    monkeypatch.setattr(sw, "run_worker", worker)
    doc = sw.sweep(["05_2d_blocktiling"], [Problem.square(64), Problem.square(128)],
                   time_it=False)
    assert [r["status"] for r in doc["records"]] == ["launch_error", "ok"]
    assert calls == [[64, 128], [128]]


def _fake_worker(calls, die_on=None, code=0):
    """A stand-in for gemm.measure.worker's process: reports each (target, problem) of its job
    in order, and dies without a word on the pair `die_on`."""
    def worker(job, timeout=None):
        calls.append([(n, p["M"]) for n, p in job["tasks"]])
        yield "info", {"device": {"name": "fake"}, "init_s": {}}
        for name, p in job["tasks"]:
            if (name, p["M"]) == die_on:
                yield "exit", {"code": code or 1, "stderr": "Segmentation fault",
                               "timed_out": False}
                return
            yield "result", {"kernel": name, "size": str(p["M"]), "status": "ok", "flops": 1}
        yield "exit", {"code": 0, "stderr": "", "timed_out": False}
    return worker


def test_a_sweep_runs_all_its_targets_in_one_worker_process(monkeypatch):
    """One process start per sweep, not one per kernel (the A/B runs a sweep per arm per
    round); the pairs go target by target, each over the problems in order."""
    import gemm.measure.sweep as sw
    from gemm.core.problem import Problem
    calls = []
    monkeypatch.setattr(sw, "run_worker", _fake_worker(calls))
    doc = sw.sweep(["05_2d_blocktiling", "07_bank_conflict_free"],
                   [Problem.square(64), Problem.square(128)], time_it=False)
    pairs = [("05_2d_blocktiling", 64), ("05_2d_blocktiling", 128),
             ("07_bank_conflict_free", 64), ("07_bank_conflict_free", 128)]
    assert calls == [pairs]
    assert [(r["kernel"], int(r["size"])) for r in doc["records"]] == pairs
    assert len(doc["workers"]) == 1 and doc["workers"][0]["done"] == 4
    assert doc["workers"][0]["targets"] == ["05_2d_blocktiling", "07_bank_conflict_free"]


def test_a_worker_that_dies_unheard_costs_one_pair_and_the_sweep_goes_on(monkeypatch):
    """The pair it died on is recorded as crashed; a fresh worker takes the rest, the other
    kernel's problems included."""
    import gemm.measure.sweep as sw
    from gemm.core.problem import Problem
    calls = []
    monkeypatch.setattr(sw, "run_worker",
                        _fake_worker(calls, die_on=("05_2d_blocktiling", 128)))
    doc = sw.sweep(["05_2d_blocktiling", "07_bank_conflict_free"],
                   [Problem.square(64), Problem.square(128)], time_it=False)
    assert [(r["kernel"], r["size"], r["status"]) for r in doc["records"]] == [
        ("05_2d_blocktiling", "64", "ok"), ("05_2d_blocktiling", "128", "crashed"),
        ("07_bank_conflict_free", "64", "ok"), ("07_bank_conflict_free", "128", "ok")]
    assert "Segmentation fault" in doc["records"][1]["error"]
    assert calls[1] == [("07_bank_conflict_free", 64), ("07_bank_conflict_free", 128)]


def test_no_gpu_in_the_worker_marks_every_pair_left_and_starts_no_more(monkeypatch):
    import gemm.measure.sweep as sw
    from gemm.core.problem import Problem
    from gemm.measure.worker import EXIT_NO_GPU
    calls = []
    monkeypatch.setattr(sw, "run_worker", _fake_worker(
        calls, die_on=("05_2d_blocktiling", 64), code=EXIT_NO_GPU))
    doc = sw.sweep(["05_2d_blocktiling", "07_bank_conflict_free"], [Problem.square(64)],
                   time_it=False)
    assert [r["status"] for r in doc["records"]] == ["crashed", "crashed"]
    assert len(calls) == 1


def test_a_target_that_cannot_be_opened_is_an_error_record_and_the_next_target_runs(
        monkeypatch, capsys):
    """gemm.measure.worker.run_job, its devices replaced: the failing target gets one error
    record per problem (opened once), the worker goes on with the next target, and the
    first record of each opened target says what opening it cost."""
    import gemm.measure.worker as wk
    opened, ran = [], []

    class FakeWorker:
        info = type("I", (), {"arch": "sm_90", "slug": "h200"})()
        init_s = {"context": 0.1}
        drv = type("D", (), {"Context": type("C", (), {"synchronize": staticmethod(
            lambda: None)})})()

        def __init__(self, spec):
            pass

        def close(self):
            ran.append("closed")

    class FakeJob:
        def __init__(self, worker, name):
            opened.append(name)
            if name == "bad":
                raise RuntimeError("no such launch contract")
            self.name, self.open_s = name, {"kernel_load": 0.2}

        def record(self, prob):
            return {"kernel": self.name, "size": prob.label, "status": "ok"}

    def run_problem(job, prob, rec):
        ran.append((job.name, prob.M))
        wk.emit(wk.TAG, rec)

    monkeypatch.setattr(wk, "Worker", FakeWorker)
    monkeypatch.setattr(wk, "Job", FakeJob)
    monkeypatch.setattr(wk, "run_problem", run_problem)
    tasks = [[n, {"M": m, "N": m, "K": m}] for n in ("bad", "good") for m in (64, 128)]
    assert wk.run_job({"tasks": tasks}) == 0
    out = [json.loads(line[len(wk.TAG):]) for line in capsys.readouterr().out.splitlines()
           if line.startswith(wk.TAG)]
    assert opened == ["bad", "good"]
    assert [(r["kernel"], r["status"]) for r in out] == [
        ("bad", "error"), ("bad", "error"), ("good", "ok"), ("good", "ok")]
    assert "no such launch contract" in out[0]["error"]
    assert out[2]["wall"] == {"open_s": {"kernel_load": 0.2}} and "wall" not in out[3]
    assert ran == [("good", 64), ("good", 128), "closed"]


def test_a_worker_that_dies_before_it_is_ready_fails_every_pair_once(monkeypatch):
    """Imports, context or the job itself: what killed it would kill the next one too, so the
    sweep records every pair as crashed after one attempt instead of one worker per pair."""
    import gemm.measure.sweep as sw
    from gemm.core.problem import Problem
    calls = []

    def worker(job, timeout=None):
        calls.append(len(job["tasks"]))
        yield "exit", {"code": 2, "stderr": "ImportError: no numpy", "timed_out": False}
    monkeypatch.setattr(sw, "run_worker", worker)
    doc = sw.sweep(["05_2d_blocktiling", "07_bank_conflict_free"],
                   [Problem.square(64), Problem.square(128)], time_it=False)
    assert [r["status"] for r in doc["records"]] == ["crashed"] * 4
    assert calls == [4] and "no numpy" in doc["records"][3]["error"]


def test_the_worker_timeout_counts_from_its_last_report_not_from_its_start(monkeypatch):
    """One worker runs a whole sweep: its time limit is on silence, not on the sweep."""
    import subprocess as sp

    import gemm.measure.sweep as sw
    script = ("import sys, time\n"
              "for i in range(int(sys.argv[1])):\n"
              "    time.sleep(float(sys.argv[2]))\n"
              "    print('@@RESULT {\"i\": %d}' % i, flush=True)\n")
    real = sp.Popen

    def popen(args, **kw):
        return real([sys.executable, "-c", script, *popen.argv], **kw)
    monkeypatch.setattr(sw.subprocess, "Popen", popen)
    popen.argv = ["5", "0.3"]          # 1.5 s in all, never 1 s without a line
    got = list(sw.run_worker({}, timeout=1.0))
    assert [o["i"] for k, o in got if k == "result"] == [0, 1, 2, 3, 4]
    assert got[-1][1]["timed_out"] is False
    popen.argv = ["2", "1.5"]          # silent for 1.5 s: killed
    got = list(sw.run_worker({}, timeout=1.0))
    assert got[-1][0] == "exit" and got[-1][1]["timed_out"] is True


def _shared_env(monkeypatch, tmp_path, fail=False, drop=None):
    """suite.sweep with GEMM_SHARED_SWEEP set and the measuring stood in: returns the list of
    target lists each stand-in sweep was asked for."""
    import gemm.measure.sweep as sw
    calls = []

    def run(names, problems, policy, progress=None):
        calls.append(list(names))
        if fail:
            raise RuntimeError("no GPU here")
        recs = [{"kernel": n, "size": p.label, "status": "ok"} for n in names for p in problems
                if len(names) == 1 or (n, p.label) != drop]   # alone, it measures all
        return {"schema": "s", "device": {"name": "fake"}, "records": recs,
                "values": [{"kernel": r["kernel"], "size": r["size"]} for r in recs],
                "workers": [{"targets": list(names)}], "wall_s": 1.0}
    monkeypatch.setattr(sw, "sweep", run)
    monkeypatch.setattr(sw, "probe_gpu", lambda: (True, ""))
    monkeypatch.setenv(suite.SHARED, str(tmp_path / "shared.json"))
    monkeypatch.setenv("GEMM_SWEEP_DIR", str(tmp_path / "sweeps"))
    return calls


def test_the_whole_suite_shares_one_sweep_in_one_worker(monkeypatch, tmp_path):
    """With GEMM_SHARED_SWEEP (gemm record of the whole suite) the first class set up sweeps
    every target in one worker; each class gets exactly its own records, as its own sweep
    would have; the dump holds the shared sweep once (its time is not counted per class)."""
    calls = _shared_env(monkeypatch, tmp_path)
    k05 = suite.sweep("05_2d_blocktiling")
    blas = suite.sweep("cublas_fp32")
    assert calls == [suite.targets()]
    assert {r["kernel"] for r in k05["records"]} == {"05_2d_blocktiling"}
    assert sorted(r["size"] for r in k05["records"]) == sorted(suite.SIZES)
    assert {v["kernel"] for v in blas["values"]} == {"cublas_fp32"}
    assert k05["workers"] == [] and k05["device"] == {"name": "fake"}
    assert [p.name for p in (tmp_path / "sweeps").iterdir()] == ["sweep-shared.json"]


def test_a_target_the_shared_sweep_missed_is_swept_alone(monkeypatch, tmp_path):
    calls = _shared_env(monkeypatch, tmp_path, drop=("07_bank_conflict_free", "4096"))
    suite.sweep("05_2d_blocktiling")
    doc = suite.sweep("07_bank_conflict_free")
    assert calls == [suite.targets(), ["07_bank_conflict_free"]]
    assert "shared" not in doc and len(doc["records"]) == len(suite.SIZES)


def test_a_shared_sweep_that_fails_is_tried_once_then_each_class_sweeps_alone(monkeypatch,
                                                                               tmp_path):
    calls = _shared_env(monkeypatch, tmp_path, fail=True)
    for t in ("05_2d_blocktiling", "07_bank_conflict_free"):
        with pytest.raises(RuntimeError, match="no GPU here"):
            suite.sweep(t)
    assert calls == [suite.targets(), ["05_2d_blocktiling"], ["07_bank_conflict_free"]]
    assert "failed" in json.loads((tmp_path / "shared.json").read_text())
