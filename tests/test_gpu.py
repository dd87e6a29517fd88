"""The correctness gate on the GPU: every kernel and cuBLAS on every shape and (alpha, beta).

Fresh random inputs every session; C is poisoned with NaN before each launch when beta == 0
(so an unwritten element fails); every element is checked against the float64 reference
with the K- and precision-derived tolerance of gemm.verify. Skipped, with the reason, where
there is no GPU.
"""
import numpy as np
import pytest

from gemm import api, registry, verify
from gemm.cli import CHECK_AB, CHECK_SHAPES
from gemm.problem import Problem

SHAPES = [Problem.parse(s) for s in CHECK_SHAPES]
KERNELS = registry.names()
BASELINES = sorted({s.baseline for s in registry.registry().values()})

_cache: dict = {}


def case(prob, alpha, beta):
    """Fresh operands and their float64 reference, shared by the kernels within a session."""
    key = (prob.M, prob.N, prob.K, alpha, beta)
    if key not in _cache:
        from gemm.data import random_operands
        a, b, c = random_operands(prob)  # seed None: new entropy every session
        ref, mag, where = verify.reference(a, b, c, alpha, beta)
        _cache.clear() if len(_cache) > 8 else None
        _cache[key] = (a, b, c, ref, mag, where)
    return _cache[key]


def ids(p):
    return p.label if isinstance(p, Problem) else None


@pytest.mark.parametrize("alpha,beta", CHECK_AB, ids=lambda v: str(v))
@pytest.mark.parametrize("prob", SHAPES, ids=ids)
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_is_correct(gpu, kernel, prob, alpha, beta):
    a, b, c, ref, mag, where = case(prob, alpha, beta)
    out = api.gemm(kernel, a, b, c.copy(), alpha, beta)
    v = verify.compare(out, ref, mag, prob.K, registry.get(kernel).precision, where)
    assert v.ok, f"{kernel} {prob.label} alpha={alpha} beta={beta}: {v}"


@pytest.mark.parametrize("alpha,beta", CHECK_AB, ids=lambda v: str(v))
@pytest.mark.parametrize("prob", SHAPES, ids=ids)
@pytest.mark.parametrize("mode", BASELINES)
def test_cublas_baseline_is_correct(gpu, mode, prob, alpha, beta):
    a, b, c, ref, mag, where = case(prob, alpha, beta)
    out = api.cublas_gemm(mode, a, b, c.copy(), alpha, beta)
    v = verify.compare(out, ref, mag, prob.K, "fp32" if mode == "cublas_fp32" else "tf32", where)
    assert v.ok, f"{mode} {prob.label}: {v}"


def test_gpu_reference_matches_numpy(gpu):
    from gemm.data import random_operands
    a, b, c = random_operands(Problem(300, 200, 700))
    r1, m1, _ = verify.reference(a, b, c, 1.5, 0.5, where="cpu")
    r2, m2, _ = verify.reference(a, b, c, 1.5, 0.5, where="gpu")
    assert np.allclose(r1, r2, rtol=1e-12, atol=1e-12) and np.allclose(m1, m2, rtol=1e-12)


def test_unwritten_output_is_caught(gpu):
    """A launch that skips the edge kernel leaves NaN in C, and the check fails."""
    from gemm.data import DeviceOperands, random_operands
    from gemm.device import cuda
    from gemm.launch import grids
    from gemm.loader import load
    spec = registry.get("05")
    prob = Problem(100, 100, 64)
    a, b, c = random_operands(prob)
    ops = DeviceOperands(a, b, c)
    ops.poison()
    k = load(spec)
    g = grids(spec, prob)
    k.main(np.int32(100), np.int32(100), np.int32(64), np.float32(1), ops.a, ops.b,
           np.float32(0), ops.c, block=spec.block, grid=g.main)
    cuda().Context.synchronize()
    v = verify.check(ops.get_c(), a, b, c, 1.0, 0.0, "fp32")
    ops.free()
    assert not v.ok and v.nan == 100 * 100 - 64 * 64


