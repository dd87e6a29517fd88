"""Padded staging (registry `pad_k`, gemm.core.staging): which operands 13 and 14 copy with K
padded, to what, what the kernel is then launched with, that an aligned K launches exactly as
before (no staging), what stays refused, that the copy kernel compiles, and the launcher's
order of work (copies, then the GEMM on them), all without a GPU."""
from dataclasses import replace
from types import SimpleNamespace

import pytest

from gemm.core import registry, shapes
from gemm.core.geometry import unsupported
from gemm.core.problem import Problem, ShapeRefused
from gemm.core.staging import PadCopy, kernel_problem, staging
from gemm.core.tensormaps import plans

from .test_registry import kernel_entry
from .test_registry import load_text as _load

K13, K14 = registry.get("13"), registry.get("14")

# (kernel, shape) -> Kp, or None (no staging): 13 pads K to a multiple of 4 (16-byte float32
# rows), 14 to a multiple of 8 (bfloat16)
PADDED = {
    ("13", "3001x2999x3003"): 3004, ("14", "3001x2999x3003"): 3008,
    ("13", "136x263x107"): 108, ("14", "136x263x107"): 112,
    ("13", "33x7x8"): None, ("14", "33x7x8"): None,
}


def test_registered_tma_kernels_stage_k():
    assert K13.pad_k and K14.pad_k
    assert not any(s.pad_k for s in registry.registry().values() if not s.tma)


