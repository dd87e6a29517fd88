"""`gemm baseline` without a GPU: its argument errors (one sentence, exit 2, no GPU touched),
the candidate loop against a fake cublasLt module (wrong and failing candidates never timed
nor chosen; "faster" only when faster in every round), and the table and JSON it writes."""
import ctypes
import json
from enum import IntEnum

import numpy as np
import pytest

from gemm import cli
from gemm.core.policy import Measurement
from gemm.core.precision import format_of_baseline
from gemm.core.problem import Problem
from gemm.core.tolerance import Verdict
from gemm.cuda.cublaslt import LtMatmul
from gemm.measure import baseline as bl

# --- the command line ---------------------------------------------------------------------


@pytest.fixture
def no_gpu_touched(monkeypatch):
    """Any step towards the GPU fails the test."""
    import gemm.cuda.device as dev

    def touched(*a, **k):
        raise AssertionError("the GPU was touched")
    monkeypatch.setattr(dev, "probe", touched)
    monkeypatch.setattr(dev, "cuda", touched)
    monkeypatch.setattr(bl, "run", touched)


@pytest.mark.parametrize("argv,msg", [
    (["-b", "cublas_fp16"], "unknown cuBLAS configuration 'cublas_fp16'"),
    (["-b", "05_2d"], "unknown cuBLAS configuration '05_2d'"),
    (["--sizes", "12q"], "not N or MxNxK"),
    (["--sizes", "0"], "at least 1"),
    (["--algos", "0"], "--algos must be between 1 and 64, got 0"),
    (["--algos", "65"], "--algos must be between 1 and 64"),
    (["--rounds", "2"], "--rounds must be between 3 and 50"),
    (["--workspace-mib", "-1"], "--workspace-mib must be between 0 and 1024"),
    (["--budget-s", "0"], "--budget-s must be positive"),
    (["--json", "{tmp}"], "is a folder, not a file"),
    (["--json", "{tmp}/a_file/b.json"], "its folder cannot be made"),
])
def test_bad_arguments_are_one_sentence_before_the_gpu(argv, msg, no_gpu_touched, capsys,
                                                       tmp_path):
    (tmp_path / "a_file").write_text("")
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert cli.main(["baseline", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("gemm baseline: ")


def test_without_a_gpu_it_says_so(monkeypatch, capsys):
    import gemm.cuda.device as dev
    monkeypatch.setattr(dev, "probe", lambda: (False, "the CUDA driver sees no GPU"))
    assert cli.main(["baseline"]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA GPU" in err and "sees no GPU" in err and len(err.splitlines()) == 1


def test_defaults():
    args = cli.build_parser().parse_args(["baseline"])
    from gemm.cli.baseline import _check_args
    configs, problems = _check_args(args)
    assert configs == ["cublas_fp32", "cublas_tf32", "cublas_bf16_nk"]
    assert [p.label for p in problems] == ["2048", "4096", "8192"]
    assert (args.algos, args.rounds, args.workspace_mib) == (8, 5, 32)
    args = cli.build_parser().parse_args(["baseline", "-b", "cublas_tf32", "-b", "cublas_tf32",
                                          "--sizes", "1000x832x504"])
    assert _check_args(args)[0] == ["cublas_tf32"]


# --- a fake cublasLt ------------------------------------------------------------------------

HEURISTIC_DTYPE = np.dtype([("algo", [("data_", "<u8", (8,))]), ("workspace_size", "<u8"),
                            ("state", "<i4"), ("waves_count", "<f4"), ("reserved", "<i4", (4,))])


class FakeLt:
    """nvmath.bindings.cublasLt as far as LtMatmul uses it. An algo struct holds its id in
    data_[0], tile id in data_[1], splitK in data_[2]; `algos` are what the heuristic
    answers, per compute type: (id, tile, splitk, state, workspace, waves)."""

    class MatmulDescAttribute(IntEnum):
        TRANSA = 3
        TRANSB = 4

    class MatmulPreferenceAttribute(IntEnum):
        MAX_WORKSPACE_BYTES = 1

    class MatmulAlgoConfigAttribute(IntEnum):   # STAGES_ID etc. left out: read as None
        ID = 0
        TILE_ID = 1
        SPLITK_NUM = 2

    class MatmulTile(IntEnum):
        TILE_UNDEFINED = 0
        TILE_128x128 = 1
        TILE_128x256 = 2

    matmul_heuristic_result_dtype = HEURISTIC_DTYPE

    def __init__(self, algos: dict) -> None:
        self.algos = algos
        self.calls = []
        self.objects = 0
        self.live = set()
        self.last = None     # the algo id the last matmul ran
        self.desc_compute = {}

    def _new(self, what):
        self.objects += 1
        h = 1000 * self.objects
        self.live.add(h)
        self.calls.append((what, h))
        return h

    def create(self):
        return self._new("handle")

    def matmul_desc_create(self, compute, scale):
        h = self._new("desc")
        self.desc_compute[h] = (compute, scale)
        return h

    def matrix_layout_create(self, dtype, rows, cols, ld):
        h = self._new("layout")
        self.calls.append(("layout_spec", (dtype, rows, cols, ld)))
        return h

    def matmul_preference_create(self):
        return self._new("pref")

    def _destroy(self, h):
        self.live.remove(h)

    destroy = matrix_layout_destroy = matmul_preference_destroy = matmul_desc_destroy = _destroy

    @staticmethod
    def get_matmul_desc_attribute_dtype(attr):
        return np.int32

    @staticmethod
    def get_matmul_preference_attribute_dtype(attr):
        return np.uint64

    @staticmethod
    def get_matmul_algo_config_attribute_dtype(attr):
        return {0: np.int32, 1: np.uint32, 2: np.int32}[int(attr)]

    def matmul_desc_set_attribute(self, desc, attr, buf, size):
        value = np.frombuffer((ctypes.c_char * size).from_address(buf), dtype=np.int32)[0]
        self.calls.append(("desc_attr", int(attr), int(value)))

    def matmul_preference_set_attribute(self, pref, attr, buf, size):
        value = np.frombuffer((ctypes.c_char * size).from_address(buf), dtype=np.uint64)[0]
        self.calls.append(("pref_attr", int(attr), int(value)))

    def matmul_algo_get_heuristic(self, handle, desc, la, lb, lc, ld, pref, n, results, count):
        answers = self.algos.get(self.desc_compute[desc][0], [])[:n]
        out = np.frombuffer((ctypes.c_char * (n * HEURISTIC_DTYPE.itemsize)).from_address(results),
                            dtype=HEURISTIC_DTYPE)
        for i, (algo_id, tile, splitk, state, ws, waves) in enumerate(answers):
            out[i]["algo"]["data_"][:3] = (algo_id, tile, splitk)
            out[i]["state"], out[i]["workspace_size"], out[i]["waves_count"] = state, ws, waves
        ctypes.c_int32.from_address(count).value = len(answers)

    def matmul_algo_config_get_attribute(self, algo, attr, buf, size, written):
        data = (ctypes.c_uint64 * 8).from_address(algo)
        dtype = self.get_matmul_algo_config_attribute_dtype(attr)
        np.frombuffer((ctypes.c_char * size).from_address(buf), dtype=dtype)[0] = data[int(attr)]

    def matmul(self, h, desc, alpha, a, adesc, b, bdesc, beta, c, cdesc, d, ddesc, algo, ws,
               ws_size, stream):
        assert ctypes.c_float.from_address(alpha).value == 1.0
        assert ctypes.c_float.from_address(beta).value == 0.0
        assert c == d and cdesc == ddesc and ws_size == 32 << 20
        self.calls.append(("matmul", a, b, d))
        self.last = int((ctypes.c_uint64 * 8).from_address(algo)[0])
        if self.last == 66:
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")

    @staticmethod
    def get_version():
        return 130400


class FakeOps:
    a, b, c, out = 11, 22, 33, 44
    freed = False

    def free(self):
        self.freed = True


class FakeBuf:
    def __init__(self, log):
        self.log = log

    def free(self):
        self.log.append("ref freed")


class FakeChecker:
    """Runs the launch (so the fake records which algo ran) and calls it wrong when that algo
    id is in `wrong`."""

    def __init__(self, lt, wrong=()):
        self.lt, self.wrong, self.log = lt, set(wrong), []
        self.ops = FakeOps()

    def operands(self, prob, seed=None, fmt=None):
        self.log.append(("operands", seed, fmt))
        return self.ops

    def reference(self, ops, prob):
        return FakeBuf(self.log), FakeBuf(self.log)

    def check(self, launch, ops, prob, precision, ref):
        self.lt.last = None
        launch(ops.a, ops.b, ops.out, None)
        bad = self.lt.last in self.wrong
        return Verdict(ok=not bad, max_err_over_tol=5.0 if bad else 0.3, rel_fro_error=1e-7,
                       bad=10 if bad else 0, nan=0, first_bad=(0, 1) if bad else None,
                       reference="gpu")


class FakeTimer:
    """Each function's samples by the algo it runs ("today" for today's call)."""

    def __init__(self, lt, samples):
        self.lt, self.samples, self.timed, self.closed = lt, samples, [], False

    def measure(self, fns):
        out = {}
        for name, fn in fns.items():
            self.lt.last = "today"
            fn()
            self.timed.append(self.lt.last)
            out[name] = Measurement(samples_s=list(self.samples[self.lt.last]), batch=4,
                                    graph=True)
        return out

    def close(self):
        self.closed = True


TODAY = [1.00e-3, 1.01e-3, 0.99e-3, 1.00e-3, 1.02e-3]
SAMPLES = {
    "today": TODAY,
    7: [t * 0.95 for t in TODAY],                            # faster in every round
    8: [t * r for t, r in zip(TODAY, (0.97, 0.98, 1.01, 0.97, 0.98))],   # faster at the median only
    9: [t * 1.10 for t in TODAY],                            # slower
    5: [t * 0.50 for t in TODAY],                            # the fastest, but wrong
    66: [t * 0.40 for t in TODAY],                           # its launch raises
    4: [t * 0.90 for t in TODAY],                            # the heuristic marked it failed
}
# (id, tile, splitk, state, workspace, waves)
ANSWER = [(7, 2, 1, 0, 1 << 20, 0.97), (5, 1, 1, 0, 0, 1.9), (8, 1, 4, 0, 8 << 20, 3.9),
          (4, 1, 1, 15, 0, 1.0), (66, 1, 1, 0, 0, 1.0), (9, 1, 1, 0, 0, 0.5)]


def compare(config="cublas_tf32", algos=None, wrong=(5,), n=8, samples=SAMPLES):
    lt = FakeLt(algos if algos is not None else {77: ANSWER, 69: ANSWER, 68: ANSWER})
    checker = FakeChecker(lt, wrong)
    timer = FakeTimer(lt, samples)
    opened = []

    def open_lt(fmt, prob, compute):
        m = LtMatmul(fmt.precision, fmt.b_layout, prob.M, prob.N, prob.K, workspace=0xABC00,
                     compute=compute, lt=lt)
        opened.append(m)
        return m

    def today(prob):
        def launch(a, b, out, stream=None):
            lt.last = "today"
        return launch
    entry = bl.compare_problem(config, Problem.square(2048), today=today, checker=checker,
                               open_lt=open_lt, make_timer=lambda: timer, n_algos=n)
    return entry, lt, checker, timer, opened


def test_the_candidate_loop():
    entry, lt, checker, timer, opened = compare()
    assert entry["error"] is None and entry["lt_compute"] == "COMPUTE_32F_FAST_TF32"
    by_id = {c["algo"]["id"]: c for c in entry["candidates"]}
    assert 4 not in by_id                                   # the heuristic's failed answer
    assert [c["rank"] for c in entry["candidates"]] == [0, 1, 2, 4, 5]
    v = {i: c["verdict"] for i, c in by_id.items()}
    assert v == {7: "faster", 5: "wrong", 8: "same", 66: "error", 9: "slower"}
    assert by_id[66]["error"] == "RuntimeError: CUBLAS_STATUS_NOT_SUPPORTED"
    # the wrong and the failing candidate are never timed, so never chosen
    assert timer.timed == ["today", 7, 8, 9] and timer.closed
    assert by_id[5]["ms"] is None and by_id[5]["ratio"] is None
    assert entry["best"] == 0 and by_id[7]["ratio"] == pytest.approx(0.95)
    assert by_id[7]["ratio_max"] < 1 and by_id[8]["ratio"] < 1 < by_id[8]["ratio_max"]
    assert entry["today"]["ok"] and entry["today"]["ms"] == pytest.approx(1.0)
    assert entry["today"]["tflops"] == pytest.approx(2 * 2048 ** 3 / 1e-3 / 1e12)
    assert by_id[7]["algo"] == {"id": 7, "tile": "128x256", "stages": None, "splitk": 1,
                                "reduction": None, "swizzle": None, "custom": None,
                                "inner_shape": None, "cluster": None}
    assert by_id[8]["workspace_bytes"] == 8 << 20 and by_id[8]["waves"] == pytest.approx(3.9)
    assert by_id[7]["label"] == "algo 7 tile 128x256 splitK 1"
    # operands from the suite's timing seed in the configuration's format; all freed
    assert checker.log[0] == ("operands", 20261130, format_of_baseline("cublas_tf32"))
    assert checker.log.count("ref freed") == 2 and checker.ops.freed
    assert not lt.live                                      # every descriptor destroyed
    json.dumps(entry)                                       # the document is plain data


def test_the_problem_is_todays_call():
    """Lt's A is our B (N x K col-major, or K x N transposed for B stored N x K), Lt's B our
    A (K x M), C = D (N x M); the compute type follows the precision; 32 MiB workspace."""
    for config, compute, trans_a, a_spec, t_in in (
            ("cublas_tf32", 77, 0, (2048, 2048, 2048), 0),
            ("cublas_bf16_nk", 68, 1, (2048, 2048, 2048), 14),
            ("cublas_fp32", 69, 0, (2048, 2048, 2048), 0)):
        entry, lt, *_ = compare(config)
        assert list(lt.desc_compute.values()) == [(compute, 0)]
        assert ("desc_attr", 3, trans_a) in lt.calls and ("desc_attr", 4, 0) in lt.calls
        assert ("pref_attr", 1, 32 << 20) in lt.calls
        specs = [c[1] for c in lt.calls if c[0] == "layout_spec"]
        assert specs == [(t_in, *a_spec), (t_in, 2048, 2048, 2048), (0, 2048, 2048, 2048)]
        # Lt's A pointer is our B buffer, Lt's B our A, D our output
        assert ("matmul", 22, 11, 44) in lt.calls


def test_nonsquare_layouts():
    lt = FakeLt({})
    m = LtMatmul("bf16", "nk", 300, 200, 100, workspace=1, lt=lt)
    m2 = LtMatmul("tf32", "kn", 300, 200, 100, workspace=1, lt=lt)
    specs = [c[1] for c in lt.calls if c[0] == "layout_spec"]
    assert specs[:3] == [(14, 100, 200, 100), (14, 100, 300, 100), (0, 200, 300, 200)]
    assert specs[3:] == [(0, 200, 100, 200), (0, 100, 300, 100), (0, 200, 300, 200)]
    m.close()
    m2.close()
    assert not lt.live
    with pytest.raises(ValueError):
        LtMatmul("fp16", "kn", 1, 1, 1, workspace=1, lt=lt)


def test_fp32_falls_back_to_compute_32f_where_pedantic_gives_none():
    entry, lt, *_ = compare("cublas_fp32", algos={68: ANSWER})
    assert entry["lt_compute"] == "COMPUTE_32F"
    assert entry["heuristic_notes"] == ["COMPUTE_32F_PEDANTIC: no candidates"]
    assert entry["best"] == 0 and not lt.live
    entry, *_ = compare("cublas_tf32", algos={68: ANSWER})   # no fallback for TF32
    assert entry["lt_compute"] is None and entry["candidates"] == []
    assert entry["today"]["ms"] == pytest.approx(1.0) and entry["best"] is None


def test_a_wrong_fastest_candidate_is_never_best():
    entry, *_ = compare(wrong=(5, 7))
    assert entry["best"] is None
    assert {c["algo"]["id"]: c["verdict"] for c in entry["candidates"]}[7] == "wrong"


def test_an_error_is_recorded_not_raised():
    lt = FakeLt({77: ANSWER})
    checker = FakeChecker(lt)

    def open_lt(fmt, prob, compute):
        return LtMatmul(fmt.precision, fmt.b_layout, prob.M, prob.N, prob.K, 1, lt=lt,
                        compute=compute)

    class Broken(FakeTimer):
        def measure(self, fns):
            raise RuntimeError("cuGraphLaunch failed")
    entry = bl.compare_problem("cublas_tf32", Problem.square(64), today=lambda p: (lambda *a: None),
                               checker=checker, open_lt=open_lt,
                               make_timer=lambda: Broken(lt, SAMPLES))
    assert entry["error"] == "RuntimeError: cuGraphLaunch failed"
    assert checker.ops.freed and not lt.live


def test_policy_is_the_suites_timer_shortened():
    p = bl.policy(5)
    assert (p.min_samples, p.max_samples, p.sample_s, p.warmup_s) == (5, 5, 0.004, 0.01)
    assert p.mode == "hot" and p.batching == "graph" and p.timing_seed == 20261130
    m = Measurement(samples_s=[1.0] * 5)
    assert m.done(p) and not Measurement(samples_s=[1.0] * 4, gpu_time_s=0.5).done(p)


# --- the table and the document ---------------------------------------------------------------

def fake_doc():
    entry, *_ = compare()
    skipped = bl.new_entry("cublas_fp32", Problem.square(8192))
    skipped["error"] = "skipped: the run passed its budget of 300 s"
    return {"schema": bl.SCHEMA, "date": "2026-12-01T16:00:00Z", "wall_s": 12.3,
            "machine": {"gpu": "NVIDIA H200", "identity": "NVIDIA H200 GPU-abc",
                        "driver": "570.1", "cuda": "12.8", "cublas": 120805,
                        "cublaslt": 120805, "nvmath": "1.0.0"},
            "settings": {"algos": 8, "rounds": 5, "workspace_bytes": 32 << 20},
            "results": [entry, skipped], "aborted": None}


def test_the_table():
    from gemm.cli.baseline import entry_table, healthy, render
    doc = fake_doc()
    text = render(doc)
    assert "NVIDIA H200 (NVIDIA H200 GPU-abc), driver 570.1, cuBLAS 120805" in text
    assert "8 candidates asked, 32.0 MiB workspace, 5 rounds" in text
    lines = entry_table(doc["results"][0]).splitlines()
    assert lines[0] == ("cublas_tf32 2048: today cublasGemmEx, COMPUTE_32F_FAST_TF32; "
                        "cublasLt COMPUTE_32F_FAST_TF32")
    row = {ln.split()[0]: ln for ln in lines[3:] if ln.startswith(("today", "#"))}
    assert row["today"].split()[1:4] == ["default", "1.0000", "17.2"]
    r0 = row["#0"].split()
    assert r0[1:6] == ["7", "128x256", "-", "1", "-"] and r0[-4:] == ["0.950", "0.950-0.950",
                                                                      "faster", "(best)"]
    assert row["#1"].split()[-1] == "wrong" and row["#5"].split()[-1] == "slower"
    assert row["#2"].split()[-1] == "same" and row["#4"].split()[-1] == "error"
    assert "  #4: RuntimeError: CUBLAS_STATUS_NOT_SUPPORTED" in lines
    assert "  #1: wrong: max err/tol 5" in lines
    assert "cublas_fp32 8192: today cublasSgemm, PEDANTIC math; cublasLt gave no candidates\n" \
           "  error: skipped: the run passed its budget of 300 s" in text
    assert not healthy(doc)
    doc["results"].pop()
    assert healthy(doc)
    doc["results"][0]["today"]["ok"] = False
    assert not healthy(doc)


def test_the_command_writes_the_document(tmp_path, monkeypatch, capsys):
    import gemm.cuda.device as dev
    doc = fake_doc()
    doc["results"].pop()
    seen = {}

    def fake_run(configs, problems, **kw):
        seen.update(configs=configs, sizes=[p.label for p in problems], **kw)
        return doc
    monkeypatch.setattr(dev, "probe", lambda: (True, ""))
    monkeypatch.setattr(bl, "run", fake_run)
    out = tmp_path / "baselines" / "h200.json"   # its folder is made
    assert cli.main(["baseline", "-b", "cublas_tf32", "--sizes", "2048", "--algos", "4",
                     "--json", str(out)]) == 0
    assert seen["configs"] == ["cublas_tf32"] and seen["sizes"] == ["2048"]
    assert seen["n_algos"] == 4 and seen["rounds"] == 5 and seen["workspace_bytes"] == 32 << 20
    saved = json.loads(out.read_text())
    assert saved["schema"] == "gemm.baseline/1" and saved["results"][0]["best"] == 0
    c0 = saved["results"][0]["candidates"][0]
    assert {"rank", "label", "algo", "workspace_bytes", "waves", "ok", "check", "error", "ms",
            "spread", "tflops", "samples_ms", "ratio", "ratio_min", "ratio_max",
            "verdict"} <= set(c0)
    assert "faster (best)" in capsys.readouterr().out
    doc["aborted"] = "the CUDA context was lost"
    assert cli.main(["baseline", "--sizes", "2048"]) == 1
