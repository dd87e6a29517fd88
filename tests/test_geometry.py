"""Launch geometry: every element of C belongs to exactly one block, for any shape."""
from dataclasses import replace

import numpy as np
import pytest

from gemm.core import registry
from gemm.core.geometry import plan, tile_cover
from gemm.core.problem import Problem

SHAPES = [(1, 1, 1), (64, 64, 64), (65, 129, 7), (127, 1, 300), (1, 4097, 3), (4095, 63, 129),
          (1000, 832, 504), (63, 64, 8), (64, 63, 8), (128, 200, 1)]


@pytest.mark.parametrize("name", registry.names())
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_tiles_partition_c(name, shape):
    spec = registry.get(name)
    prob = Problem(*shape)
    tm, tn = spec.tile
    cover = np.zeros((prob.M, prob.N), dtype=np.int32)
    for r0, c0 in tile_cover(spec, prob):
        assert 0 <= r0 < prob.M and 0 <= c0 < prob.N
        cover[r0:r0 + tm, c0:c0 + tn] += 1
    assert cover.min() == 1 and cover.max() == 1


def test_split_kernels_launch_once():
    """Tiles that divide M and N: the main entry over the full tiles; any partial tile: the
    edge entry alone over the ceil grid (its blocks branch to the main path on full tiles)."""
    spec = registry.get("05")
    main, edge = spec.main, spec.edge
    assert plan(spec, Problem(1000, 1000, 1000)) == [(edge, (16, 16, 1))]
    assert plan(spec, Problem(4096, 4096, 4096)) == [(main, (64, 64, 1))]
    assert plan(spec, Problem(4096, 4096, 7)) == [(main, (64, 64, 1))]    # K is free
    assert plan(spec, Problem(10, 10, 10)) == [(edge, (1, 1, 1))]
    assert plan(spec, Problem(128, 130, 8)) == [(edge, (3, 2, 1))]        # a right strip
    assert plan(spec, Problem(130, 128, 8)) == [(edge, (2, 3, 1))]        # a bottom strip


def test_the_1000_launch_of_10_is_one_wave_of_128_blocks():
    """The small bucket's 64 x 128 tiles at 1000: 16 x 8 blocks in one launch (was 105 main
    blocks, then 23 edge blocks in a second launch), the same grid as 1024's."""
    spec = registry.get("10").with_defines(BM=64, BN=128, WM=32, WN=64)
    assert plan(spec, Problem(1000, 1000, 1000)) == [(spec.edge, (8, 16, 1))]
    assert plan(spec, Problem(1024, 1024, 1024)) == [(spec.main, (8, 16, 1))]


def test_vector_kernels_take_their_fallback_on_unaligned_shapes():
    spec = replace(registry.get("05"), align=4, fallback="sgemm_any")
    assert [e for e, _ in plan(spec, Problem(128, 128, 128))] == [spec.main]
    for shape in ((128, 130, 128), (128, 128, 130), (1, 1, 1), (65, 129, 7)):
        (entry, grid), = plan(spec, Problem(*shape))
        assert entry == "sgemm_any" and grid == (-(-shape[1] // 64), -(-shape[0] // 64), 1)
    assert plan(spec, Problem(130, 132, 4)) == [(spec.edge, (3, 3, 1))]   # M is free


def test_grid_limit_is_a_clear_error():
    with pytest.raises(ValueError, match="grid limit"):
        plan(registry.get("01"), Problem(32 * 65536, 1, 1))


def test_persistent_grid():
    from gemm.core.geometry import persistent_grid
    assert persistent_grid((16, 32, 1), 132) == (132, 1, 1)
    assert persistent_grid((3, 2, 1), 132) == (6, 1, 1)
    assert persistent_grid((1, 1, 1), 132) == (1, 1, 1)


def test_a_shape_a_kernel_refuses_by_contract_is_unsupported_not_failed():
    from gemm.core.geometry import unsupported
    from gemm.core.registry import get
    from gemm.core import metrics
    from gemm.record.suite import samples, skip_unmeasured
    from dataclasses import replace
    odd = Problem.parse("3001x2999x3003")
    no_pad = replace(get("13"), pad_k=False)                     # 13 as it was before pad_k
    assert "TMA needs" in unsupported(no_pad, odd)               # K % 4 != 0: TMA's rule
    assert unsupported(get("13"), odd) is None                   # 13 stages K padded
    assert unsupported(no_pad, Problem.parse("4096")) is None
    assert unsupported(get("09"), odd) is None                   # 09 has a fallback entry
    rec = {"kernel": "13_tf32_wgmma_tma", "size": odd.label, "status": "unsupported",
           "error": unsupported(no_pad, odd)}
    import pytest
    with pytest.raises(NotImplementedError):   # in the classes' setup: asv records a skip
        skip_unmeasured({"records": [rec]}, odd.label)   # (tests/test_suite.py: through asv)
    rec["status"] = "error"
    skip_unmeasured({"records": [rec]}, odd.label)         # not a skip: the track_ call fails
    with pytest.raises(RuntimeError):
        samples({"records": [rec]}, metrics.TFLOPS, odd.label)


def test_only_a_contract_refusal_is_unsupported_a_bug_is_not(monkeypatch):
    """A ValueError from a bug in the planning code must not pass for a refusal (a skip that
    would hide the failure from the gate)."""
    import pytest
    import gemm.core.tensormaps
    from gemm.core.geometry import unsupported
    from gemm.core.registry import get

    def broken(spec, prob):
        raise ValueError("a bug")
    monkeypatch.setattr(gemm.core.tensormaps, "plans", broken)
    with pytest.raises(ValueError, match="a bug"):
        unsupported(get("13"), Problem.parse("4096"))


def _block_origin(bx, by, gx, gy, group, tm, tn):
    """The Python twin of kernels/common.cuh's block_origin (GROUP > 0: grouped rows)."""
    if group <= 0:
        return by * tm, bx * tn
    pid = by * gx + bx
    per_group = group * gx
    first_m = (pid // per_group) * group
    group_m = min(gy - first_m, group)
    in_group = pid % per_group
    return (first_m + in_group % group_m) * tm, (in_group // group_m) * tn


@pytest.mark.parametrize("group", [0, 1, 3, 8])
@pytest.mark.parametrize("shape", [(1000, 1000), (3001, 2999), (128, 130), (640, 2304), (10, 10)])
def test_the_edge_entry_over_the_ceil_grid_covers_each_tile_once_with_grouped_rows(group, shape):
    """A split kernel's one launch over partial tiles (09 and 10 take GROUP): every tile of the
    ceil grid gets exactly one block, and the blocks the edge entry sends down the main path
    (full_tile) are exactly the full tiles; tile_cover lists the grid itself, not this map."""
    M, N = shape
    tm, tn = 128, 256
    gx, gy = -(-N // tn), -(-M // tm)
    seen = [_block_origin(bx, by, gx, gy, group, tm, tn) for by in range(gy) for bx in range(gx)]
    assert sorted(seen) == sorted((r * tm, c * tn) for r in range(gy) for c in range(gx))
    full = [(r, c) for r, c in seen if r + tm <= M and c + tn <= N]
    assert len(full) == (M // tm) * (N // tn)
