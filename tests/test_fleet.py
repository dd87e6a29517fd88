"""A fleet of GPU runners (issue 28), the parts that need no GPU: the workflow's matrices
(ci/fleet.py plan) and the fleet's summary (one row per machine), the site built from two
machines' results (selector, per-machine tables, n/a for kernels a machine cannot run, which
GPU made each point), the gate on a kernel a machine never recorded, ci/backfill.sh's sharding
and resume with a stub `gemm`, and ci/push-results.sh keeping both machines' results when two
pushes race (two clones of a bare repository)."""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemm.core import metrics
from gemm.record import dashboard
from gemm.record.sitedata import load_machine

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "ci" / "fleet.py"
SM90A = ("13_tf32_wgmma_tma", "14_bf16_wgmma_tma")
SM90A_CLASSES = {metrics.kernel_class(k) for k in SM90A}
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
       "-c", "advice.detachedHead=false"]


def _env(**kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITHUB_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    env.update(kw)
    return env


def git(cwd, *args, check=True):
    out = subprocess.run(GIT + list(args), cwd=cwd, capture_output=True, text=True, env=_env())
    if check and out.returncode:
        raise AssertionError(out.stderr)
    return out.stdout.strip()


# --- the matrices and the fleet's summary (ci/fleet.py) -------------------------------------

def plan(**env):
    out = subprocess.run([sys.executable, str(FLEET), "plan"], capture_output=True, text=True,
                         env={**_env(), **env}, timeout=60)
    assert out.returncode == 0, out.stderr
    return {k: json.loads(v) for k, v in (ln.split("=", 1) for ln in out.stdout.splitlines())}


def test_the_plan_is_one_job_per_model_and_a_shard_per_runner():
    p = plan(FLEET='[{"gpu": "h200", "runners": 2}, "h100"]')
    assert p["per_commit"] == [{"gpu": "h200", "machine": ""}, {"gpu": "h100", "machine": ""}]
    assert [(e["gpu"], e["shard"], e["shards"]) for e in p["backfill"]] == [
        ("h200", 0, 2), ("h200", 1, 2), ("h100", 0, 1)]
    assert p["parallel"] == 3 and p["gpus"] == ["h200", "h100"]
    assert [e["shards"] for e in plan(FLEET='["h200", "h100"]', SHARDS="3")["backfill"]] == [3] * 6
    # the default: today's single H200 runner; GEMM_MACHINE still names a one-model fleet
    assert plan()["per_commit"] == [{"gpu": "h200", "machine": ""}]
    assert plan(GEMM_MACHINE="h200x")["per_commit"] == [{"gpu": "h200", "machine": "h200x"}]
    assert plan(FLEET='["h200", "h100"]', GEMM_MACHINE="x")["per_commit"][0]["machine"] == ""
    for bad in ('[]', '["h200", "h200"]', '[{"gpu": "h 200"}]', '[{"gpu": "a", "runners": 0}]'):
        out = subprocess.run([sys.executable, str(FLEET), "plan"], capture_output=True,
                             text=True, env={**_env(), "FLEET": bad}, timeout=60)
        assert out.returncode == 2 and "fleet:" in out.stderr, bad


def _job_row(art: Path, gpu, machine, regress="success", exit_=0):
    d = art / f"gpu-job-abc-{gpu}"
    d.mkdir(parents=True)
    (d / "regress.json").write_text(json.dumps({"exit": exit_, "counts": {"ok": 5, "DROP": exit_}}))
    (d / "summary.md").write_text(f"## GPU job: machine `{machine}`\n")
    out = subprocess.run([sys.executable, str(FLEET), "row", "--gpu", gpu, "--machine", machine,
                          "--device", f"NVIDIA {gpu.upper()}, GPU-1", "--regress",
                          str(d / "regress.json"), "--out", str(d / "fleet-row.json"),
                          "--stage", "setup=success", "--stage", "gate=success",
                          "--stage", "record=success", "--stage", f"regress={regress}",
                          "--stage", "memcheck=skipped"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def _fleet_summary(art, gpus):
    return subprocess.run([sys.executable, str(FLEET), "summary", "--artifacts", str(art),
                           "--gpus", json.dumps(gpus), "--sha", "abcdef1234567"],
                          capture_output=True, text=True, timeout=60)


def test_the_fleet_summary_has_a_row_per_machine_and_passes_only_if_all_do(tmp_path):
    art = tmp_path / "artifacts"
    _job_row(art, "h200", "h200")
    _job_row(art, "h100", "h100-80gb-hbm3")
    out = _fleet_summary(art, ["h200", "h100"])
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| h")]
    assert [r.split(" | ")[1] for r in rows] == ["`h200`", "`h100-80gb-hbm3`"]
    assert all(r.endswith("✅ passed |") for r in rows)
    assert "every machine's gate passed" in out.stdout
    assert out.stdout.count("<details>") == 2            # each machine's own summary, folded
    shutil.rmtree(art / "gpu-job-abc-h100")
    _job_row(art, "h100", "h100-80gb-hbm3", regress="failure", exit_=1)
    out = _fleet_summary(art, ["h200", "h100"])
    assert out.returncode == 1 and "❌ failed (regress)" in out.stdout
    out = _fleet_summary(art, ["h200", "h100", "b200"])   # a model whose job never reported
    assert out.returncode == 1 and "| b200 | ? |" in out.stdout and "no report" in out.stdout


def test_the_workflow_fans_out_over_the_fleet():
    yaml = pytest.importorskip("yaml")
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text())
    jobs = wf["jobs"]
    assert "python3 ci/fleet.py plan" in jobs["plan"]["steps"][-1]["run"]
    assert "vars.GEMM_FLEET" in jobs["plan"]["steps"][-1]["env"]["FLEET"]
    for name in ("per-commit", "backfill"):
        job = jobs[name]
        assert job["runs-on"] == ["self-hosted", "linux", "gpu", "${{ matrix.gpu }}"]
        assert "needs.plan.outputs" in job["strategy"]["matrix"]["include"]
        assert job["strategy"]["fail-fast"] is False
    pc = jobs["per-commit"]
    assert "MACHINE" not in pc["env"]                     # no more vars.GEMM_MACHINE by default
    steps = {s.get("name") or s["uses"]: s for s in pc["steps"]}
    assert "python3 -m gemm machine" in steps["Machine name (from the GPU; the fleet entry's "
                                              "\"machine\" overrides)"]["run"]
    keep = steps["Keep the results (commit them back to main)"]["run"]
    assert 'ci/push-results.sh' in keep and '"results/${MACHINE}" "verdicts/${MACHINE}"' in keep
    assert steps["actions/upload-artifact@v7"]["with"]["name"].endswith("-${{ matrix.gpu }}")
    bf = jobs["backfill"]
    assert "inputs.backfill" in bf["if"] and "!inputs.backfill" in pc["if"]
    assert bf["strategy"]["max-parallel"] == "${{ fromJSON(needs.plan.outputs.parallel) }}"
    assert "matrix.shard" in bf["concurrency"]["group"]
    assert "ci/backfill.sh --shard" in bf["steps"][-2]["run"]
    fleet = jobs["fleet"]
    assert fleet["needs"] == ["plan", "per-commit"] and fleet["if"].startswith("always()")
    assert any("ci/fleet.py summary" in s.get("run", "") for s in fleet["steps"])
    assert jobs["pages"]["needs"] == "fleet"


# --- the site from two machines ---------------------------------------------------------------

def two_machines(tmp: Path) -> Path:
    """results/ with the recorded h200 runs and the same runs under h100 (an Ampere-like
    machine for the test: sm_80, the sm_90a kernels skipped, as a runner that cannot run them
    records them), each h100 run with its GPU in gemm_host."""
    res = tmp / "results"
    res.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "benchmarks.json", res / "benchmarks.json")
    shutil.copytree(ROOT / "results" / "h200", res / "h200")
    (res / "h100").mkdir()
    for i, f in enumerate(sorted((ROOT / "results" / "h200").glob("*.json"))):
        data = json.loads(f.read_text())
        if f.name == "machine.json":
            data.update(machine="h100", gpu="NVIDIA A100-SXM4-80GB", gpu_arch="sm_80")
        else:
            data["params"].update(machine="h100", gpu_arch="sm_80")
            ri = data["result_columns"].index("result")
            for name, row in data["results"].items():
                if name.split(".")[1] in SM90A_CLASSES:   # skipped, as on an Ampere GPU
                    row[ri] = [math.nan] * len(row[ri]) if isinstance(row[ri], list) else math.nan
            data["gemm_host"] = {**data.get("gemm_host", {}), "host": f"runner-{i % 2}",
                                 "gpu_uuid": f"GPU-{i % 2}aaaaaaa-1111-2222-3333-444455556666"}
        (res / "h100" / f.name).write_text(json.dumps(data))
    return res


@pytest.fixture(scope="module")
def fleet_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fleet")
    res = two_machines(tmp)
    index = dashboard.write_site(tmp / "html", res, ROOT / "verdicts", ["h100", "h200"])
    return tmp, res, index.read_text()


def test_the_site_merges_both_machines(fleet_site):
    tmp, res, html = fleet_site
    assert ("<select id=machine><option value='h100'>h100</option>"
            "<option value='h200'>h200</option></select>") in html
    for m in ("h100", "h200"):
        sec = re.search(rf"<section class='machine[^']*' data-machine='{m}'>.*?</section>", html, re.S)
        assert sec, m
        for metric in ("tflops", "pct_of_cublas"):           # a table per metric, per machine
            assert f"data-metric='{metric}'" in sec.group(0)
        assert (tmp / "html" / "series" / m / "05_2d_blocktiling__4096.html").is_file()
    h200 = load_machine(res, ROOT / "verdicts", "h200")
    assert {k for k, _ in h200.series("tflops")} >= set(SM90A)


def test_a_kernel_a_machine_cannot_run_is_na_never_a_failure(fleet_site):
    tmp, res, html = fleet_site
    h100 = re.search(r"<section class='machine[^']*' data-machine='h100'>.*?</section>", html,
                     re.S).group(0)
    for k in SM90A:
        assert not (tmp / "html" / "series" / "h100" / f"{k}__4096.html").exists()
        cell = re.search(rf"<td class=na colspan=\d+ data-na='{k}' title='([^']*)'>n/a on h100", h100)
        assert cell and "built for sm_90a" in cell.group(1) and "sm_80" in cell.group(1)
        assert not re.search(rf"data-k='{k}'", h100)          # no cell of a verdict at all
    assert "c-FAILED" not in h100.split("Needs attention")[0]
    h200 = re.search(r"<section class='machine[^']*' data-machine='h200'>.*?</section>", html,
                     re.S).group(0)
    assert "class=na" not in h200                            # h200 records every kernel


def test_the_series_page_names_the_gpu_of_each_point(fleet_site):
    tmp, _, _ = fleet_site
    page = (tmp / "html" / "series" / "h100" / "05_2d_blocktiling__4096.html").read_text()
    assert "<th>GPU</th>" in page
    assert "GPU-0aaaaaaa on runner-0" in page and "GPU-1aaaaaaa on runner-1" in page


def test_gemm_publish_builds_asv_pages_for_both_machines(tmp_path):
    if not shutil.which("asv"):
        pytest.skip("asv is not installed")
    from gemm.record import publish
    res = two_machines(tmp_path)
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(repo=str(ROOT), results_dir=str(res), benchmark_dir=str(ROOT / "benchmarks"))
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    html = publish.publish(str(tmp_path / "asv.conf.json"), verdicts_dir=str(ROOT / "verdicts"),
                           html_dir=str(tmp_path / "html"))
    index = json.loads((html / "asv" / "index.json").read_text())
    assert set(index["params"]["machine"]) == {"h100", "h200"}
    assert "<option value='h100'>" in (html / "index.html").read_text()


# --- the gate on a kernel a machine never recorded --------------------------------------------

def test_the_gate_never_fails_a_machine_for_a_kernel_it_cannot_run(tmp_path):
    """MISSING is about a machine's own history: a kernel that only another machine records,
    or that this machine always skips (NaN: an arch it cannot run), is no row of its gate;
    one it did record before and lacks now still is MISSING."""
    from gemm.track import gate
    from gemm.store.history import load_runs
    from tests.asvfake import write_benchmarks, write_run
    res = tmp_path / "results"
    ks, sizes = ["05_2d_blocktiling", SM90A[0]], ["1024"]
    write_benchmarks(res, ks, sizes)
    for i in range(4):
        sha = f"{i + 1:x}" * 40
        write_run(res, sha, 1_700_000_000_000 + i, {(k, "1024"): 30.0 for k in ks}, ks, sizes,
                  machine="h200")
        write_run(res, sha, 1_700_000_000_000 + i, {("05_2d_blocktiling", "1024"): 20.0},
                  ks, sizes, machine="a100")                 # never records the sm_90a kernel
        write_run(res, sha, 1_700_000_000_000 + i, {("05_2d_blocktiling", "1024"): 20.0,
                                                    (SM90A[0], "1024"): math.nan},
                  ks, sizes, machine="a10")                  # records it as skipped, always
    for machine in ("a100", "a10"):
        runs, suite = load_runs(res, machine)
        rows, _ = gate.evaluate(runs, suite, gate.GateConfig())
        assert {r.kernel for r in rows} == {"05_2d_blocktiling"}, machine
        assert not gate.failed(rows), machine
    runs, suite = load_runs(res, "h200")                      # h200 keeps it: MISSING there
    write_run(res, "f" * 40, 1_800_000_000_000, {("05_2d_blocktiling", "1024"): 30.0}, ks, sizes,
              machine="h200")
    runs, suite = load_runs(res, "h200")
    rows, _ = gate.evaluate(runs, suite, gate.GateConfig())
    assert {(r.kernel, r.verdict) for r in gate.failed(rows)} == {(SM90A[0], gate.Verdict.MISSING)}


# --- ci/backfill.sh -------------------------------------------------------------------------------

STUB = r'''
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
if args[0] == "machine":
    print("h100"); sys.exit(0)
assert args[0] == "record", args
opt = dict(zip(args[1::2], args[2::2]))
sha = opt["--commit"]
with open(os.environ["STUB_LOG"], "a") as f:
    f.write(f"{sha} {os.environ.get('CUDA_VISIBLE_DEVICES', '')}\n")
if sha.startswith(tuple(os.environ.get("STUB_FAIL", "-").split())):
    print("asv failed"); sys.exit(1)
d = Path(opt["--results"]) / opt["--machine"]
d.mkdir(parents=True, exist_ok=True)
(d / f"{sha[:8]}-existing-py.json").write_text(json.dumps({"commit_hash": sha,
    "code": Path(opt["--repo"], "code.txt").read_text()}))
'''


@pytest.fixture
def repo(tmp_path):
    """A repository with ci/backfill.sh and ci/lib.sh, 7 commits of code and one that only
    records results (as the per-commit job's commits do)."""
    r = tmp_path / "repo"
    (r / "ci").mkdir(parents=True)
    for f in ("backfill.sh", "lib.sh", "push-results.sh"):
        shutil.copy(ROOT / "ci" / f, r / "ci" / f)
    (r / ".gitignore").write_text("/out/\n/results/*.lock\n")
    git(tmp_path, "init", "-q", str(r))
    git(r, "add", ".")
    git(r, "commit", "-qm", "ci")
    for i in range(7):
        (r / "code.txt").write_text(f"version {i}\n")
        git(r, "add", "code.txt")
        git(r, "commit", "-qm", f"code {i}")
        if i == 3:
            (r / "results" / "h200").mkdir(parents=True)
            (r / "results" / "h200" / "x.json").write_text("{}")
            git(r, "add", "results")
            git(r, "commit", "-qm", "Record h200 results [skip ci]")
    (tmp_path / "stub.py").write_text(STUB)
    return r


def backfill(repo, *args, **env):
    out = repo.parent / "out"
    e = _env(GEMM_CMD=f"{sys.executable} {repo.parent / 'stub.py'}", OUT=str(out),
             STUB_LOG=str(repo.parent / "calls.log"), BACKFILL_WT=str(repo.parent / "wt"), **env)
    e.pop("MACHINE", None)
    return subprocess.run(["bash", str(repo / "ci" / "backfill.sh"), *args], cwd=repo, env=e,
                          capture_output=True, text=True, timeout=300)


def calls(repo) -> list[str]:
    log = repo.parent / "calls.log"
    return [ln.split()[0] for ln in log.read_text().splitlines()] if log.exists() else []


def test_backfill_shards_a_range_and_resumes(repo):
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    code = git(repo, "rev-list", "--reverse", f"{first}..HEAD", "--", "code.txt").split()
    assert len(code) == 7
    rng = f"{first}..HEAD"
    a = backfill(repo, "--shard", "0", "--shards", "2", rng)
    assert a.returncode == 0, a.stdout + a.stderr
    assert calls(repo) == code[0::2]                          # round robin, oldest first
    b = backfill(repo, "--shard", "1", "--shards", "2", rng)
    assert b.returncode == 0, b.stdout + b.stderr
    assert calls(repo) == code[0::2] + code[1::2]              # disjoint; together every commit
    assert "4 recorded, 0 already recorded" in a.stdout and "3 recorded" in b.stdout
    rec = repo / "results" / "h100"
    assert sorted(p.name[:8] for p in rec.glob("*.json")) == sorted(c[:8] for c in code)
    for c in code:                                            # each measured with its own code
        got = json.loads(next(rec.glob(f"{c[:8]}-*.json")).read_text())
        assert got["code"] == subprocess.run(GIT + ["show", f"{c}:code.txt"], cwd=repo,
                                             capture_output=True, text=True).stdout
    assert "left out (changes recorded data only)" in (repo.parent / "out" / "backfill.log").read_text()
    again = backfill(repo, rng)                               # resumable: nothing left to do
    assert again.returncode == 0 and "0 recorded, 7 already recorded" in again.stdout
    assert len(calls(repo)) == 7
    assert git(repo, "worktree", "list").count("\n") == 0    # worktrees removed


def test_backfill_goes_on_past_a_failed_commit_and_records_it_on_the_rerun(repo):
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    code = git(repo, "rev-list", "--reverse", f"{first}..HEAD", "--", "code.txt").split()
    out = backfill(repo, code[1], code[2], code[3], STUB_FAIL=code[2][:10])
    assert out.returncode == 1 and "FAILED (gemm record exit 1" in out.stdout
    assert "2 recorded, 0 already recorded, 1 failed" in out.stdout
    out = backfill(repo, code[1], code[2], code[3])
    assert out.returncode == 0 and "1 recorded, 2 already recorded" in out.stdout
    assert calls(repo) == [code[1], code[2], code[3], code[2]]
    bad = backfill(repo, "--shard", "2", "--shards", "2", code[1])
    assert bad.returncode == 2


# --- ci/push-results.sh: two machines' pushes racing ----------------------------------------

def _discovered() -> str:
    from gemm.record.migrate import discovered_benchmarks
    return json.dumps(discovered_benchmarks(ROOT / "benchmarks"), indent=1)


@pytest.fixture
def remote(tmp_path):
    """A bare 'origin' whose main holds the suite (benchmarks/), ci/ and a stale
    results/benchmarks.json; two clones, one per machine's job."""
    seed = tmp_path / "seed"
    (seed / "ci").mkdir(parents=True)
    shutil.copy(ROOT / "ci" / "push-results.sh", seed / "ci")
    shutil.copytree(ROOT / "benchmarks", seed / "benchmarks",
                    ignore=shutil.ignore_patterns("__pycache__"))
    bench = json.loads(_discovered())
    bench.pop(next(k for k in bench if k != "version"))            # an older suite's file
    (seed / "results").mkdir()
    (seed / "results" / "benchmarks.json").write_text(json.dumps(bench, indent=1))
    (seed / ".gitignore").write_text("__pycache__/\n")
    git(tmp_path, "init", "-q", str(seed))
    git(seed, "add", ".")
    git(seed, "commit", "-qm", "seed")
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(tmp_path / "origin.git"))
    clones = {}
    for m in ("h200", "h100"):
        c = tmp_path / m
        git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), str(c))
        git(c, "checkout", "-q", "--detach")                     # as actions/checkout leaves it
        (c / "results" / m).mkdir(parents=True)
        (c / "results" / m / "abc12345-existing-py.json").write_text(f'{{"machine": "{m}"}}')
        (c / "verdicts" / m).mkdir(parents=True)
        (c / "verdicts" / m / "abc.json").write_text(f'{{"machine": "{m}"}}')
        # each job's asv rewrote benchmarks.json its own way (formatting, a definition more)
        text = _discovered() if m == "h200" else json.dumps(json.loads(_discovered()))
        (c / "results" / "benchmarks.json").write_text(text)
        clones[m] = c
    return tmp_path, clones


