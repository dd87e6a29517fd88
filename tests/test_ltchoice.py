"""The baseline's algorithm per GPU model (gemm.core.ltchoice), chosen from the two committed
gemm.baseline/1 documents; its re-creation in cuBLASLt (gemm.cuda.cublaslt.LtMatmul.recreate)
against a fake of the bindings; the timed path's baseline (gemm.cuda.basecall) with its
fallback to today's call; and the % of cuBLAS version of the series it changes. No GPU."""
import ctypes
import json
from pathlib import Path

import numpy as np
import pytest

from gemm.cli.main import main
from gemm.core import ltchoice, metrics
from gemm.core.ltchoice import AlgoConfig, Call, ChoiceError
from gemm.core.policy import SUITE
from gemm.core.problem import Problem
from gemm.cuda import cublaslt
from gemm.cuda.basecall import Baseline
from tests.test_baseline import FakeLt

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("baselines/h200.json", "docs/probes/h200-89851f8-baseline-bf16.json")
MADE_BY = "gemm baseline --choose " + " ".join(SOURCES)


def docs():
    return [(name, json.loads((ROOT / name).read_text())) for name in SOURCES]


def test_the_choice_from_both_h200s():
    cf = ltchoice.choose(docs(), made_by=MADE_BY)
    assert (cf.gpu, cf.slug) == ("NVIDIA H200", "h200")
    by = {(e.config, e.size): e for e in cf.entries}
    assert {k for k, e in by.items() if e.call is Call.CUBLASLT} == {
        ("cublas_bf16_nk", "2048"), ("cublas_bf16_nk", "4096"), ("cublas_bf16_nk", "8192")}
    tiles = {s: by[("cublas_bf16_nk", s)].algo.tile for s in ("2048", "4096", "8192")}
    assert tiles == {"2048": "128x128", "4096": "112x128", "8192": "168x128"}
    e = by[("cublas_bf16_nk", "8192")]
    assert e.algo == AlgoConfig(id=66, tile="168x128", stages="64xAUTO", splitk=1, reduction=0,
                                swizzle=0, custom=2, inner_shape=0, cluster="1x2x1")
    assert (e.compute, e.workspace_bytes, e.needs_bytes) == ("COMPUTE_32F", 32 << 20, 4)
    assert [(v.identity, v.rank) for v in e.evidence] == [("GPU-046aeb6b", 7), ("GPU-d9cef9ec", 7)]
    assert all(v.ratio_max < 1 and v.ratio <= 0.98 for v in e.evidence)
    # 1024 (one GPU, medium: 6 %), FP32 (x0.986 at 8192: under 2 %) and TF32 keep today's call
    assert by[("cublas_bf16_nk", "1024")].call is Call.TODAY
    assert "x0.986 on GPU-046aeb6b" in by[("cublas_fp32", "8192")].why
    assert all(by[(c, s)].call is Call.TODAY for c in ("cublas_fp32", "cublas_tf32")
               for s in ("2048", "4096", "8192"))


def test_the_committed_file_is_the_commands_output(tmp_path, capsys):
    out = tmp_path / "choice.toml"
    argv = ["baseline", "--choose", *(str(ROOT / s) for s in SOURCES), "--out", str(out)]
    assert main(argv) == 0
    assert "3 on cuBLASLt" in capsys.readouterr().out
    committed = (ROOT / "baselines/h200-choice.toml").read_text()
    assert committed == ltchoice.render(ltchoice.choose(docs(), made_by=MADE_BY))
    assert ltchoice.parse(out.read_text()).entries == ltchoice.parse(committed).entries


def test_lookup_and_shapes_not_listed():
    cf = ltchoice.for_gpu("h200")
    assert cf.lookup("cublas_bf16_nk", 4096, 4096, 4096).algo.tile == "112x128"
    for shape in ((1024, 1024, 1024), (3001, 2999, 3003), (4096, 4096, 2048)):
        assert cf.lookup("cublas_bf16_nk", *shape) is None      # today's call
    assert cf.lookup("cublas_fp32", 8192, 8192, 8192) is None   # measured, kept
    assert ltchoice.for_gpu("no-such-gpu") is None


def test_min_gain_is_twice_the_gates_floor():
    from gemm.track.gate import MIN_EFFECT
    assert ltchoice.MIN_GAIN == {k: 2 * v for k, v in MIN_EFFECT.items()}


def test_the_same_algorithm_must_win_on_every_gpu():
    (n1, d1), (n2, d2) = docs()
    only = [e for e in d2["results"] if e["size"] == "4096"][0]
    for c in only["candidates"]:         # GPU-d9cef9ec: the winner of GPU-046aeb6b was slower
        if c["rank"] == 5:
            c.update(verdict="slower", ratio=1.02, ratio_min=1.01, ratio_max=1.03)
    cf = ltchoice.choose([(n1, d1), (n2, d2)])
    e = next(e for e in cf.entries if (e.config, e.size) == ("cublas_bf16_nk", "4096"))
    assert e.call is Call.TODAY and "GPU-d9cef9ec" in e.why