@pytest.mark.parametrize("name,size", sorted(PADDED), ids=lambda v: str(v))
def test_padded_geometry(name, size):
    spec, prob = registry.get(name), Problem.parse(size)
    kp = PADDED[(name, size)]
    st = staging(spec, prob)
    assert unsupported(spec, prob) is None
    if kp is None:
        assert st is None and kernel_problem(spec, prob) is prob
        return
    elt = 4 if name == "13" else 2
    assert st.k == kp and st.k % (16 // elt) == 0 and 0 < kp - prob.K < 16 // elt
    # A (M x K) and B (N x K, b_layout "nk") both padded along K; C untouched
    assert st.copies == (PadCopy("A", prob.M, prob.K, kp, elt),
                         PadCopy("B", prob.N, prob.K, kp, elt))
    assert st.copies[0].nbytes == prob.M * kp * elt
    assert st.traffic == (prob.M + prob.N) * (prob.K + kp) * elt
    kprob = kernel_problem(spec, prob)
    assert (kprob.M, kprob.N, kprob.K, kprob.alpha, kprob.beta) == \
        (prob.M, prob.N, kp, prob.alpha, prob.beta)
    pa, pb = plans(spec, kprob)    # the maps cover the copies: rows of kp elements
    assert pa.dims == (kp, prob.M) and pb.dims == (kp, prob.N)
    assert pa.row_stride == pb.row_stride == kp * elt and kp * elt % 16 == 0
    with pytest.raises(ShapeRefused, match="TMA needs"):   # the operands as they are: refused
        plans(spec, prob)


def test_tracked_odd_shape_is_measured_now():
    odd = Problem.parse("3001x2999x3003")
    assert "3001x2999x3003" in shapes.TRACKED
    assert unsupported(K13, odd) is None and unsupported(K14, odd) is None


@pytest.mark.parametrize("name", ["13", "14"])
def test_an_aligned_k_launches_as_before(name):
    """Every tracked and checked shape whose K TMA can address: no staging, the kernel gets
    the very same problem and the same maps as without pad_k."""
    spec = registry.get(name)
    plain = replace(spec, pad_k=False)
    q = 16 // spec.operands.in_bytes
    seen = 0
    for prob in shapes.problems(shapes.TRACKED + shapes.CHECK_SHAPES):
        if prob.K % q:
            assert staging(spec, prob) is not None
            continue
        seen += 1
        assert staging(spec, prob) is None
        assert kernel_problem(spec, prob) is prob
        assert plans(spec, kernel_problem(spec, prob)) == plans(plain, prob)
        assert unsupported(spec, prob) is None
    assert seen >= 10


def test_without_pad_k_an_odd_k_is_still_refused_in_one_sentence():
    plain = replace(K13, pad_k=False)
    why = unsupported(plain, Problem.parse("3001x2999x3003"))
    assert why.startswith("13_tf32_wgmma_tma: A is 3001 x 3003 float32; TMA needs")
    assert "multiple of 4" in why and "pad_k = true would stage it padded" in why
    assert why.count(". ") == 0 and "\n" not in why
    why14 = unsupported(replace(K14, pad_k=False), Problem.parse("136x263x107"))
    assert "multiple of 8" in why14


def test_a_copy_past_32_bit_indexing_is_refused():
    """M * Kp past 2^31 - 1 while M * K is not: the one shape family staging cannot take."""
    prob = Problem(65536, 8, 32767)        # 65536 * 32767 < 2^31 - 1 <= 65536 * 32768
    with pytest.raises(ShapeRefused, match="past the 32-bit limit"):
        staging(K13, prob)
    why = unsupported(K13, prob)
    assert why.startswith("13_tf32_wgmma_tma: A's copy with K padded from 32767 to 32768")
    assert "\n" not in why


TMA_ENTRY = kernel_entry("block = [384]", "tile = [128, 256]", 'precision = "tf32"',
                         'arch = "sm_90a"')


def test_registry_pad_k_needs_tma_and_k_major_operands(tmp_path):
    maps = ('tma = [{ operand = "A", box = [128, 32], swizzle = "128B" },\n'
            '       { operand = "B", box = [256, 32], swizzle = "128B" }]\n')
    nk = TMA_ENTRY + 'baseline = "cublas_tf32_nk"\nb_layout = "nk"\n'
    assert _load(tmp_path, nk + maps + "pad_k = true\n")["x"].pad_k
    assert not _load(tmp_path, nk + maps)["x"].pad_k
    with pytest.raises(ValueError, match="pad_k"):
        _load(tmp_path, nk + "pad_k = true\n")                        # no tma maps
    with pytest.raises(ValueError, match="pad_k"):
        _load(tmp_path, TMA_ENTRY + 'baseline = "cublas_tf32"\n' + maps + "pad_k = true\n")


class _Recorder:
    """Stands in for the GPU: PyCUDA functions, tensor maps and the staging buffers, each
    call written down in order (`grids`: each GEMM's grid as well)."""

    def __init__(self, monkeypatch, grids: bool = False):
        import gemm.cuda.device
        import gemm.cuda.loader
        import gemm.cuda.staging
        import gemm.cuda.tma
        self.log = []
        rec = self

        class Fn:
            def __init__(self, name):
                self.name = name

            def prepare(self, sig):
                pass

            def prepared_async_call(self, grid, block, stream, *args, shared_size=0):
                # M N K alpha A B beta C
                rec.log.append(("gemm", self.name, *([tuple(grid)] if grids else []), args[-8:]))

        class Maps:
            def __init__(self, map_plans):
                rec.log.append(("maps", tuple(map_plans)))

            def encode(self, a, b, *c):        # c: a kernel with a map of C (16)
                rec.log.append(("encode", a, b, *c))
                return (bytes(128),) * (2 + len(c))

        class Staged:
            def __init__(self, st):
                rec.log.append(("alloc", st))

            def stage(self, a, b, stream=None):
                rec.log.append(("stage", int(a), int(b)))
                return 0xA000, 0xB000

        info = SimpleNamespace(slug="nogpu", sms=132, arch="sm_90")
        monkeypatch.setattr(gemm.cuda.device, "info", lambda: info)
        monkeypatch.setattr(gemm.cuda.loader, "load", lambda spec: SimpleNamespace(
            functions={e: Fn(e) for e in spec.entries}))
        monkeypatch.setattr(gemm.cuda.tma, "TensorMaps", Maps)
        monkeypatch.setattr(gemm.cuda.staging, "PaddedOperands", Staged)


@pytest.mark.parametrize("name", ["13", "14"])
def test_an_aligned_launch_is_one_gemm_on_the_operands_as_given(monkeypatch, name):
    from gemm.cuda.launch import launcher
    rec = _Recorder(monkeypatch)
    spec, prob = registry.get(name), Problem(1024, 1024, 1024)
    launch = launcher(spec, prob)
    assert launch.staged is None
    launch(0x100, 0x200, 0x300)
    kinds = [e[0] for e in rec.log]
    assert kinds == ["maps", "encode", "gemm"]
    assert rec.log[0][1] == tuple(plans(spec, prob))
    assert rec.log[1][1:] == (0x100, 0x200)
    assert rec.log[2][2] == (1024, 1024, 1024, 1.0, 0x100, 0x200, 0.0, 0x300)


@pytest.mark.parametrize("name", ["13", "14", "15"])
def test_a_kernel_without_a_c_map_encodes_from_a_and_b_only(monkeypatch, name):
    """13-15: two maps from A's and B's pointers, as before C's map existed."""
    from gemm.cuda.launch import launcher, param_format
    rec = _Recorder(monkeypatch)
    spec, prob = registry.get(name), Problem(1000, 832, 504, 1.0, 0.0)
    assert [t.operand for t in spec.tma] == ["A", "B"]
    assert param_format(spec, "sm_90a") == "48s128s128siiifPPfP"
    launcher(spec, prob)(0x100, 0x200, 0x300)
    assert [e for e in rec.log if e[0] == "encode"] == [("encode", 0x100, 0x200)]


@pytest.mark.parametrize("shape,ab", [("1024", (1.0, 0.0)), ("136x263x107", (1.5, -0.5)),
                                      ("130x4x40", (1.0, 0.0)), ("100x23x40", (1.0, 0.0))])
def test_a_tma_store_launch_encodes_c_from_cs_pointer(monkeypatch, shape, ab):
    """16: A's, B's and C's maps, C's from the C the GEMM writes (never a staged copy), whatever
    beta and N (the kernel decides whether it uses it); the parameters are three maps."""
    from gemm.cuda.launch import launcher, param_format
    rec = _Recorder(monkeypatch)
    spec, prob = registry.get("16"), Problem.parse(shape)
    prob = replace(prob, alpha=ab[0], beta=ab[1])
    assert param_format(spec, "sm_90a") == "48s128s128s128siiifPPfP"
    launch = launcher(spec, prob)
    launch(0x100, 0x200, 0x300)
    enc = [e for e in rec.log if e[0] == "encode"]
    a, b = (0xA000, 0xB000) if launch.staged is not None else (0x100, 0x200)
    assert enc == [("encode", a, b, 0x300)]
    assert [p.operand for p in rec.log[0][1]] == ["A", "B", "C"]
    assert rec.log[-1][-1][-1] == 0x300                  # C itself, as the kernel's C


def test_c_maps_are_zero_where_tma_cannot_address_c(monkeypatch):
    """gemm.cuda.tma: C's map is 128 zero bytes for N % 4 != 0 or C off 16 bytes (no driver
    call), and encoded from C's pointer otherwise; A's and B's from theirs, as before."""
    import gemm.cuda.tma as tma
    real = tma.encode
    calls = []

    def fake_driver(p, address):
        if p.operand == "C" and not tma.addressable(p, address):
            return real(p, address)                    # the zero map, before the driver
        calls.append((p.operand, address))
        return p.operand.encode() * 128
    monkeypatch.setattr(tma, "encode", fake_driver)
    spec = registry.get("16")
    for n, c, zero in ((1024, 0x300, False), (1022, 0x300, True), (1024, 0x304, True),
                       (4, 0x310, False)):
        calls.clear()
        maps = tma.TensorMaps(plans(spec, Problem(1000, n, 504))).encode(0x100, 0x200, c)
        assert len(maps) == 3 and maps[:2] == (b"A" * 128, b"B" * 128)
        assert (maps[2] == bytes(128)) == zero, (n, hex(c))
        assert calls == [("A", 0x100), ("B", 0x200)] + ([] if zero else [("C", c)])
    with pytest.raises(ValueError, match="encode"):
        tma.TensorMaps(plans(spec, Problem(64, 64, 64))).encode(0x100, 0x200)
    calls.clear()
    assert tma.TensorMaps(plans(K14, Problem(64, 64, 64))).encode(0x100, 0x200) == \
        (b"A" * 128, b"B" * 128)
    assert calls == [("A", 0x100), ("B", 0x200)]


@pytest.mark.parametrize("name", ["13", "14"])
def test_an_odd_k_launch_copies_then_runs_the_gemm_on_the_copies(monkeypatch, name):
    from gemm.cuda.launch import launcher
    rec = _Recorder(monkeypatch)
    spec, prob = registry.get(name), Problem(136, 263, 107, 1.5, -0.5)
    kp = PADDED[(name, "136x263x107")]
    launch = launcher(spec, prob)
    assert launch.staged is not None
    launch(0x100, 0x200, 0x300)
    launch(0x110, 0x210, 0x310)        # a second launch: no new allocation, copies again
    kinds = [e[0] for e in rec.log]
    assert kinds == ["maps", "alloc", "stage", "encode", "gemm", "stage", "encode", "gemm"]
    assert rec.log[0][1] == tuple(plans(spec, kernel_problem(spec, prob)))
    assert rec.log[1][1] == staging(spec, prob)
    assert rec.log[2][1:] == (0x100, 0x200) and rec.log[5][1:] == (0x110, 0x210)
    assert rec.log[3][1:] == (0xA000, 0xB000)     # the maps over the copies
    # the kernel: K padded, the copies' pointers, C and alpha, beta as given
    assert rec.log[4][2] == (136, 263, kp, 1.5, 0xA000, 0xB000, -0.5, 0x300)
    assert rec.log[7][2] == (136, 263, kp, 1.5, 0xA000, 0xB000, -0.5, 0x310)