def push(clone, machine, **env):
    return subprocess.run(["bash", "ci/push-results.sh", "-m", f"Record {machine} results",
                           f"results/{machine}", f"verdicts/{machine}"], cwd=clone,
                          env=_env(PUSH_BACKOFF_S="0", **env), capture_output=True, text=True,
                          timeout=300)


def _check_main(tmp):
    check = tmp / "check"
    git(tmp, "clone", "-q", str(tmp / "origin.git"), str(check))
    for m in ("h200", "h100"):
        assert json.loads((check / "results" / m / "abc12345-existing-py.json").read_text()) == {"machine": m}
        assert (check / "verdicts" / m / "abc.json").is_file()
    assert (check / "results" / "benchmarks.json").read_text() == _discovered()
    return check


def test_two_racing_pushes_keep_both_machines_results(remote):
    tmp, clones = remote
    # h100's push races h200's: h200 pushes between h100's fetch-and-rebase and its push
    # (h100's pre-push hook runs h200's whole push the first time), so h100's first push is
    # rejected and it must fetch, rebase over h200's commit and push again
    hook = clones["h100"] / ".git" / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\n[ -e {tmp}/raced ] && exit 0\ntouch {tmp}/raced\n"
                    f"cd {clones['h200']} && env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE "
                    f"bash ci/push-results.sh -m 'Record h200 results' results/h200 verdicts/h200 "
                    f"> {tmp}/h200.log 2>&1\n")
    hook.chmod(0o755)
    out = push(clones["h100"], "h100")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "on origin/main (attempt 1)" in (tmp / "h200.log").read_text()
    assert "attempt 1 of 6 rejected" in out.stdout and "(attempt 2)" in out.stdout
    check = _check_main(tmp)
    log = git(check, "log", "--format=%s", "main")
    assert log.splitlines()[:3] == ["Record h100 results", "Record h200 results", "seed"]


