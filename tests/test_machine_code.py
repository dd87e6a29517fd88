"""Same machine code (gemm.explain.identity) and the gate's use of it: git sees every edit
under kernels/ as a change to the kernels that build from it; nvcc says which of them run
the same code. Real builds (nvcc + cuobjdump, no GPU; skipped where either is missing) of
commits made here: a refactor (a comment, a default the registry overrides), a real change
of 14's tile order, a retune of 14's small bucket, a change to 14's registry entry alone, a
cluster shape declared, and nvcc options set in the loader's code."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gemm.explain import build, identity
from gemm.track import codeid, gate as rule
from gemm.track.judge import Request, judge
from tests.asvfake import write_benchmarks, write_run

ROOT = Path(__file__).resolve().parents[1]
K14, K05 = "14_bf16_wgmma_tma", "05_2d_blocktiling"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


@pytest.fixture(scope="module")
def commits(tmp_path_factory, tools):
    """{name: sha} of a repository of kernels/: base, refactor, reorder, retune, smem, cluster
    (a cluster shape declared: the same SASS), flags (nvcc options in the loader's code)."""
    if not shutil.which("git"):
        pytest.skip("no git")
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "kernels", repo / "kernels")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    out = {}

    def commit(name):
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", name], check=True)
        out[name] = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True,
                                   text=True, check=True).stdout.strip()
    subprocess.run([*git, "init", "-q"], check=True)
    commit("base")
    kernels = repo / "kernels"
    _edit(kernels / "hopper.cuh", "// ---- persistent tile order (14-16) ",
          "// (a comment only)\n// ---- persistent tile order (14-16) ")
    _edit(kernels / "14_bf16_wgmma_tma.cu", "#define GROUP_M 16", "#define GROUP_M 8")
    commit("refactor")
    _edit(kernels / "hopper.cuh", "row0 = (first_m + in % rows) * kRows;",
          "row0 = (first_m + rows - 1 - in % rows) * kRows;")
    commit("reorder")
    _edit(kernels / "tuned" / "h200.toml", "defines = { BM = 64, BN = 128, STAGES = 6 }",
          "defines = { BM = 64, BN = 128, STAGES = 8 }")
    commit("retune")
    toml = kernels / "kernels.toml"
    text = toml.read_text()
    at = text.index('smem = "', text.index('name = "14_bf16_wgmma_tma"'))
    end = text.index("\n", at)
    assert text[at:end] == 'smem = "STAGES * (BM + BN) * 128 + 1024"'
    toml.write_text(text[:at] + 'smem = "STAGES * (BM + BN) * 128 + 2048"' + text[end:])
    commit("smem")
    _edit(kernels / "14_bf16_wgmma_tma.cu", 'extern "C" __global__ void __launch_bounds__',
          'extern "C" __global__ void __cluster_dims__(1, 1, 1) __launch_bounds__')
    commit("cluster")
    (repo / "gemm" / "cuda").mkdir(parents=True)
    (repo / "gemm" / "cuda" / "loader.py").write_text("def nvcc_options(spec):\n"
                                                      "    return ['--use_fast_math']\n")
    commit("flags")
    return repo, out


def test_git_sees_a_change_where_nvcc_sees_one_only_in_the_real_ones(commits):
    repo, c = commits
    steps = [("base", "refactor", True), ("refactor", "reorder", False),
             ("reorder", "retune", False), ("retune", "smem", False),
             ("smem", "cluster", False), ("cluster", "flags", False)]
    for old, new, same in steps:
        assert new == "flags" or codeid.kernel_changed(repo, c[old], c[new], K14), (old, new)
        assert identity.same_machine_code(str(repo), c[old], c[new], K14, "h200") is same, \
            (old, new)
    # the tile order is 14-16's; 05 builds from neither file, so git and nvcc agree
    assert not codeid.kernel_changed(repo, c["refactor"], c["reorder"], K05)
    assert identity.same_machine_code(str(repo), c["refactor"], c["reorder"], K05, "h200")
    # a tuned kernel on a machine without a table, a "native" one without an architecture:
    # what would run is not known, so not the same
    assert not identity.same_machine_code(str(repo), c["base"], c["refactor"], K14, "other-gpu")
    assert not identity.same_machine_code(str(repo), c["refactor"], c["reorder"], K05, "h200",
                                          None)
    # the gate's question: git alone says no, the compiler yes, where only the sources moved
    assert not codeid.same_code(repo, c["base"], c["refactor"], K14)
    assert codeid.same_code(repo, c["base"], c["refactor"], K14, lambda o, n, k:
                            identity.same_machine_code(str(repo), o, n, k, "h200"))
    assert not codeid.same_code(repo, c["refactor"], c["reorder"], K14, lambda o, n, k:
                                identity.same_machine_code(str(repo), o, n, k, "h200"))


