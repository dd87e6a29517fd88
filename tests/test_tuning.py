"""Autotuning without a GPU: the search space, tuning buckets, the tuned table and how the
launcher's spec is resolved from it."""
import shutil
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from gemm.core import registry, tuning
from gemm.core.problem import Problem


def test_tuning_buckets():
    assert tuning.tuning_bucket(Problem.square(512)) == "small"
    assert tuning.tuning_bucket(Problem.square(1024)) == "small"
    assert tuning.tuning_bucket(Problem.square(2048)) == "medium"
    assert tuning.tuning_bucket(Problem(4096, 4096, 64)) == "large"
    assert tuning.tuning_bucket(Problem(1024, 8192, 8192)) == "medium"


# The bucket every size the suite tracks, checks or tunes at ran with before the gate's size
# class and the tuning bucket were told apart (tuning.size_class, by M * N): written out, not
# computed, so a change to the rule shows here.
BUCKET_BEFORE = {
    "64": "small", "128": "small", "256": "small", "512": "small", "1000": "small",
    "1024": "small", "1535": "small", "1536": "medium", "1537": "medium", "2048": "medium",
    "3071": "medium", "3072": "large", "3073": "large", "4096": "large", "8192": "large",
    "4096x4096x1024": "large", "8192x1024x4096": "medium", "1024x8192x8192": "medium",
    "3001x2999x3003": "medium", "1000x832x504": "small", "1x1x1": "small", "65x129x7": "small",
    "127x1x300": "small", "1x4097x3": "small", "4095x63x129": "small", "33x7x8": "small",
    "70x130x40": "small", "129x257x72": "small"}
H200_SMALL = {"BM": 64, "BN": 128, "WM": 32, "WN": 64}
H200_MEDIUM_LARGE = {"BM": 128, "BN": 256, "WM": 64, "WN": 64}


def test_every_tracked_size_keeps_the_tuned_constants_it_had(tmp_path, monkeypatch):
    from gemm.core import shapes
    assert set(shapes.TRACKED + shapes.CHECK_SHAPES + shapes.QUICK) <= set(BUCKET_BEFORE)
    assert [s for _, _, s in tuning.TUNING_BUCKETS] == ["1024", "2048", "4096"]
    spec = registry.get("10_autotuned")
    for size, bucket in BUCKET_BEFORE.items():
        prob = Problem.parse(size)
        assert tuning.tuning_bucket(prob) == bucket, size
        want = H200_SMALL if bucket == "small" else H200_MEDIUM_LARGE   # kernels/tuned/h200.toml
        got = tuning.resolve(spec, prob, "h200").defines
        assert {k: got[k] for k in want} == want, size
        assert got == spec.with_defines(**want).defines, size
    # a table whose buckets differ everywhere: each size takes its own bucket's constants
    shutil.copytree(registry.kernels_dir(), tmp_path / "k")
    (tmp_path / "k" / "tuned").mkdir(exist_ok=True)
    won = {"small": {"BM": 64, "BN": 64}, "medium": {"BM": 64, "BN": 128},
           "large": {"BM": 128, "BN": 128}}
    (tmp_path / "k" / "tuned" / "gpu-x.toml").write_text(tuning.render_table(
        "gpu-x", {"10_autotuned": {b: {"defines": d} for b, d in won.items()}}, "test"))
    monkeypatch.setenv("GEMM_KERNELS_DIR", str(tmp_path / "k"))
    tuning.table.cache_clear()
    try:
        spec = registry.get("10_autotuned")
        for size, bucket in BUCKET_BEFORE.items():
            got = tuning.resolve(spec, Problem.parse(size), "gpu-x").defines
            assert (got["BM"], got["BN"]) == (won[bucket]["BM"], won[bucket]["BN"]), size
    finally:
        tuning.table.cache_clear()


def test_the_gate_size_class_goes_by_work_not_the_tuning_bucket():
    """3001x2999x3003 is tuned as medium (M * N) and judged as large (M * N * K)."""
    from gemm.core.problem import SizeClass
    odd = Problem.parse("3001x2999x3003")
    assert (odd.size_class, tuning.tuning_bucket(odd)) == (SizeClass.LARGE, "medium")
    assert [Problem.parse(s).size_class for s in ("999", "1000", "2047", "2048")] == \
        ["small", "medium", "medium", "large"]


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


# 13 and 14 (issue 27): tuned = true with a search space over tile shape and stages. Their
# constants as they ran before they were tuned, written out: until a GPU's table has an entry
# for them, every size runs with exactly these.
WGMMA_DEFAULTS = {
    "13_tf32_wgmma_tma": {"BM": 128, "BN": 256, "STAGES": 4},
    "14_bf16_wgmma_tma": {"BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 16,
                          "PRODUCER_REGS": 40, "CONSUMER_REGS": 232}}


