"""The CPU-side tools of ci/: a policy study's candidate rewrite (ci/policy_candidate.py)."""
from __future__ import annotations

import importlib.util
import json
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
        k: v for k, v in SUITE.as_dict().items() if k not in ("min_time_s", "max_samples")}
    assert (ROOT / "gemm" / "core" / "policy.py").read_text() == ours   # only the copy changed


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
    the prior (sd) costs power that the robust sd would not."""
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
    assert p_wide < 0.3 < 0.7 < p_tight


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