def test_a_later_push_rebases_over_a_shared_file_conflict(remote):
    tmp, clones = remote
    for m in ("h200", "h100"):       # both committed before either pushed: h100's rebase
        git(clones[m], "add", "-A")  # meets h200's different benchmarks.json
        git(clones[m], "commit", "-qm", f"Record {m} results")
    assert push(clones["h200"], "h200").returncode == 0
    out = push(clones["h100"], "h100")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "results/benchmarks.json: took the branch's version" in out.stdout
    _check_main(tmp)


def test_a_conflict_outside_the_shared_files_is_never_resolved(remote):
    tmp, clones = remote
    for m in ("h200", "h100"):       # a job that writes another machine's file: refuse
        (clones[m] / "results" / "h200" / "abc12345-existing-py.json").parent.mkdir(exist_ok=True)
        (clones[m] / "results" / "h200" / "abc12345-existing-py.json").write_text(f'"{m}"')
    assert push(clones["h200"], "h200").returncode == 0
    out = subprocess.run(["bash", "ci/push-results.sh", "results/h100", "results/h200"],
                         cwd=clones["h100"], env=_env(PUSH_BACKOFF_S="0"), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 3 and "not a shared file" in out.stderr
    check = tmp / "check"
    git(tmp, "clone", "-q", str(tmp / "origin.git"), str(check))
    assert (check / "results" / "h200" / "abc12345-existing-py.json").read_text() == '"h200"'


def test_a_record_keeps_which_gpu_and_runner_made_the_run(monkeypatch):
    """gemm_host (asv does not read it) gets the runner's host name and the measured GPU's
    UUID, so that runs of several runners of one model say which GPU made each point."""
    from gemm.measure import facts
    from gemm.record import machine
    monkeypatch.setattr(facts, "gpu_identity", lambda: "NVIDIA H200 GPU-304aee7c-0000-1111")
    got = machine.host_facts("h200")
    assert got["gpu_uuid"] == "GPU-304aee7c-0000-1111" and got["host"]
    data = {"params": {"machine": "h200", "gpu": "NVIDIA H200"}}
    assert machine.unify_params(data, got)
    assert data["gemm_host"]["gpu_uuid"] == "GPU-304aee7c-0000-1111"
    assert "gpu_uuid" not in data["params"]                   # never part of asv's identity
    monkeypatch.setattr(facts, "gpu_identity", lambda: None)
    assert "gpu_uuid" not in machine.host_facts("h200")
