"""On the GPU (skipped without one): 10_autotuned where it splits K (gemm.core.splitk) and where
one launch covers full and partial tiles (gemm.core.geometry), against the float64 reference,
and a split launch captured into a graph. The checker fixture and the cached operands are
tests/test_gpu.py's."""
import numpy as np
import pytest

from gemm.core import registry
from gemm.core.problem import Problem
from gemm.core.tolerance import check_host

from .test_gpu import case, checker  # noqa: F401  (checker: the session's fixture)


@pytest.mark.parametrize("size", ["512", "256x256x260", "500x500x1004", "1000", "136x264x108"])
def test_split_k_and_one_launch_edge_shapes(checker, size):
    """10 at shapes where it splits K (512; the sanitizer's 256x256x260 with the K remainder in
    the last split; 500x500x1004 with partial tiles as well) and where one launch runs full
    and partial tiles (1000, 136x264x108), against the float64 reference, beta != 0."""
    from gemm.core.splitk import split_k
    from gemm.core.tuning import resolve
    from gemm.cuda.device import info
    from gemm.cuda.launch import launcher
    base = Problem.parse(size)
    p = Problem(base.M, base.N, base.K, 1.5, 0.5)
    spec = registry.get("10")
    launch = launcher(spec, p)
    assert (launch.split is None) == (split_k(resolve(spec, p, info().slug), p, info().sms) is None)
    ops, ref = case(checker, p)
    v = checker.check(launch, ops, p, "fp32", ref)
    if launch.split is not None:
        launch.split.free()
    assert v.ok, f"10 {p.label} split={launch.split and launch.split.split} seed={ops.seed}: {v}"


def test_a_split_k_launch_replays_from_a_graph(checker):
    """Both kernels of a split-K launch (the GEMM into the workspace, the reduction into C) are
    captured and replayed: C += A @ B ten times."""
    from gemm.cuda.graphs import CapturedBatch
    from gemm.cuda.launch import launcher
    drv = checker.drv
    stream = drv.Stream()
    rng = np.random.default_rng()
    a, b = (rng.random(s, dtype=np.float32) for s in ((256, 512), (512, 256)))
    da, db, dc = drv.to_device(a), drv.to_device(b), drv.mem_alloc(256 * 256 * 4)
    launch = launcher(registry.get("10"), Problem(256, 256, 512, 1.0, 1.0))
    if launch.split is None:
        pytest.skip("10 does not split K at 256x256x512 on this GPU")
    drv.memset_d32(dc, 0, 256 * 256)
    g = CapturedBatch(lambda: launch(da, db, dc, stream), 5, stream)
    g.replay()
    g.replay()
    stream.synchronize()
    out = np.empty((256, 256), dtype=np.float32)
    drv.memcpy_dtoh(out, dc)
    g.close()
    launch.split.free()
    assert check_host(out, a, b, None, 10.0, 0.0, "fp32").ok   # 10 launches
    for buf in (da, db, dc):
        buf.free()
