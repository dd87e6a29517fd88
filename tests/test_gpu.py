"""The correctness gate on the GPU: every kernel and cuBLAS baseline on every shape and
(alpha, beta), through the one correctness path the sweep uses (gemm.measure.check).

Fresh random operands on the device every session (the seed is in the failure message); the
output is NaN-poisoned before each launch when beta == 0, so an unwritten element fails; every
element is checked against the float64 reference (cuBLAS DGEMM) with the K- and
precision-derived tolerance of gemm.core.tolerance. Skipped, with the reason, where there is
no GPU; on a GPU runner GEMM_REQUIRE_GPU=1 turns that skip into a failure.
"""
import numpy as np
import pytest

from gemm import api
from gemm.core import registry, shapes
from gemm.core.problem import Problem
from gemm.core.tolerance import check_host, reference_host

SHAPES = shapes.problems(shapes.CHECK_SHAPES)
TARGETS = registry.names() + list(registry.BASELINES)   # every cuBLAS configuration


@pytest.fixture(scope="session")
def checker(gpu):
    from gemm.measure.check import Checker
    chk = Checker()
    yield chk
    chk.close()


_cases: dict = {}


def case(checker, prob: Problem, fmt=None):
    """Operands (stored as `fmt` says) and their float64 reference, shared by the targets
    within a session."""
    from gemm.core.precision import OperandFormat
    fmt = fmt or OperandFormat()
    key = (prob.M, prob.N, prob.K, prob.alpha, prob.beta, fmt)
    if key not in _cases:
        for ops, ref in _cases.values():
            ops.free()
            [buf.free() for buf in ref]
        _cases.clear()
        ops = checker.operands(prob, fmt=fmt)   # a fresh seed: new entropy every session
        _cases[key] = (ops, checker.reference(ops, prob))
    return _cases[key]


def precision(target: str) -> str:
    from gemm.cuda.targets import BASELINE_PRECISION
    return BASELINE_PRECISION.get(target) or registry.get(target).precision


def tma_refuses(spec, p: Problem) -> bool:
    """TMA's rule, from the shape alone: every operand's row stride (A: K elements; B: K when
    stored N x K, else N) must be a multiple of 16 bytes, unless the kernel stages K padded
    (registry pad_k: 13 and 14 then run every checked shape, on padded copies)."""
    elt = spec.operands.in_bytes
    if spec.pad_k and spec.b_layout == "nk":
        return False
    return any(n * elt % 16 for n in (p.K, p.K if spec.b_layout == "nk" else p.N))


@pytest.mark.parametrize("alpha,beta", shapes.CHECK_AB, ids=lambda v: str(v))
@pytest.mark.parametrize("prob", SHAPES, ids=lambda p: p.label)
@pytest.mark.parametrize("target", TARGETS)
def test_target_is_correct(checker, target, prob, alpha, beta):
    from gemm.cuda.loader import Unsupported
    from gemm.cuda.targets import open_target, operand_format
    p = Problem(prob.M, prob.N, prob.K, alpha, beta)
    try:
        t = open_target(target)
    except Unsupported as exc:
        pytest.skip(str(exc))
    spec = registry.registry().get(target)
    if spec is not None and spec.tma and tma_refuses(spec, p):
        try:                       # TMA cannot address these rows: refused before any launch
            with pytest.raises(ValueError, match="TMA needs"):
                t.launcher(p)
        finally:
            t.close()
        return
    ops, ref = case(checker, p, operand_format(target))
    try:
        v = checker.check(t.launcher(p), ops, p, precision(target), ref)
    finally:
        t.close()
    assert v.ok, f"{target} {p.label} alpha={alpha} beta={beta} seed={ops.seed}: {v}"


def _host(checker, bufs, shapes_):
    out = [np.empty(s, dtype=np.float32) for s in shapes_]
    checker.support.sync()
    for h, d in zip(out, bufs):
        checker.drv.memcpy_dtoh(h, d)
    return out


def test_device_reference_matches_numpy(checker):
    prob = Problem(300, 200, 700, 1.5, 0.5)
    ops = checker.operands(prob)
    a, b, c = _host(checker, (ops.a, ops.b, ops.c), ((300, 700), (700, 200), (300, 200)))
    assert all(x.min() >= -1 and x.max() < 1 and abs(x.mean()) < 0.1 for x in (a, b, c))
    ref, mag = checker.reference(ops, prob)
    r2, m2 = (np.empty((300, 200)) for _ in range(2))
    checker.drv.memcpy_dtoh(r2, ref)
    checker.drv.memcpy_dtoh(m2, mag)
    r1, m1 = reference_host(a, b, c, 1.5, 0.5)
    assert np.allclose(r1, r2, rtol=1e-12, atol=1e-12) and np.allclose(m1, m2, rtol=1e-12)
    for buf in (ref, mag):
        buf.free()
    ops.free()


