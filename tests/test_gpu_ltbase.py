"""On a GPU whose model has a committed choice file (the H200: baselines/h200-choice.toml):
the chosen cuBLASLt algorithm is re-created exactly, is correct for every (alpha, beta) the
suite checks, is what a sweep's record names, and a broken choice falls back to today's call
and says so. Skipped without a GPU, or on a model without a choice file."""
import pytest

from gemm.core import ltchoice, registry, shapes
from gemm.core.problem import Problem


@pytest.fixture(scope="module")
def choices(gpu):
    from gemm.cuda.device import info
    cf = ltchoice.for_gpu(info().slug)
    if cf is None or not any(e.call is ltchoice.Call.CUBLASLT for e in cf.entries):
        pytest.skip(f"no cuBLASLt choice for {info().name}")
    return cf


def chosen(cf):
    return [e for e in cf.entries if e.call is ltchoice.Call.CUBLASLT]


@pytest.mark.parametrize("alpha,beta", shapes.CHECK_AB, ids=lambda v: str(v))
def test_each_chosen_algorithm_is_recreated_and_correct(choices, alpha, beta):
    from gemm.cuda.targets import open_target
    from gemm.measure.check import Checker
    for e in chosen(choices):
        t = open_target(e.config)
        chk = Checker(fmt=t.fmt)
        p = Problem(e.M, e.N, e.K, alpha, beta)
        try:
            launch = t.launcher(p)
            call = t.baseline.describe(p)
            assert call.call is ltchoice.Call.CUBLASLT, call.line()
            assert {k: v for k, v in call.algo.items() if v is not None} == e.algo.as_dict()
            ops = chk.operands(p, fmt=t.fmt)
            ref = chk.reference(ops, p)
            v = chk.check(launch, ops, p, t.precision, ref)
            [b.free() for b in ref]
            ops.free()
            assert v.ok, f"{e.config} {e.size} {e.algo.label()}: {v}"
        finally:
            chk.close()
            t.close()


def test_the_sweep_record_names_the_algorithm(choices):
    from gemm.measure.sweep import sweep
    e = chosen(choices)[0]
    kernel = next(s.name for s in registry.registry().values() if s.baseline == e.config)
    doc = sweep([kernel], [Problem(e.M, e.N, e.K)], time_it=False)
    rec = doc["records"][0]
    assert rec["baseline_call"]["call"] == "cublaslt", rec.get("baseline_call")
    assert rec["baseline_call"]["label"] == e.algo.label()


def test_a_broken_choice_falls_back_and_says_so(choices, capsys):
    from dataclasses import replace

    from gemm.cuda import basecall
    e = chosen(choices)[0]
    bad = replace(e, algo=replace(e.algo, tile="9999x9999"))
    cf = replace(choices, entries=(bad,))
    base = basecall.open_baseline(e.config)
    base.choices = cf
    try:
        p = Problem(e.M, e.N, e.K)
        base.launcher(p)
        call = base.describe(p)
        assert call.call is ltchoice.Call.TODAY and "could not be re-created" in call.fallback
        assert "today's call runs" in capsys.readouterr().err
    finally:
        base.close()
