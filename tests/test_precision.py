"""The precision axis without a GPU: input rounding, operand formats, baselines, the tolerance
on tensor-core-like arithmetic, registry fields (b_layout, arch, smem, tma) and TMA plans."""
import numpy as np
import pytest

from gemm.core import precision as P
from gemm.core import registry
from gemm.core.problem import Problem, problem_for
from gemm.core.registry import arch_support
from gemm.core.tolerance import check_host

from .test_registry import kernel_entry
from .test_registry import load_text as _load

ml_dtypes = pytest.importorskip("ml_dtypes")


def test_round_tf32_is_round_to_nearest_ties_away():
    one = np.float32(1.0)
    ulp = 2.0**-10
    x = np.array([1 + 2**-11, 1 + 2**-12, 1 + 3 * 2**-12, -(1 + 2**-11), 3.0, np.inf,
                  -np.inf], dtype=np.float32)
    want = np.array([1 + ulp, 1, 1 + ulp, -(1 + ulp), 3.0, np.inf, -np.inf], dtype=np.float32)
    assert np.array_equal(P.round_tf32(x), want)
    assert np.isnan(P.round_tf32(np.array([np.nan], dtype=np.float32))[0])
    r = P.round_tf32(np.random.default_rng(3).random(10000, dtype=np.float32) * 2 - 1)
    assert not (r.view(np.uint32) & 0x1FFF).any()            # 10 mantissa bits left
    assert one == P.round_tf32(np.array([one]))[0]


@pytest.mark.parametrize("prec", ["tf32", "bf16"])
def test_input_rounding_is_within_the_input_unit_roundoff(prec):
    x = np.random.default_rng(4).random(20000, dtype=np.float32) * 2 - 1
    r = P.round_inputs(x, prec)
    err = np.abs(r.astype(np.float64) - x) / np.abs(x)
    u = P.INPUT_UNIT_ROUNDOFF[prec]
    assert err.max() <= u and err.max() > u / 2              # the bound is tight
    assert np.array_equal(P.round_inputs(r, prec), r)          # idempotent


def test_operand_formats_and_baselines():
    assert P.OperandFormat().in_bytes == 4 and P.OperandFormat("bf16").in_bytes == 2
    assert P.OperandFormat("bf16").host_dtype() == np.dtype(ml_dtypes.bfloat16)
    assert P.OperandFormat("tf32").host_dtype() == np.float32
    assert P.OperandFormat("tf32", "nk").baseline == "cublas_tf32_nk"
    assert P.OperandFormat("tf32", "nk").b_shape(3, 5) == (5, 3)
    assert [P.baseline_name(p) for p in P.PRECISIONS] == ["cublas_fp32", "cublas_tf32",
                                                          "cublas_bf16"]
    assert P.format_of_baseline("cublas_bf16_nk") == P.OperandFormat("bf16", "nk")
    with pytest.raises(ValueError):
        P.format_of_baseline("cublas_fp8")
    with pytest.raises(ValueError):
        P.OperandFormat("fp16")


def tc_emulation(a, b, block, drop_step=None, drop_term=None):
    """A tensor-core GEMM in numpy: exact products of the rounded inputs summed in blocks of
    `block` K terms, each block added to a float32 accumulator with truncation (round toward
    zero), optionally leaving out one K block or one K term."""
    K = a.shape[1]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for k0 in range(0, K, block):
        if drop_step is not None and k0 == drop_step * block:
            continue
        ks = [k for k in range(k0, min(K, k0 + block)) if k != drop_term]
        exact = acc.astype(np.float64) + a64[:, ks] @ b64[ks, :]
        r = exact.astype(np.float32)              # nearest; step back toward zero if it grew
        over = np.abs(r.astype(np.float64)) > np.abs(exact)
        r[over] = np.nextafter(r[over], np.float32(0))
        acc = r
    return acc