def test_bad_input_leaves_the_context_usable(gpu):
    f = np.ones((4, 4), dtype=np.float32)
    bad = [
        ((f, np.ones((5, 4), dtype=np.float32)), ValueError),
        ((f.astype(np.float64), f), TypeError),
        ((np.ones((8, 4), dtype=np.float32)[::2], f), ValueError),
        ((np.ones((4, 4), dtype=np.float32).T, f), ValueError),
    ]
    for args, exc in bad:
        with pytest.raises(exc):
            api.gemm("05", *args)
    with pytest.raises(ValueError):
        api.gemm("no_such_kernel", f, f)
    with pytest.raises(ValueError):
        api.gemm("05", np.ones((0, 4), dtype=np.float32), f)
    # the context still works: a real GEMM right after is correct
    from gemm.data import random_operands
    a, b, c = random_operands(Problem(130, 70, 33))
    out = api.gemm("05", a, b)
    assert verify.check(out, a, b, None, 1.0, 0.0, "fp32").ok


def test_gpu_checker_agrees_with_the_cpu_verifier(gpu):
    """The sweep's on-device check (gemm.gpucheck) gives the CPU verifier's verdicts."""
    from gemm.device import cuda
    from gemm.gpucheck import GpuChecker, fresh_seed
    from gemm.launch import launcher
    drv = cuda()
    chk = GpuChecker()
    prob = Problem(200, 136, 77, 1.5, 0.5)
    seed = fresh_seed()
    a, b, c = (chk.random_matrix(r, k, seed + i) for i, (r, k) in
               enumerate(((200, 77), (77, 136), (200, 136))))
    host = [np.empty(s, dtype=np.float32) for s in ((200, 77), (77, 136), (200, 136))]
    chk.sync()
    for h, d in zip(host, (a, b, c)):
        drv.memcpy_dtoh(h, d)
    assert all(h.min() >= -1 and h.max() < 1 and abs(h.mean()) < 0.1 for h in host)
    ref, mag = chk.reference(a, b, c, prob)
    out = drv.mem_alloc(200 * 136 * 4)
    drv.memcpy_dtod(out, c, 200 * 136 * 4)
    launcher(registry.get("05"), prob)(a, b, out)
    drv.Context.synchronize()
    got = np.empty((200, 136), dtype=np.float32)
    drv.memcpy_dtoh(got, out)
    on_gpu = chk.compare(out, ref, mag, prob, "fp32")
    on_cpu = verify.check(got, *host, 1.5, 0.5, "fp32", where="cpu")
    assert on_gpu.ok and on_cpu.ok
    assert on_gpu.max_err_over_tol == pytest.approx(on_cpu.max_err_over_tol, rel=1e-3, abs=1e-6)
    assert on_gpu.rel_fro_error == pytest.approx(on_cpu.rel_fro_error, rel=1e-3, abs=1e-12)
    got[17, 33] += 1e-2   # a wrong element and an unwritten one
    got[150, 5] = np.nan
    drv.memcpy_htod(out, got)
    on_gpu = chk.compare(out, ref, mag, prob, "fp32")
    on_cpu = verify.check(got, *host, 1.5, 0.5, "fp32", where="cpu")
    assert not on_gpu.ok and on_gpu.bad == on_cpu.bad == 2 and on_gpu.nan == 1
    assert on_gpu.first_bad == on_cpu.first_bad == (17, 33)
    for buf in (a, b, c, ref, mag, out):
        buf.free()
    chk.close()


def test_graph_replay_runs_the_same_launches(gpu):
    """The timer's captured batches (gemm.graphs) run exactly the launches they captured."""
    from gemm.device import cuda
    from gemm.graphs import CapturedBatch
    from gemm.launch import launcher
    drv = cuda()
    stream = drv.Stream()
    prob = Problem(96, 80, 40)
    a, b, c = (np.ascontiguousarray(x) for x in
               (np.random.rand(96, 40), np.random.rand(40, 80), np.zeros((96, 80))))
    a, b = a.astype(np.float32), b.astype(np.float32)
    da, db, dc = drv.to_device(a), drv.to_device(b), drv.mem_alloc(96 * 80 * 4)
    launch = launcher(registry.get("05"), Problem(96, 80, 40, 1.0, 1.0))  # C += A @ B
    drv.memset_d32(dc, 0, 96 * 80)
    g = CapturedBatch(lambda: launch(da, db, dc, stream), 5, stream)
    stream.synchronize()
    out = np.empty((96, 80), dtype=np.float32)
    drv.memcpy_dtoh(out, dc)
    assert not out.any()                        # capture alone runs nothing
    g.replay()
    g.replay()
    stream.synchronize()
    drv.memcpy_dtoh(out, dc)
    g.close()
    assert verify.check(out, a, b, None, 10.0, 0.0, "fp32", where="cpu").ok  # 10 launches