def test_unwritten_output_is_caught(checker):
    """A launch of the main entry alone over the full tiles (none of the partial ones) leaves
    NaN in C, and the check fails."""
    from gemm.cuda.loader import load
    spec = registry.get("05")
    prob = Problem(100, 100, 64)
    ops = checker.operands(prob)
    k = load(spec)
    entry, grid = spec.main, (1, 1, 1)      # the one full 64 x 64 tile

    def main_only(a, b, out, stream=None):
        k.functions[entry](np.int32(100), np.int32(100), np.int32(64), np.float32(1), a, b,
                           np.float32(0), out, block=spec.block, grid=grid[:2])

    v = checker.check(main_only, ops, prob, "fp32")
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
    # the context still works: a real GEMM right after is correct, kernel and cuBLAS
    rng = np.random.default_rng()
    a, b = (rng.random(s, dtype=np.float32) * 2 - 1 for s in ((130, 33), (33, 70)))
    for target in ("05", "cublas_fp32"):
        assert check_host(api.gemm(target, a, b), a, b, None, 1.0, 0.0, "fp32").ok


def test_the_device_check_agrees_with_the_host_rule(checker):
    """gemm.measure.check on the GPU and gemm.core.tolerance.check_host on the same data give
    the same verdict statistics, for a right answer, a wrong and an unwritten element, and an
    all-zero problem."""
    from gemm.cuda.launch import launcher
    prob = Problem(200, 136, 77, 1.5, 0.5)
    ops = checker.operands(prob)
    host = _host(checker, (ops.a, ops.b, ops.c), ((200, 77), (77, 136), (200, 136)))
    ref, mag = checker.reference(ops, prob)
    on_gpu = checker.check(launcher(registry.get("05"), prob), ops, prob, "fp32", (ref, mag))
    got, = _host(checker, (ops.out,), ((200, 136),))
    on_cpu = check_host(got, *host, 1.5, 0.5, "fp32")
    assert on_gpu.ok and on_cpu.ok
    assert on_gpu.max_err_over_tol == pytest.approx(on_cpu.max_err_over_tol, rel=1e-6, abs=1e-9)
    assert on_gpu.rel_fro_error == pytest.approx(on_cpu.rel_fro_error, rel=1e-6, abs=1e-12)
    got[17, 33] += 1e-2   # a wrong element and an unwritten one
    got[150, 5] = np.nan
    checker.drv.memcpy_htod(ops.out, got)
    on_gpu = checker.compare(ops.out, ref, mag, prob, "fp32")
    on_cpu = check_host(got, *host, 1.5, 0.5, "fp32")
    assert not on_gpu.ok and on_gpu.bad == on_cpu.bad == 2 and on_gpu.nan == on_cpu.nan == 1
    assert on_gpu.first_bad == on_cpu.first_bad == (17, 33)
    for buf in (ref, mag):
        buf.free()
    zero = np.zeros((200, 136), dtype=np.float32)
    checker.drv.memset_d32(ops.out, 0, 200 * 136)
    z64 = checker.drv.to_device(np.zeros((200, 136)))
    on_gpu = checker.compare(ops.out, z64, z64, prob, "fp32")
    assert on_gpu.ok and on_gpu.rel_fro_error == 0.0 and on_gpu.max_err_over_tol == 0.0
    assert check_host(zero, np.zeros((200, 77), np.float32), np.zeros((77, 136), np.float32),
                      None, 1.0, 0.0, "fp32").ok
    z64.free()
    ops.free()


@pytest.mark.parametrize("prec", ["tf32", "bf16"])
def test_device_operands_are_what_the_precision_stores(checker, prec):
    """TF32 operands are TF32 numbers; bf16 ones bfloat16 bits; the device reference of both
    agrees with numpy's on the same inputs (B stored N x K as well)."""
    import ml_dtypes
    from gemm.core.precision import OperandFormat, round_inputs
    for lay in ("kn", "nk"):
        fmt = OperandFormat(prec, lay)
        prob = Problem(120, 72, 90, 1.5, 0.5)
        ops = checker.operands(prob, fmt=fmt)
        dt = np.float32 if prec == "tf32" else np.uint16
        a, b = (np.empty(s, dtype=dt) for s in ((120, 90), fmt.b_shape(90, 72)))
        checker.support.sync()
        checker.drv.memcpy_dtoh(a, ops.a)
        checker.drv.memcpy_dtoh(b, ops.b)
        c, = _host(checker, (ops.c,), ((120, 72),))
        if prec == "bf16":
            a, b = (x.view(ml_dtypes.bfloat16).astype(np.float32) for x in (a, b))
        assert np.array_equal(round_inputs(a, prec), a) and abs(a.mean()) < 0.1
        bk = b if lay == "kn" else np.ascontiguousarray(b.T)
        ref, mag = checker.reference(ops, prob)
        r2 = np.empty((120, 72))
        checker.drv.memcpy_dtoh(r2, ref)
        r1, _ = reference_host(a, bk, c, 1.5, 0.5, prec)
        assert np.allclose(r1, r2, rtol=1e-12, atol=1e-12)
        for buf in (ref, mag):
            buf.free()
        ops.free()