@pytest.mark.parametrize("prec,block", [("tf32", 8), ("bf16", 16)])
@pytest.mark.parametrize("K", [7, 64, 1000, 4096])
def test_tensor_core_accumulation_passes_and_dropping_a_step_or_a_term_fails(prec, block, K):
    rng = np.random.default_rng(K)
    a = rng.random((24, K), dtype=np.float32) * 2 - 1
    b = rng.random((K, 24), dtype=np.float32) * 2 - 1
    ar, br = P.round_inputs(a, prec), P.round_inputs(b, prec)
    v = check_host(tc_emulation(ar, br, block), a, b, None, 1.0, 0.0, prec)
    assert v.ok and v.max_err_over_tol < 0.5, v
    step = min(K // block, 3)
    assert not check_host(tc_emulation(ar, br, block, drop_step=step), a, b, None, 1.0, 0.0,
                          prec).ok
    dropped = check_host(tc_emulation(ar, br, block, drop_term=K // 2), a, b, None, 1.0, 0.0,
                         prec)
    assert not dropped.ok and dropped.bad > 24 * 24 // 2


def test_host_operands_are_validated_per_format():
    a = np.ones((4, 3), dtype=ml_dtypes.bfloat16)
    b = np.ones((5, 3), dtype=ml_dtypes.bfloat16)         # N x K
    prob = problem_for(a, b, None, 1.0, 0.0, ml_dtypes.bfloat16, "nk")
    assert (prob.M, prob.N, prob.K) == (4, 5, 3)
    with pytest.raises(TypeError, match="bfloat16"):
        problem_for(a.astype(np.float32), b, None, 1.0, 0.0, ml_dtypes.bfloat16, "nk")
    with pytest.raises(ValueError, match="inner dimensions"):
        problem_for(a, b, None, 1.0, 0.0, ml_dtypes.bfloat16, "kn")


def test_arch_support():
    assert arch_support("native", "sm_80") is None
    assert arch_support("sm_90a", "sm_90") is None
    assert "sm_90a" in arch_support("sm_90a", "sm_100")
    assert "sm_90a" in arch_support("sm_90a", "sm_89")
    assert arch_support("sm_80", "sm_90") is None and arch_support("sm_90", "sm_80")


BASE = kernel_entry("defines = { BM = 128, BK = 32 }", "block = [384]", 'tile = ["BM", 128]',
                    main="sgemm_k")


def test_registry_precision_fields(tmp_path):
    tf = BASE + 'precision = "tf32"\nbaseline = "cublas_tf32_nk"\nb_layout = "nk"\n'
    spec = _load(tmp_path, tf + 'arch = "sm_90a"\nalign = 4\nsmem = "BM * BK * 4 * 2"\n'
                 'tma = [{ operand = "A", box = ["BM", "BK"], swizzle = "128B" },\n'
                 '       { operand = "B", box = [128, "BK"], swizzle = "128B" }]\n')["x"]
    assert spec.smem == 32768 and spec.operands == P.OperandFormat("tf32", "nk")
    assert spec.tma_boxes() == [("A", 128, 32, "128B"), ("B", 128, 32, "128B")]
    with pytest.raises(ValueError, match="compared with 'cublas_tf32_nk'"):
        _load(tmp_path, tf.replace('baseline = "cublas_tf32_nk"', 'baseline = "cublas_tf32"'))
    with pytest.raises(ValueError, match="compared with 'cublas_bf16'"):
        _load(tmp_path, BASE + 'precision = "bf16"\nbaseline = "cublas_fp32"\n')
    with pytest.raises(ValueError, match="arch"):
        _load(tmp_path, tf + 'arch = "hopper"\n')
    with pytest.raises(ValueError, match="tma"):
        _load(tmp_path, tf + 'tma = [{ operand = "C", box = [1, 1] }]\n')
    with pytest.raises(ValueError, match="tma"):
        _load(tmp_path, tf + 'tma = [{ operand = "A", box = [1, 1], swizzle = "16B" }]\n')


def test_tma_plans_check_alignment_before_launch(tmp_path):
    from gemm.core.geometry import plan
    from gemm.core.tensormaps import plans
    body = BASE + ('precision = "bf16"\nbaseline = "cublas_bf16_nk"\nb_layout = "nk"\n'
                   'align = 8\ntma = [{ operand = "A", box = ["BM", 64], swizzle = "128B" },\n'
                   '       { operand = "B", box = [128, 64], swizzle = "128B" }]\n')
    spec = _load(tmp_path, body)["x"]
    pa, pb = plans(spec, Problem(100, 24, 40))
    assert pa.dims == (40, 100) and pa.row_stride == 80 and pa.box == (64, 128)
    assert pb.dims == (40, 24) and pb.dtype == "bfloat16"
    with pytest.raises(ValueError, match="multiple of 8"):
        plans(spec, Problem(100, 24, 41))
    with pytest.raises(ValueError, match="no fallback"):
        plan(spec, Problem(100, 23, 40))


def test_a_c_map_is_the_last_after_a_and_b(tmp_path):
    """Registry `tma` operand "C" (TMA stores, 16): listed last, once, after A's and B's maps;
    planned as M x N float32 for every shape (never refused: the kernel has direct stores)."""
    from gemm.core.tensormaps import addressable, plans
    body = BASE + ('precision = "bf16"\nbaseline = "cublas_bf16_nk"\nb_layout = "nk"\n'
                   'arch = "sm_90a"\n')
    a = '{ operand = "A", box = ["BM", 64], swizzle = "128B" }'
    b = '{ operand = "B", box = [128, 64], swizzle = "128B" }'
    c = '{ operand = "C", box = [64, 32], swizzle = "128B" }'
    spec = _load(tmp_path, body + f"tma = [{a}, {b}, {c}]\n")["x"]
    assert spec.tma_boxes()[2] == ("C", 64, 32, "128B")
    for bad in (f"[{a}, {c}, {b}]", f"[{c}, {a}, {b}]", f"[{a}, {c}]", f"[{a}, {b}, {c}, {c}]"):
        with pytest.raises(ValueError, match="tma"):
            _load(tmp_path, body + f"tma = {bad}\n")
    for prob in (Problem(100, 24, 40), Problem(100, 23, 40), Problem(1, 1, 8)):
        pc = plans(spec, prob)[2]
        assert (pc.operand, pc.dtype, pc.dims, pc.row_stride, pc.box) == \
            ("C", "float32", (prob.N, prob.M), 4 * prob.N, (32, 64))
        assert addressable(pc, 0x1000) == (prob.N % 4 == 0)
        assert not addressable(pc, 0x1008)


def test_the_maps_of_13_to_15_are_as_before():
    """Only A and B, in that order, with the boxes, dtypes and strides they always had."""
    from gemm.core.tensormaps import MapPlan, plans
    prob = Problem(1000, 832, 504)
    assert plans(registry.get("13"), prob) == [
        MapPlan("A", "float32", (504, 1000), 2016, (32, 128), "128B"),
        MapPlan("B", "float32", (504, 832), 2016, (32, 256), "128B")]
    for name, bn in (("14", 256), ("15", 128)):
        assert plans(registry.get(name), prob) == [
            MapPlan("A", "bfloat16", (504, 1000), 1008, (64, 128), "128B"),
            MapPlan("B", "bfloat16", (504, 832), 1008, (64, bn), "128B")]


def test_registered_kernels_match_their_precision():
    for s in registry.registry().values():
        assert s.baseline == P.baseline_name(s.precision, s.b_layout)


def test_persistent_field(tmp_path):
    tf = BASE + 'precision = "tf32"\nbaseline = "cublas_tf32"\n'
    assert _load(tmp_path, tf + "persistent = true\n")["x"].persistent
    assert not _load(tmp_path, tf)["x"].persistent
    with pytest.raises(ValueError, match="persistent"):
        _load(tmp_path, tf + 'persistent = true\nedge = "sgemm_e"\n')


@pytest.mark.parametrize("name", [s.name for s in registry.registry().values() if s.tma])
def test_registered_tma_kernels_refuse_exactly_the_unaddressable_shapes(name):
    """Over the correctness gate's shapes, plans() raises for a shape iff a row stride of A or B
    (as stored) is not a multiple of 16 bytes, and every shape it takes has a launch plan; a
    kernel that stages K padded (pad_k) refuses none of them (gemm.core.geometry.unsupported)."""
    from gemm.core import shapes
    from gemm.core.geometry import plan, unsupported
    from gemm.core.tensormaps import plans
    spec = registry.get(name)
    elt = spec.operands.in_bytes
    taken = 0
    for prob in shapes.problems(shapes.CHECK_SHAPES):
        b_row = prob.K if spec.b_layout == "nk" else prob.N
        if (prob.K * elt) % 16 or (b_row * elt) % 16:
            with pytest.raises(ValueError, match="TMA needs"):
                plans(spec, prob)
        else:
            assert len(plans(spec, prob)) == len(spec.tma) and plan(spec, prob)
            taken += 1
        if spec.pad_k:
            assert unsupported(spec, prob) is None, prob.label
    assert taken >= 7


def test_tensor_map_arguments_pass_the_bindings_type_checks():
    """cuda-bindings' cuTensorMapEncodeTiled takes cuuint64_t / cuuint32_t lists, not plain ints
    (a TypeError before the driver is reached). Without a driver it gets as far as loading it;
    with one it returns the 128 bytes of the map."""
    pytest.importorskip("cuda.bindings.driver")
    from gemm.core.tensormaps import MapPlan
    from gemm.cuda.tma import encode
    plan_ = MapPlan("A", "float32", (64, 300), 256, (32, 128), "128B")
    try:
        out = encode(plan_, 0x7F0000001000)
    except TypeError as exc:
        pytest.fail(f"the bindings refused the arguments: {exc}")
    except Exception as exc:   # no driver library here: the call got past the conversions
        assert "cuda" in str(exc).lower() or "driver" in str(exc).lower(), exc
        return
    assert isinstance(out, bytes) and len(out) == 128
