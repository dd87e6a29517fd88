"""Split-K (registry `split_k`, gemm.core.splitk): when 10_autotuned splits K and how, that
every other launch is exactly the plain one, what the registry refuses, that the reduction
kernel compiles, and the launcher's order of work (the GEMM into the workspace, then the
reduction into C), all without a GPU."""
import itertools
from dataclasses import replace

import pytest

from gemm.core import registry, shapes
from gemm.core.problem import Problem
from gemm.core.splitk import MAX_SPLITS, MIN_STEPS, SplitK, chunk_for, split_k

from .test_registry import kernel_entry
from .test_registry import load_text as _load
from .test_staging import _Recorder

K10 = registry.get("10")
SMALL = K10.with_defines(BM=64, BN=128, WM=32, WN=64)     # the H200's small bucket


def test_only_10_splits_k_and_09_is_built_without_it():
    assert K10.split_k and K10.defines["SPLIT_K_OK"] == 1
    assert [s.name for s in registry.registry().values() if s.split_k] == ["10_autotuned"]
    assert "SPLIT_K_OK" not in registry.get("09").defines
    assert split_k(registry.get("09"), Problem(512, 512, 512), 132) is None


def test_512_on_the_h200_runs_4_splits_of_128():
    """32 tiles of 64 x 128 for 132 SMs: S = min(132 // 32, 512 // 128, 8) = 4 -> 128 blocks."""
    s = split_k(SMALL, Problem(512, 512, 512), 132)
    assert s == SplitK(4, 128, 512, 512, 512)
    assert s.ranges() == [(0, 128), (128, 256), (256, 384), (384, 512)]
    assert s.workspace_bytes == 4 * 512 * 512 * 4


@pytest.mark.parametrize("size", ["1000", "1024", "2048", "4096", "8192", "4096x4096x1024",
                                  "3001x2999x3003"])
def test_at_and_above_one_wave_nothing_splits(size):
    """With the constants each size runs on the H200 (small bucket below 2048, 09's defaults
    from 2048 up)."""
    prob = Problem.parse(size)
    spec = SMALL if prob.M * prob.N < 2048 * 2048 else K10
    assert split_k(spec, prob, 132) is None


def test_09s_tile_below_one_wave_splits_too():
    """The defaults (a GPU without a tuned table): 128 x 256 makes 32 tiles at 1000 and 1024."""
    assert split_k(K10, Problem.parse("1024"), 132).splits == 4


def test_a_short_k_does_not_split():
    assert split_k(SMALL, Problem(512, 512, 255), 132) is None      # 255 // 128 = 1
    assert split_k(SMALL, Problem(512, 512, 256), 132).splits == 2
    assert split_k(SMALL, Problem(64, 128, 8192), 132).splits == MAX_SPLITS


def test_the_sanitizer_shape_splits_with_the_k_remainder_in_the_last_split():
    s = split_k(SMALL, Problem.parse("256x256x260"), 132)
    assert s.splits == 2 and s.ranges() == [(0, 136), (136, 260)]