def test_bf16_host_arrays_through_the_api(gpu):
    """ml_dtypes' bfloat16 host arrays go to the device as uint16 bits; cuBLAS BF16 and the
    float32 check from the bfloat16 inputs agree; float32 arrays are refused for bf16."""
    import ml_dtypes
    rng = np.random.default_rng()
    a = (rng.random((130, 72), dtype=np.float32) * 2 - 1).astype(ml_dtypes.bfloat16)
    b = (rng.random((72, 66), dtype=np.float32) * 2 - 1).astype(ml_dtypes.bfloat16)
    out = api.gemm("cublas_bf16", a, b)
    assert out.dtype == np.float32
    assert check_host(out, a.astype(np.float32), b.astype(np.float32), None, 1.0, 0.0, "bf16").ok
    with pytest.raises(TypeError, match="bfloat16"):
        api.gemm("cublas_bf16", a.astype(np.float32), b)


@pytest.mark.parametrize("target", ["cublas_tf32", "12", "13"])
def test_tf32_host_arrays_through_the_api_are_rounded_first(gpu, target):
    """Unrounded float32 host arrays for a TF32 target: the api rounds them to TF32 (as the
    harness's operands are), so a kernel whose tensor cores truncate, cuBLAS TF32 and the
    reference from the rounded inputs agree, at a short K where truncation would show."""
    from gemm.cuda.loader import Unsupported
    rng = np.random.default_rng()
    a = rng.random((130, 64), dtype=np.float32) * 2 - 1
    spec = registry.get(target) if target[0].isdigit() else None
    b = rng.random((66, 64) if spec is not None and spec.b_layout == "nk" else (64, 66),
                   dtype=np.float32) * 2 - 1
    try:
        out = api.gemm(target, a, b)
    except Unsupported as exc:
        pytest.skip(str(exc))
    bb = b.T if spec is not None and spec.b_layout == "nk" else b
    assert check_host(out, a, bb, None, 1.0, 0.0, "tf32").ok


def test_graph_replay_runs_the_same_launches(checker):
    """The timer's captured batches (gemm.cuda.graphs) run exactly the launches they captured."""
    from gemm.cuda.graphs import CapturedBatch
    from gemm.cuda.launch import launcher
    drv = checker.drv
    stream = drv.Stream()
    rng = np.random.default_rng()
    a, b = (rng.random(s, dtype=np.float32) for s in ((96, 40), (40, 80)))
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
    assert check_host(out, a, b, None, 10.0, 0.0, "fp32").ok   # 10 launches
    for buf in (da, db, dc):
        buf.free()


@pytest.mark.parametrize("prec", ["tf32", "bf16"])
def test_padded_staging_copies_and_zero_fills(checker, prec):
    """gemm.cuda.staging's copies (support.cu's sgemm_stage_pad_k_*) are A and B bit for bit
    with K padded by zeros, for a one-row operand, a K of 1 and ragged ones."""
    from gemm.core.staging import staging
    from gemm.cuda.staging import PaddedOperands
    drv = checker.drv
    spec = registry.get("13" if prec == "tf32" else "14")
    dt = np.uint32 if prec == "tf32" else np.uint16
    rng = np.random.default_rng()
    for M, N, K in ((1, 5, 1), (136, 263, 107), (3, 1, 3003), (65, 129, 7)):
        st = staging(spec, Problem(M, N, K))
        assert st is not None
        a, b = (rng.integers(1, 2**16, size=(r, K), dtype=np.uint32).astype(dt) for r in (M, N))
        da, db = drv.to_device(a), drv.to_device(b)
        staged = PaddedOperands(st)
        for buf, c in zip(staged.bufs.values(), st.copies):   # poison: the pad must be written
            drv.memset_d8(buf, 0xFF, c.nbytes)
        pa, pb = staged.stage(da, db)
        drv.Context.synchronize()
        for host, ptr, rows in ((a, pa, M), (b, pb, N)):
            got = np.empty((rows, st.k), dtype=dt)
            drv.memcpy_dtoh(got, ptr)
            assert np.array_equal(got[:, :K], host) and not got[:, K:].any(), (M, N, K)
        staged.free()
        da.free()
        db.free()