@pytest.mark.parametrize("doc,msg", [
    ({"schema": "x"}, "is not a gemm.baseline/1 document"),
    ({"schema": "gemm.baseline/1", "aborted": "lost", "machine": {}}, "aborted run"),
])
def test_bad_documents(doc, msg):
    with pytest.raises(ChoiceError, match=msg):
        ltchoice.choose([("f.json", doc)])


def test_two_gpu_models_are_refused():
    (n1, d1), (n2, d2) = docs()
    d2["machine"]["gpu"] = "NVIDIA H100"
    with pytest.raises(ChoiceError, match="more than one GPU model"):
        ltchoice.choose([(n1, d1), (n2, d2)])


@pytest.mark.parametrize("text,msg", [("schema = 1", "is not a gemm.baseline-choice/1"),
                                      ("= =", "is not TOML")])
def test_bad_choice_files(text, msg):
    with pytest.raises(ChoiceError, match=msg):
        ltchoice.parse(text)


def test_cli_bad_input_is_one_sentence_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "other"}')
    assert main(["baseline", "--choose", str(bad)]) == 2
    assert main(["baseline", "--out", "x.toml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gemm baseline: {bad} is not a gemm.baseline/1 document",
                   "gemm baseline: --out goes with --choose"]


# --- the benchmark versions -----------------------------------------------------------------

def test_the_pct_of_cublas_version_moves_only_where_the_baseline_does():
    from gemm.record import suite
    classes = suite.classes("bench_test")
    k14 = next(v for k, v in classes.items() if k.startswith("Kernel_14"))
    k13 = next(v for k, v in classes.items() if k.startswith("Kernel_13"))
    fp = ltchoice.fingerprint("cublas_bf16_nk")
    assert fp and ltchoice.fingerprint("cublas_fp32") is None
    for m in metrics.KERNEL_METRICS:
        old = metrics.version(m, SUITE)
        new = getattr(k14, f"track_{m.key}").version
        assert (new != old) == (m.key in metrics.BASELINE_DEPENDENT), m.key
        assert new == metrics.version(m, SUITE, baseline_call=fp)
        assert getattr(k13, f"track_{m.key}").version == old
    for m in metrics.BASELINE_METRICS:   # cuBLAS's own series: one asv version for all configs
        assert getattr(classes["Cublas"], f"track_{m.key}").version == \
            metrics.version(m, SUITE, baseline=True)


# --- re-creating the algorithm --------------------------------------------------------------

class RecreatingLt(FakeLt):
    """FakeLt with cublasLtMatmulAlgoInit, ...ConfigSetAttribute and ...AlgoCheck."""

    def __init__(self, needs=0, refuse=False, drift=False):
        super().__init__({})
        self.needs, self.refuse, self.drift = needs, refuse, drift

    def matmul_algo_init(self, h, compute, scale, at, bt, ct, dt, algo_id, algo):
        self.calls.append(("algo_init", compute, at, algo_id))
        (ctypes.c_uint64 * 8).from_address(algo)[0] = algo_id

    def matmul_algo_config_set_attribute(self, algo, attr, buf, size):
        dtype = self.get_matmul_algo_config_attribute_dtype(attr)
        value = int(np.frombuffer((ctypes.c_char * size).from_address(buf), dtype=dtype)[0])
        (ctypes.c_uint64 * 8).from_address(algo)[int(attr)] = value + (1 if self.drift else 0)

    def matmul_algo_check(self, h, desc, la, lb, lc, ld, algo, result):
        if self.refuse:
            raise RuntimeError("CUBLAS_STATUS_INVALID_VALUE")
        from tests.test_baseline import HEURISTIC_DTYPE
        r = np.frombuffer((ctypes.c_char * HEURISTIC_DTYPE.itemsize).from_address(result),
                          dtype=HEURISTIC_DTYPE)
        r[0]["workspace_size"] = self.needs


def lt_matmul(lt, ws_bytes=32 << 20):
    return cublaslt.LtMatmul("bf16", "nk", 64, 32, 16, 7, ws_bytes, lt=lt)


def test_recreate_builds_the_recorded_algorithm():
    lt = RecreatingLt(needs=4)
    m = lt_matmul(lt)
    cand = m.recreate({"id": 20, "tile": "128x256", "splitk": 1})
    read = {k: v for k, v in cand.algo.items() if v is not None}
    assert read == {"id": 20, "tile": "128x256", "splitk": 1} and cand.workspace_bytes == 4
    assert ("algo_init", 68, cublaslt.CUDA_R_16BF, 20) in lt.calls
    m.launcher(cand)(11, 22, 44)            # the re-created struct is the one launched
    assert lt.last == 20 and ("matmul", 22, 11, 44) in lt.calls
    m.close()
    assert not lt.live


@pytest.mark.parametrize("lt,algo,msg", [
    (RecreatingLt(refuse=True), {"id": 66}, "cuBLASLt refused it"),
    (RecreatingLt(needs=64 << 20), {"id": 66}, "needs 67108864 bytes of workspace"),
    (RecreatingLt(drift=True), {"id": 66, "splitk": 2}, "reads back different: splitk 3"),
    (RecreatingLt(), {"id": 66, "tile": "999x999"}, "know no MatmulTile '999x999'"),
])
def test_recreate_refuses(lt, algo, msg):
    m = lt_matmul(lt)
    with pytest.raises(cublaslt.RecreateError, match=msg):
        m.recreate(algo)
    m.close()


# --- the timed path's baseline --------------------------------------------------------------

class FakeBlas:
    closed = False

    def launcher(self, prob):
        return ("today", prob.M)

    def close(self):
        self.closed = True


class FakeMatmul:
    def __init__(self, fail=None):
        self.fail, self.closed = fail, False

    def recreate(self, algo):
        if self.fail:
            raise cublaslt.RecreateError(self.fail)
        return cublaslt.Candidate(rank=-1, algo=dict(algo), ptr=1)

    def launcher(self, cand, alpha, beta):
        return ("lt", cand.algo["tile"], alpha, beta)

    def close(self):
        self.closed = True


class FakeBuf(int):
    freed = False

    def free(self):
        FakeBuf.freed = True


def baseline(fail=None):
    warned, opened = [], []

    def open_lt(fmt, prob, choice, workspace):
        assert (fmt.precision, fmt.b_layout, workspace) == ("bf16", "nk", 5)
        opened.append(FakeMatmul(fail))
        return opened[-1]
    base = Baseline("cublas_bf16_nk", FakeBlas(), ltchoice.for_gpu("h200"), open_lt,
                    lambda n: FakeBuf(5), warn=warned.append)
    return base, warned, opened


def test_the_chosen_algorithm_runs_where_listed():
    base, warned, opened = baseline()
    p = Problem(4096, 4096, 4096, 2.0, 0.5)
    assert base.launcher(p) == ("lt", "112x128", 2.0, 0.5) and base.chosen(p)
    d = base.describe(p).as_dict()
    assert d["call"] == "cublaslt" and d["fallback"] is None and d["algo"]["tile"] == "112x128"
    assert d["label"].startswith("algo 66 tile 112x128") and d["workspace_bytes"] == 32 << 20
    assert d["choice_file"].endswith("baselines/h200-choice.toml")
    q = Problem(3001, 2999, 3003)       # not listed: today's call, no file named
    assert base.launcher(q) == ("today", 3001)
    assert base.describe(q).as_dict() == {"config": "cublas_bf16_nk", "call": "today",
                                          "choice_file": None, "algo": None, "label": None,
                                          "workspace_bytes": 0, "fallback": None}
    assert not warned
    base.close()
    assert all(m.closed for m in opened) and base.blas.closed and FakeBuf.freed


def test_an_algorithm_that_cannot_be_recreated_falls_back_and_says_so():
    base, warned, opened = baseline(fail="cuBLASLt refused it (NOT_SUPPORTED)")
    p = Problem(2048, 2048, 2048)
    assert base.launcher(p) == ("today", 2048) and not base.chosen(p)
    d = base.describe(p)
    assert d.call is Call.TODAY and d.choice_file.endswith("h200-choice.toml")
    assert d.fallback == ("the algorithm could not be re-created here: cuBLASLt refused it "
                          "(NOT_SUPPORTED)")
    assert d.line() == f"cublas_bf16_nk: today's call (fallback: {d.fallback})"
    assert len(warned) == 1 and "algo 66 tile 128x128" in warned[0]
    assert "today's call runs" in warned[0] and opened[0].closed


def test_an_algorithm_that_fails_the_check_falls_back():
    base, warned, _ = baseline()
    p = Problem(8192, 8192, 8192)
    assert base.launcher(p)[0] == "lt"
    assert base.fall_back(p, "it failed the check: max err/tol 3.1")
    assert base.launcher(p) == ("today", 8192)
    assert base.describe(p).fallback == "it failed the check: max err/tol 3.1"
    assert not base.fall_back(p, "again")       # already today's call
    assert len(warned) == 1


def test_gemm_bench_names_the_baselines_algorithm():
    from gemm.cli.bench import baseline_lines
    lt = {"config": "cublas_bf16_nk", "call": "cublaslt", "label": "algo 66 tile 112x128",
          "fallback": None}
    fb = {"config": "cublas_bf16_nk", "call": "today", "label": None, "fallback": "no"}
    recs = [{"size": "4096", "baseline_call": lt}, {"size": "4096", "baseline_call": lt},
            {"size": "8192", "baseline_call": fb}, {"size": "512", "baseline_call":
            {"config": "cublas_bf16_nk", "call": "today", "fallback": None}}, {"size": "1"}]
    assert baseline_lines(recs)[2:] == [
        "baseline cublas_bf16_nk 4096: cuBLASLt algo 66 tile 112x128",
        "baseline cublas_bf16_nk 8192: today's call, FALLBACK: no"]
    assert baseline_lines(recs[3:]) == []