def _without(tmp_path, kernels: tuple) -> Path:
    """A copy of kernels/ whose tuned tables hold no entry for `kernels` (this commit's
    state for 13 and 14, whatever a later `gemm tune` writes)."""
    dst = tmp_path / "k"
    shutil.copytree(registry.kernels_dir(), dst)
    for path in (dst / "tuned").glob("*.toml"):
        with open(path, "rb") as f:
            tables = {k: v for k, v in tomllib.load(f).items() if k not in kernels}
        path.write_text(tuning.render_table(path.stem, tables, "test"))
    return dst


def test_the_wgmma_kernels_run_their_registry_defaults_where_no_table_has_them(tmp_path,
                                                                                monkeypatch):
    from gemm.core import shapes
    monkeypatch.setenv("GEMM_KERNELS_DIR", str(_without(tmp_path, tuple(WGMMA_DEFAULTS))))
    tuning.table.cache_clear()
    try:
        assert "10_autotuned" in tuning.table("h200")   # the other tuned kernel's entry stays
        sizes = set(BUCKET_BEFORE) | set(shapes.TRACKED) | {"129x131x72"}
        for name, before in WGMMA_DEFAULTS.items():
            spec = registry.get(name)
            assert spec.tuned and spec.defines == before
            for gpu in ("h200", "gpu-without-a-table"):
                for size in sizes:
                    got = tuning.resolve(spec, Problem.parse(size), gpu)
                    assert got.defines == before, (name, gpu, size)
                    assert (got.tile, got.block, got.smem, got.persistent, got.tma_boxes()) == \
                        (spec.tile, spec.block, spec.smem, spec.persistent, spec.tma_boxes())
    finally:
        tuning.table.cache_clear()


def test_the_wgmma_search_spaces_fit_one_short_tune_and_keep_the_defaults():
    """Small spaces (`gemm tune` measures each candidate at 1024, 2048, 4096 and a ragged
    shape): the registry defaults are a candidate (what medium and large keep unless beaten),
    and so is a 64 x 128 tile (128 tiles at 1024: one wave of 132 SMs)."""
    for name, before in WGMMA_DEFAULTS.items():
        spec = registry.get(name)
        cands = tuning.candidates(spec)
        assert 2 <= len(cands) <= 8, (name, cands)
        assert {k: before[k] for k in spec.tune} in cands
        assert {"BM": 64, "BN": 128, "STAGES": 4} in cands
        for c in cands:
            s = spec.with_defines(**c)
            assert s.threads == 128 * (1 + c["BM"] // 64) and s.smem <= 227 * 1024
            assert s.tma_boxes()[0][:2] == ("A", c["BM"]) and s.tma_boxes()[1][:2] == ("B", c["BN"])


def test_every_tuned_candidate_accepts_the_shapes_it_is_tuned_and_checked_at():
    """`gemm tune` rejects a candidate with any record that is not ok: a shape the kernel
    refuses by contract (TMA without pad_k: K a multiple of 8) would reject them all, so such
    a kernel is checked at a ragged shape it takes; 13 and 14 stage an odd K (pad_k) and take
    the ragged shape itself."""
    from dataclasses import replace
    from gemm.core.geometry import unsupported
    from gemm.measure.tune import CHECK_SHAPE, check_shape
    assert check_shape(registry.get("10_autotuned")) == CHECK_SHAPE == "129x131x67"
    assert check_shape(registry.get("14_bf16_wgmma_tma")) == "129x131x67"
    assert check_shape(replace(registry.get("14_bf16_wgmma_tma"), pad_k=False)) == "129x131x72"
    for spec in registry.registry().values():
        if not spec.tune:
            continue
        shape = check_shape(spec)
        for c in tuning.candidates(spec):
            s = spec.with_defines(**c)
            for size in [size for _, _, size in tuning.TUNING_BUCKETS] + [shape]:
                assert unsupported(s, Problem.parse(size)) is None, (spec.name, c, size)


def test_a_new_search_keeps_the_constants_set_outside_its_space():
    """18's large bucket builds stream-K (STREAM_K, not searched): a search replaces BM and
    the rest of its space, and keeps STREAM_K; buckets without such a constant stay as won."""
    spec = registry.get("18")
    assert "STREAM_K" not in spec.tune
    before = {"large": {"defines": {"BM": 128, "STAGES": 6, "STREAM_K": 1}, "size": "4096"},
              "small": {"defines": {"BM": 64, "STAGES": 6}}}
    won = {"large": {"defines": {"BM": 64, "STAGES": 5}, "size": "4096", "tflops": 1.0},
           "small": {"defines": {"BM": 128, "STAGES": 4}, "size": "1024"}}
    kept = tuning.keep_fixed(spec, before, won)
    assert kept["large"]["defines"] == {"BM": 64, "STAGES": 5, "STREAM_K": 1}
    assert kept["large"]["tflops"] == 1.0
    assert kept["small"]["defines"] == {"BM": 128, "STAGES": 4}
    assert tuning.keep_fixed(spec, {}, won) == won
    with pytest.raises(ValueError):   # a kept constant the entry no longer has
        tuning.keep_fixed(spec, {"large": {"defines": {"OLD_NAME": 1}}}, won)