@pytest.mark.parametrize("name", ["13", "14"])
def test_a_staged_launch_replays_from_a_graph(checker, name):
    """The timer's captured batch of a staged launch (copy kernel, then the GEMM, per launch)
    captures, replays and gives the right C; the timer then reports graph = True."""
    from gemm.core.precision import OperandFormat
    from gemm.cuda.graphs import CapturedBatch
    from gemm.cuda.launch import launcher
    from gemm.cuda.loader import Unsupported, check_runnable
    spec = registry.get(name)
    try:
        check_runnable(spec)
    except Unsupported as exc:
        pytest.skip(str(exc))
    prob = Problem(136, 263, 107, 1.0, 0.0)
    stream = checker.drv.Stream()
    ops = checker.operands(prob, fmt=OperandFormat(spec.precision, spec.b_layout))
    ref = checker.reference(ops, prob)
    launch = launcher(spec, prob)
    assert launch.staged is not None
    checker.drv.memset_d32(ops.out, 0x7FC00000, prob.M * prob.N)
    g = CapturedBatch(lambda: launch(ops.a, ops.b, ops.out, stream), 3, stream)
    g.replay()
    stream.synchronize()
    g.close()
    v = checker.compare(ops.out, *ref, prob, spec.precision)
    for buf in ref:
        buf.free()
    ops.free()
    assert v.ok, f"{name} {prob.label} seed={ops.seed}: {v}"


ECHO = r'''
#include "hopper.cuh"
extern "C" __global__ void echo(const __grid_constant__ TmaMap ma, const __grid_constant__ TmaMap mb,
                                int M, int N, int K, float alpha, const float* A, const float* B,
                                float beta, float* C) {
    unsigned long long* o = reinterpret_cast<unsigned long long*>(C);
    for (int i = 0; i < 16; ++i) { o[i] = ma.opaque[i]; o[16 + i] = mb.opaque[i]; }
    o[32] = M; o[33] = N; o[34] = K; o[35] = __float_as_uint(alpha);
    o[36] = reinterpret_cast<unsigned long long>(A); o[37] = reinterpret_cast<unsigned long long>(B);
    o[38] = __float_as_uint(beta); o[39] = reinterpret_cast<unsigned long long>(C);
}'''


def test_tma_parameters_reach_the_kernel(checker):
    """The packed parameters of a TMA kernel (padding, two maps, the scalars) arrive where the
    kernel reads them: a kernel with the same parameter list echoes what it received."""
    from pycuda.compiler import SourceModule
    from gemm.core.registry import kernels_dir
    from gemm.core.tensormaps import plans
    from gemm.cuda import device
    from gemm.cuda.launch import param_format, param_head
    from gemm.cuda.tma import TensorMaps
    if device.info().arch != "sm_90":
        pytest.skip(f"TMA kernels are built for sm_90a; this device is {device.info().arch}")
    spec = registry.get("13")
    drv = checker.drv
    f = SourceModule(ECHO, arch="sm_90a", no_extern_c=True,
                     include_dirs=[str(kernels_dir())]).get_function("echo")
    f.prepare(param_format(spec, "sm_90a"))
    out = drv.mem_alloc(8 * 40)
    a, b = 0x7F0000001000, 0x7F0000002000
    maps = TensorMaps(plans(spec, Problem(300, 200, 64))).encode(a, b)
    f.prepared_call((1, 1), (1, 1, 1), *param_head(spec, "sm_90a", maps), 300, 200, 64, 1.5, a,
                    b, -0.25, int(out))
    got = np.empty(40, dtype=np.uint64)
    drv.memcpy_dtoh(got, out)
    out.free()
    assert got[:32].tobytes() == maps[0] + maps[1]
    f32 = lambda x: int(np.float32(x).view(np.uint32))
    assert [int(x) for x in got[32:40]] == [300, 200, 64, f32(1.5), a, b, f32(-0.25), int(out)]


def test_timing_spreads_over_operand_sets(gpu):
    """A policy of several operand sets (CONFIRM's way) times each set in turn and pools the
    samples, kernel and baseline paired within each set (gemm.measure.worker.time_problem)."""
    from dataclasses import replace

    from gemm.core.policy import SUITE
    from gemm.measure.worker import Job, Worker, time_problem
    pol = replace(SUITE, allocations=3, min_samples=3, min_time_s=0.001, max_samples=6,
                  warmup_s=0.001)
    worker = Worker({"policy": pol.as_dict()})
    job = Job(worker, "05")
    prob = Problem(512, 512, 512)
    rec = job.record(prob)
    ops = job.checker.operands(prob)
    try:
        time_problem(job, prob, ops, rec)
    finally:
        ops.free()
        worker.close()
    k, b = rec["kernel_time"], rec["baseline_time"]
    assert rec["status"] == "ok", rec.get("error")
    assert len(k["per_set"]) == len(b["per_set"]) == 3
    assert all(s["samples"] >= 3 for s in k["per_set"])
    assert len(k["samples_s"]) == len(b["samples_s"]) == sum(s["samples"] for s in k["per_set"])