def test_splits_partition_k_in_whole_k_steps():
    """Over shapes and SM counts: the ranges cover [0, K) once, in order, none empty, each but
    the last a whole number of BK steps, at least MIN_STEPS of them; the blocks fit the SMs;
    the kernel's own chunk formula (ceil(K / gridDim.z) rounded up to BK) gives the same."""
    bk = SMALL.defines["BK"]
    seen = 0
    for m, n, k, sms in itertools.product((1, 64, 100, 512, 700), (4, 128, 512, 1000),
                                          (4, 120, 128, 260, 1004, 4096, 100000), (16, 132)):
        s = split_k(SMALL, Problem(m, n, k), sms)
        if s is None:
            continue
        seen += 1
        tiles = -(-m // 64) * -(-n // 128)
        assert 2 <= s.splits <= MAX_SPLITS and tiles * s.splits <= sms
        r = s.ranges()
        assert r[0][0] == 0 and r[-1][1] == k and all(a < b for a, b in r)
        assert all(r[i][1] == r[i + 1][0] for i in range(len(r) - 1))
        assert all((b - a) % bk == 0 and b - a >= MIN_STEPS * bk for a, b in r[:-1])
        assert s.chunk == chunk_for(k, s.splits, bk)
    assert seen > 20


def test_tracked_shapes_split_only_at_512():
    split = [p.label for p in shapes.problems(shapes.TRACKED) if split_k(SMALL, p, 132)]
    assert split == ["512"]


ENTRY = kernel_entry("block = [128]", "tile = [64, 128]", 'precision = "fp32"',
                     'baseline = "cublas_fp32"')


def test_registry_split_k_needs_the_kernels_split_code(tmp_path):
    ok = ENTRY + "defines = { BK = 8, SPLIT_K_OK = 1 }\nsplit_k = true\n"
    assert _load(tmp_path, ok)["x"].split_k
    assert not _load(tmp_path, ENTRY + "defines = { BK = 8, SPLIT_K_OK = 1 }\n")["x"].split_k
    for bad in ("defines = { BK = 8 }\nsplit_k = true\n",                  # not built with it
                "defines = { SPLIT_K_OK = 1 }\nsplit_k = true\n",          # no K step
                "defines = { BK = 8, SPLIT_K_OK = 1 }\nsplit_k = true\npersistent = true\n"):
        with pytest.raises(ValueError, match="split_k"):
            _load(tmp_path, ENTRY + bad)


class _Split(_Recorder):
    """The GPU stand-in with the split-K workspace, and each GEMM's grid recorded."""
    def __init__(self, monkeypatch):
        super().__init__(monkeypatch, grids=True)
        import gemm.cuda.staging
        rec = self

        class Work:
            def __init__(self, split):
                rec.log.append(("alloc", split))

            def pointer(self):
                return 0xD000

            def reduce(self, c, alpha, beta, stream=None):
                rec.log.append(("reduce", int(c), alpha, beta))

        monkeypatch.setattr(gemm.cuda.staging, "SplitKWorkspace", Work)


def test_a_split_launch_writes_the_workspace_then_reduces_into_c(monkeypatch):
    from gemm.cuda.launch import launcher
    rec = _Split(monkeypatch)
    prob = Problem(512, 512, 512, 1.5, -0.5)
    launch = launcher(SMALL, prob)
    assert launch.split is not None and launch.staged is None
    launch(0x100, 0x200, 0x300)
    launch(0x110, 0x210, 0x310)        # a second launch: no new allocation
    assert [e[0] for e in rec.log] == ["alloc", "gemm", "reduce", "gemm", "reduce"]
    assert rec.log[0][1] == SplitK(4, 128, 512, 512, 512)
    # the GEMM: grid z = S, alpha 1, beta 0, the workspace in place of C; K whole (the kernel
    # takes its range from blockIdx.z)
    assert rec.log[1][1:] == ("sgemm_pipeline_main", (4, 8, 4),
                              (512, 512, 512, 1.0, 0x100, 0x200, 0.0, 0xD000))
    assert rec.log[2][1:] == (0x300, 1.5, -0.5)          # C = alpha * sum + beta * C
    assert rec.log[4][1:] == (0x310, 1.5, -0.5)


@pytest.mark.parametrize("size", ["1000", "1024"])
def test_without_a_split_the_launch_is_the_plain_one(monkeypatch, size):
    from gemm.cuda.launch import launcher
    rec = _Split(monkeypatch)
    prob = replace(Problem.parse(size), alpha=1.5, beta=0.5)
    launch = launcher(SMALL, prob)
    assert launch.split is None
    launch(0x100, 0x200, 0x300)
    (kind, entry, grid, args), = rec.log
    assert kind == "gemm" and grid == (8, 16)
    assert entry == (SMALL.main if size == "1024" else SMALL.edge)
    assert args == (prob.M, prob.N, prob.K, 1.5, 0x100, 0x200, 0.5, 0x300)