def test_what_cannot_be_built_or_read_is_never_the_same(commits, monkeypatch):
    repo, c = commits
    assert not identity.same_machine_code(str(repo), c["base"], "f" * 40, K14, "h200")
    assert not identity.same_machine_code(str(repo), c["base"], c["refactor"], "99_nope",
                                          "h200")

    def missing():
        raise build.ExplainError("no nvcc")
    monkeypatch.setattr(identity, "find_tools", missing)
    monkeypatch.setattr(identity, "_answers", {})
    assert not identity.same_machine_code(str(repo), c["base"], c["refactor"], K14, "h200")


def test_the_gate_asks_the_compiler_where_git_sees_a_build_change(tmp_path):
    """21c7ce0 changed 12's registry entry: git alone sends its large series to the A/B; with
    a compiler that finds the same machine code they are noted, counted and not sent; where
    it does not, as before."""
    old, new = (subprocess.run(["git", "rev-parse", rev], capture_output=True, text=True,
                               check=True).stdout.strip() for rev in ("21c7ce0~1", "21c7ce0"))
    k12 = "12_tf32_mma_sync"
    asked = []

    def same(answer):
        def ask(repo, older, newer, kernel, machine):
            asked.append((older, newer, kernel, machine))
            return answer
        return ask
    ks, sizes = [K05, k12], ["4096", "512"]
    res = tmp_path / "results"
    write_benchmarks(res, ks, sizes)
    for i, commit in enumerate((old, new)):
        write_run(res, commit, 1_000_000 + i, {(k, s): 30.0 for k in ks for s in sizes}, ks,
                  sizes)
    for answer in (True, False):
        asked.clear()
        rep = judge(Request(str(res), "h200", config=rule.GateConfig(confirm=False),
                            use_anchor=False, calibration=str(tmp_path / "cal"),
                            verdicts=str(tmp_path / "v"), same_build=same(answer)))
        large12 = [r for r in rep.rows if r.kernel == k12 and r.size == "4096"]
        assert len(large12) == 2 and {a[2] for a in asked} == {k12}
        assert all(a[:2] == (old, new) and a[3] == "h200" for a in asked)
        if answer:
            assert rep.code_changed == 0 and rep.same_build == 2
            assert all(not r.code_changed and r.verdict == rule.Verdict.OK
                       and "machine code not (nvcc)" in r.note for r in large12)
        else:
            assert rep.code_changed == 2 and rep.same_build == 0
            assert all(r.code_changed and r.verdict == rule.Verdict.UNRESOLVED
                       for r in large12)


def test_a_kept_verdict_reused_without_a_gpu_says_the_same_code_once(monkeypatch):
    """A row whose kept verdict covers it is given that verdict and its note, which already
    says which comparisons needed no A/B: decide does not add it again."""
    from gemm.track import confirm
    monkeypatch.setattr(confirm, "same_code", lambda repo, old, new, k, same=None: old == "c3")
    r = rule.Row("05_2d_blocktiling", "4096", "tflops", 10, 30.0, 29.4, -0.02, 0.005,
                 rule.Verdict.CANDIDATE, reference="c3", anchor="anc", anchor_change=-0.02,
                 min_effect=0.01)
    note = ("not confirmed: A/B vs anc here: SAME; "
            "vs c3: the same measured code (git or nvcc), so no A/B: the machine, not the code")
    kept = {r.key: {"verdict": "noise", "new": 29.4, "against": ["anc", "c3"], "note": note,
                    "date": "2026-12-02"}}
    confirm.decide([r], rule.GateConfig(), "new", kept=kept,
                   probe=lambda: (False, "no GPU here"))
    assert r.identical == ["c3"] and r.verdict == rule.Verdict.NOISE
    assert r.note == f"recorded 2026-12-02: {note}"


