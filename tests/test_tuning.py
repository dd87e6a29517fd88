"""Autotuning without a GPU: the search space, size classes, the tuned table and how the
launcher's spec is resolved from it."""
import shutil
import tomllib
from dataclasses import replace

import pytest

from gemm.core import registry, tuning
from gemm.core.problem import Problem


def test_size_classes():
    assert tuning.size_class(Problem.square(512)) == "small"
    assert tuning.size_class(Problem.square(1024)) == "small"
    assert tuning.size_class(Problem.square(2048)) == "medium"
    assert tuning.size_class(Problem(4096, 4096, 64)) == "large"
    assert tuning.size_class(Problem(1024, 8192, 8192)) == "medium"


def test_candidates_are_the_valid_combinations_of_the_space():
    spec = replace(registry.get("05"), tune={"BM": [64, 128], "TM": [8, 16], "TN": [8]})
    cands = tuning.candidates(spec)
    assert {"BM": 64, "TM": 8, "TN": 8} in cands
    assert len(cands) == 4
    bad = replace(registry.get("05"), tune={"BM": [64, 2048]})   # 2048 threads: no block
    assert tuning.candidates(bad) == [{"BM": 64}]


def test_the_tuned_kernel_declares_a_space_over_its_own_constants():
    spec = registry.get("10_autotuned")
    assert spec.tuned and set(spec.tune) <= set(spec.defines)
    assert len(tuning.candidates(spec)) >= 8


def test_resolve_takes_the_class_winner_and_explicit_constants_win(tmp_path, monkeypatch):
    src = registry.kernels_dir()
    shutil.copytree(src, tmp_path / "k")
    (tmp_path / "k" / "tuned").mkdir(exist_ok=True)
    text = tuning.render_table("gpu-x", {"10_autotuned": {
        "small": {"defines": {"BM": 64, "BN": 128}, "size": "1024", "tflops": 30.0}}}, "test")
    (tmp_path / "k" / "tuned" / "gpu-x.toml").write_text(text)
    assert tomllib.loads(text)["10_autotuned"]["small"]["defines"] == {"BM": 64, "BN": 128}
    monkeypatch.setenv("GEMM_KERNELS_DIR", str(tmp_path / "k"))
    tuning.table.cache_clear()
    try:
        spec = registry.get("10_autotuned")
        small = tuning.resolve(spec, Problem.square(1024), "gpu-x")
        assert (small.defines["BM"], small.defines["BN"], small.tile) == (64, 128, (64, 128))
        assert not small.tuned
        big = tuning.resolve(spec, Problem.square(4096), "gpu-x")      # no winner: defaults
        assert big.defines == spec.defines
        other = tuning.resolve(spec, Problem.square(1024), "gpu-y")     # no table for it
        assert other.defines == spec.defines
        fixed = spec.with_defines(BM=128)
        assert tuning.resolve(fixed, Problem.square(1024), "gpu-x").defines["BM"] == 128
    finally:
        tuning.table.cache_clear()


def test_the_registry_rejects_a_space_over_unknown_constants(tmp_path):
    from tests.test_registry import BASE, _write
    with pytest.raises(ValueError, match="tune maps constants"):
        registry.load_registry(_write(tmp_path, BASE + 'tune = { XX = [1, 2] }\n'))