def test_decide_and_the_carried_evidence_ask_with_the_compiler(monkeypatch, tmp_path):
    """confirm.decide and confirm.evidence hand judge's `same_build` to codeid.same_code."""
    from types import SimpleNamespace
    from gemm.store import verdicts
    from gemm.track import confirm
    seen = []
    monkeypatch.setattr(confirm, "same_code",
                        lambda repo, old, new, k, same=None: seen.append(same) or True)
    mine = object()
    r = rule.Row(K05, "4096", "tflops", 10, 30.0, 29.4, -0.02, 0.005, rule.Verdict.CANDIDATE,
                 reference="c3", min_effect=0.01)
    confirm.decide([r], rule.GateConfig(), "new", probe=lambda: (False, "no GPU"),
                   same_build=mine)
    assert seen == [mine] and r.verdict == rule.Verdict.NOISE
    values = {"first": [30.0, 30.0], "last": [30.0, 30.0], "new": [29.0] * 4, "k": [3, 3]}
    verdicts.save(tmp_path, "h200", "c3", [{"kernel": K05, "size": "4096", "metric": "tflops",
                  "verdict": "UNRESOLVED", "effects": [{"against": "anc", "values": values,
                                                         "carry": True}]}])
    c = rule.Row(K05, "4096", "tflops", 10, 30.0, 30.0, 0.0, 0.005, rule.Verdict.OK,
                 reference="c3", anchor="anc", anchor_change=0.0, min_effect=0.01)
    confirm.carry([c], tmp_path, "h200", [SimpleNamespace(commit="c3")])
    seen.clear()
    assert confirm.evidence([c], tmp_path, "h200", ".", "new", mine) == 1 and seen == [mine]


def test_judge_hands_its_compiler_to_decide(monkeypatch, tmp_path):
    from gemm.track import confirm
    got = {}
    real = confirm.decide

    def spy(*args, **kwargs):
        got.update(kwargs)
        return real(*args, **kwargs)
    monkeypatch.setattr(confirm, "decide", spy)
    res = tmp_path / "results"
    write_benchmarks(res, [K05], ["4096"])
    for i, commit in enumerate(("a" * 40, "b" * 40)):
        write_run(res, commit, 1_000_000 + i, {(K05, "4096"): 30.0}, [K05], ["4096"])
    judge(Request(str(res), "h200", config=rule.GateConfig(confirm=False), use_anchor=False,
                  calibration=str(tmp_path / "cal"), verdicts=str(tmp_path / "v"),
                  same_build=lambda *a: True))
    assert callable(got["same_build"]) and got["same_build"]("x", "y", K05) is True


def test_a_header_in_kernels_that_an_angle_include_finds_is_part_of_the_build(tmp_path):
    """nvcc is given -I kernels/: a <name> found there changes the build, so the compile
    cache (keyed by build.source_hash) must not hand the old cubin back."""
    from gemm.core.registry import KernelSpec
    (tmp_path / "k.cu").write_text("#include <mma.h>\n#include \"own.cuh\"\n")
    (tmp_path / "own.cuh").write_text("// own\n")
    spec = KernelSpec("k", "k.cu", "k_main", "fp32", "cublas_fp32")
    before = build.source_hash(tmp_path, spec)
    (tmp_path / "mma.h").write_text("#define PAD 8\n")
    shadowed = build.source_hash(tmp_path, spec)
    (tmp_path / "mma.h").write_text("#define PAD 16\n")
    assert len({before, shadowed, build.source_hash(tmp_path, spec)}) == 3
