"""The machine over the gate's A/B (issue 26), on the CPU: the GPU sampled through NVML while
each arm's process runs (gemm.machine.nvml.ArmSamples, with a stand-in sampler or a stand-in
pynvml), each arm's figures over all its processes, kept in the effects of the A/B'd rows
(through ABRun and abreport.finish, and through `gemm regress` with real worktrees), and gemm
explain's words for them: alike, or a machine change candidate (gemm.explain.abmachine), in
the summary it attaches to the DROP. ci/explain.sh with them: tests/test_explain.py."""
from __future__ import annotations

import json
import sys
import types
from dataclasses import asdict
from types import SimpleNamespace

import pytest

from gemm.explain import report
from gemm.explain.abmachine import ABMachine, from_rows
from gemm.explain.render import render_ab_machine
from gemm.machine import nvml
from gemm.machine.nvml import ArmMachine, Sample
from gemm.track import abreport, abrun
from gemm.track.gate import GateConfig, Row
from tests.asvfake import write_benchmarks, write_run
from tests.stubrepo import commit_fixed, new_repo

OLD, NEW = "a" * 40, "b" * 40


def process(samples, gpu="NVIDIA H200"):
    """One process's sampler, as ArmMachine.of reads it."""
    return SimpleNamespace(samples=[Sample(*s) for s in samples], gpu=gpu)


# --- an arm's figures ------------------------------------------------------------------------

def test_an_arms_figures_are_over_the_busy_samples_of_all_its_processes():
    first = process([(0, 345, 80, 40, 0, False),          # start-up, GPU idle: not counted
                     (1, 1980, 600, 50, 100, False), (2, 1965, 640, 52, 100, False)])
    second = process([(3, 1755, 700, 61, 99, True), (4, 1740, 699, 63, 100, True),
                      (5, 1760, 701, 62, 100, None)])      # NVML did not say: not counted
    idle = process([(6, 345, 80, 40, 10, False)])         # never busy
    arm = ArmMachine.of([first, second, idle])
    assert arm == ArmMachine(gpu="NVIDIA H200", processes=3, samples=5, sm_mhz_median=1760.0,
                             power_w_median=699.0, temp_c_max=63.0, power_capped_pct=50.0,
                             sm_mhz_by_process=(1972.5, 1755.0, None))
    doc = json.loads(json.dumps(arm.to_dict()))
    assert doc["sm_mhz_by_process"] == [1972.5, 1755.0, None]
    assert ArmMachine.from_dict({**doc, "a later field": 1}) == arm
    assert ArmMachine.of([idle]) is None and ArmMachine.of([]) is None
    assert ArmMachine.from_dict(None) is None and ArmMachine.from_dict({"gpu": "x"}) is None
    odd = ArmMachine.from_dict({**doc, "sm_mhz_median": "fast", "sm_mhz_by_process": 3})
    assert odd.sm_mhz_median is None and odd.sm_mhz_by_process == () and odd.samples == 5
    older = process([(1, 1980, 600, 50, 100)])             # no clock event reasons read
    assert ArmMachine.of([older]).power_capped_pct is None


class FakeSampler:
    """A Sampler that, when its process ends, holds the samples READINGS gives the arm whose
    process it was (the stand-in measure says which)."""
    arm = None
    readings: dict = {}

    def __init__(self, interval=None):
        self.samples, self.gpu = [], "NVIDIA H200"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        n = sum(1 for s in FakeSampler.readings.get("done", []) if s == FakeSampler.arm)
        FakeSampler.readings.setdefault("done", []).append(FakeSampler.arm)
        self.samples = [Sample(*s) for s in FakeSampler.readings[FakeSampler.arm](n)]


def _reference(n):     # every process of the reference: 1980 MHz, 650 W, 50 C, never capped
    return [(0, 345, 90, 45, 0, False)] + [(t, 1980, 650, 50, 100, False) for t in (1, 2, 3)]


def _new(n):           # the new code's n-th process: 1750 + 10 n MHz, 690 W, at the cap
    return [(t, 1750 + 10 * n, 690, 58 + n, 100, True) for t in (1, 2, 3)]


def test_an_ab_run_keeps_each_arms_figures_in_its_rows_effects(monkeypatch):
    """Through the gate's engine (ABRun, R N N R rounds) and abreport.finish, as
    confirm.decide wires them: a 3.3 % slower new arm, confirmed in 2 rounds."""
    monkeypatch.setattr(nvml, "Sampler", FakeSampler)
    monkeypatch.setattr(FakeSampler, "readings", {"c1": _reference, "NEW": _new})

    def measure(arm, what):
        FakeSampler.arm = arm
        v = 30.0 if arm == "c1" else 29.0
        return ({(k, s, m): v for k, sizes in what.items() for s in sizes
                 for m in ("tflops", "pct_of_cublas")}, {None: 1.0})
    row = Row("14_bf16_wgmma_tma", "4096", "tflops", 4, 30.0, 29.0, -0.033, 0.005, "drop?",
              reference="c1", min_effect=0.01)
    machine = nvml.ArmSamples()
    ab = abrun.ABRun([(row, "c1")], GateConfig(), "NEW", machine.sampling(measure),
                     lambda s: None, None)
    ab.run()
    abreport.finish(ab, machine)
    assert row.verdict == "DROP" and ab.n == 2
    assert FakeSampler.readings["done"] == ["c1", "NEW", "NEW", "c1"] * 2
    got = row.effects[0]["machine"]
    assert got == {
        "reference": {"gpu": "NVIDIA H200", "processes": 4, "samples": 12,
                      "sm_mhz_median": 1980.0, "power_w_median": 650.0, "temp_c_max": 50.0,
                      "power_capped_pct": 0.0, "sm_mhz_by_process": [1980.0] * 4},
        "new": {"gpu": "NVIDIA H200", "processes": 4, "samples": 12, "sm_mhz_median": 1765.0,
                "power_w_median": 690.0, "temp_c_max": 61.0, "power_capped_pct": 100.0,
                "sm_mhz_by_process": [1750.0, 1760.0, 1770.0, 1780.0]}}
    # ... which gemm explain reads back from the row (as the report keeps it) and words
    m = from_rows([json.loads(json.dumps(asdict(row)))], "14_bf16_wgmma_tma",
                  "4096x4096x4096", "c1")
    assert m is not None and m.alike is False
    assert m.part() == ("machine over the A/B (reference vs new): SM clock 1980 vs 1765 MHz, "
                        "power 650 vs 690 W, max temp 50 vs 61 C: differ (SM clock -10.9 %; "
                        "only the new arm at its power cap): a machine change candidate, or "
                        "the code's own power draw (at the power cap the clock follows it)")


def test_without_nvml_the_effects_say_null(monkeypatch):
    def broken():
        raise ImportError("no pynvml here")
    monkeypatch.setattr(nvml, "_nvml", broken)
    machine = nvml.ArmSamples()
    sampled = machine.sampling(lambda arm, what: ({"x": 1.0}, {}))
    assert sampled("c1", {}) == ({"x": 1.0}, {}) and sampled("NEW", {}) == ({"x": 1.0}, {})
    assert "no pynvml here" in machine.processes["c1"][0].why
    assert machine.arm("c1") is None and machine.pair("c1", "NEW") is None


# --- the words -------------------------------------------------------------------------------

def arm(mhz, watts=690.0, temp=60.0, capped=0.0):
    return ArmMachine("NVIDIA H200", 4, 40, mhz, watts, temp, capped, (mhz,) * 4)


@pytest.mark.parametrize("new_mhz, alike", [(1980.0, True), (1961.0, True),    # 0.96 %
                                            (1959.0, False), (2000.0, True),    # 1.06 %, 1 %
                                            (2001.0, False)])
def test_the_arms_differ_where_their_sm_clocks_are_more_than_1_percent_apart(new_mhz, alike):
    m = ABMachine(OLD, arm(1980.0), arm(new_mhz))
    assert m.alike is alike
    assert m.part().startswith(f"machine over the A/B (reference vs new): SM clock 1980 vs "
                               f"{new_mhz:.0f} MHz, power 690 vs 690 W, max temp 60 vs 60 C: ")
    assert m.part().endswith(": alike" if alike else ": a machine change candidate")
    assert m.to_dict()["alike"] is alike and m.to_dict()["reference"]["sm_mhz_median"] == 1980.0


def test_one_arm_at_the_power_cap_is_a_difference_both_are_not():
    both = ABMachine(OLD, arm(1755.0, capped=90.0), arm(1760.0, capped=100.0))
    assert both.alike and both.part().endswith(": alike")
    one = ABMachine(OLD, arm(1755.0, capped=10.0), arm(1760.0, capped=80.0))
    assert one.differences() == {"power_capped_pct": "only the new arm at its power cap"}
    assert one.part().endswith("differ (only the new arm at its power cap): a machine change "
                               "candidate, or the code's own power draw (at the power cap the "
                               "clock follows it)")
    unknown = ABMachine(OLD, arm(1755.0, capped=None), arm(1760.0, capped=80.0))
    assert unknown.alike                     # the cap not read on one arm: the clock alone
    half = ABMachine(OLD, arm(1755.0), None)
    assert half.alike is None and half.part() == ("machine over the A/B: NVML sampled the "
                                                  "reference arm only (SM clock 1755 MHz, power "
                                                  "690 W, max temp 60 C)")


def effect(against, ref, new, verdict="DROP"):
    return {"against": against, "verdict": verdict,
            "machine": {"reference": ref.to_dict(), "new": new.to_dict()}}


def drop_row(kernel="09_cp_async_pipeline", size="4096", **kw):
    return {"kernel": kernel, "size": size, "metric": "tflops", "verdict": "DROP", **kw}


def test_the_figures_are_read_from_the_drop_row_against_the_old_commit():
    rows = [drop_row(verdict="noise", effects=[effect(OLD, arm(1.0), arm(1.0))]),
            drop_row(size="2048", effects=[effect(OLD, arm(2.0), arm(2.0))]),
            drop_row(effects=[{"against": NEW, "verdict": "MOOT"},          # none kept
                              effect("c" * 40, arm(3.0), arm(3.0)),       # another commit
                              effect(OLD, arm(1980.0), arm(1755.0))])]
    got = from_rows(rows, "09_cp_async_pipeline", "4096x4096x4096", OLD[:10])
    assert got == ABMachine(OLD, arm(1980.0), arm(1755.0))
    assert from_rows(rows, "09_cp_async_pipeline", "4096", "d" * 40) is None
    assert from_rows(rows, "09_cp_async_pipeline", "4096", None) is None
    assert from_rows([drop_row(effects=[{"against": OLD, "machine": None}])],
                     "09_cp_async_pipeline", "4096", OLD) is None      # sampled nothing
    assert from_rows(None, "09", "4096", OLD) is None


# --- gemm explain with a gate report that keeps them ---------------------------------------

def stand_in_explanation():
    """An Explanation of identical builds, without nvcc."""
    def build(commit):
        return SimpleNamespace(commit=commit, kernel="09_cp_async_pipeline", source_sha256="s",
                               to_dict=lambda: {"rev": commit[:7], "commit": commit})
    return report.Explanation("09_cp_async_pipeline", "4096", build(OLD), build(NEW))


@pytest.mark.parametrize("new_mhz, words", [
    (1975.0, "SM clock 1980 vs 1975 MHz, power 690 vs 690 W, max temp 60 vs 60 C: alike"),
    (1755.0, "SM clock 1980 vs 1755 MHz, power 690 vs 690 W, max temp 60 vs 60 C: differ "
             "(SM clock -11.4 %): a machine change candidate")])
def test_explain_attach_says_the_ab_machine_in_its_summary(tmp_path, monkeypatch, capsys,
                                                          new_mhz, words):
    import gemm.explain
    from gemm.cli.main import main
    from gemm.store import verdicts
    monkeypatch.setattr(gemm.explain, "explain", lambda *a, **k: stand_in_explanation())
    rows = [drop_row(effects=[effect(OLD, arm(1980.0), arm(new_mhz))]),
            drop_row(metric="pct_of_cublas")]
    regress = tmp_path / "regress.json"
    regress.write_text(json.dumps({"schema": "gemm.regress/1", "rows": rows}))
    verdicts.save(tmp_path / "v", "h200", NEW, [dict(r) for r in rows])
    doc = tmp_path / "x.json"
    assert main(["explain", "09", "--size", "4096", "--old", OLD, "--static", "--brief",
                 "--json", str(doc), "--attach-report", str(regress), "--attach",
                 str(tmp_path / "v"), "--machine", "h200"]) == 0
    want = f"{report.IDENTICAL}; machine over the A/B (reference vs new): {words}"
    assert capsys.readouterr().out.strip() == f"09_cp_async_pipeline at 4096: {want}"
    written = json.loads(doc.read_text())
    assert written["summary"] == want and written["ab_machine"]["against"] == OLD
    attached = json.loads(regress.read_text())["rows"]
    assert [r["explanation"]["summary"] for r in attached] == [want, want]
    assert attached[0]["explanation"]["ab_machine"]["new"]["sm_mhz_median"] == new_mhz
    assert attached[0]["explanation"]["ab_machine"]["alike"] is ("alike" in words)
    kept = verdicts.load(tmp_path / "v", "h200", NEW)
    assert kept[("09_cp_async_pipeline", "4096", "tflops")]["explanation"]["summary"] == want
    table = render_ab_machine(from_rows(rows, "09_cp_async_pipeline", "4096", OLD))
    clock = next(ln for ln in table if "SM clock MHz median" in ln)
    cells = clock.split()[clock.split().index("median") + 1:]
    assert cells == ["1980", f"{new_mhz:.0f}"] + (["*"] if "differ" in words else [])
    assert table[-1] == "  the arms: " + ("alike" if "alike" in words else
                                          "differ: SM clock -11.4 %")


def test_explain_without_figures_in_the_report_says_nothing_of_the_ab(tmp_path, monkeypatch,
                                                                      capsys):
    import gemm.explain
    from gemm.cli.main import main
    monkeypatch.setattr(gemm.explain, "explain", lambda *a, **k: stand_in_explanation())
    regress = tmp_path / "regress.json"
    regress.write_text(json.dumps({"rows": [drop_row(effects=[{"against": OLD}])]}))
    assert main(["explain", "09", "--size", "4096", "--old", OLD, "--static", "--brief",
                 "--attach-report", str(regress)]) == 0
    assert capsys.readouterr().out.strip() == f"09_cp_async_pipeline at 4096: {report.IDENTICAL}"
    assert json.loads(regress.read_text())["rows"][0]["explanation"]["ab_machine"] is None


# --- through `gemm regress`, real worktrees and processes, a stand-in pynvml -------------------

def fake_pynvml(mhz=1755, mw=690_000, temp=61, reasons=0x4):
    """A pynvml whose GPU always reads busy at these values."""
    nv = types.ModuleType("pynvml")
    nv.NVML_CLOCK_SM, nv.NVML_TEMPERATURE_GPU = 1, 0
    nv.nvmlInit = lambda: None
    nv.nvmlDeviceGetHandleByIndex = lambda i: "gpu0"
    nv.nvmlDeviceGetName = lambda h: "NVIDIA H200"
    nv.nvmlDeviceGetUUID = lambda h: "GPU-test"
    nv.nvmlDeviceGetClockInfo = lambda h, clock: mhz
    nv.nvmlDeviceGetPowerUsage = lambda h: mw
    nv.nvmlDeviceGetTemperature = lambda h, sensor: temp
    nv.nvmlDeviceGetUtilizationRates = lambda h: SimpleNamespace(gpu=100)
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reasons
    return nv


def test_the_gate_report_keeps_each_arms_figures(tmp_path, gpu_here, monkeypatch):
    from gemm.cli import main as cli_main
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    repo = new_repo(tmp_path / "repo")
    shas = []
    for i, v in enumerate([30.0, 30.0, 30.0, 29.0]):
        shas.append(commit_fixed(repo, v, f"c{i}"))
    res = tmp_path / "results"
    write_benchmarks(res, ["05_2d"], ["4096"])
    for i, (sha, v) in enumerate(zip(shas, [30.0, 30.2, 30.0, 29.0])):
        write_run(res, sha, 1_000_000 + i, {("05_2d", "4096"): v}, ["05_2d"], ["4096"])
    out = tmp_path / "regress.json"
    assert cli_main(["regress", "--results", str(res), "--machine", "h200", "--repo", str(repo),
                     "--verdicts", str(tmp_path / "verdicts"), "--calibration",
                     str(tmp_path / "calibration"), "--no-anchor", "--record-verdicts",
                     "--json", str(out)]) == 1
    rows = json.loads(out.read_text())["rows"]
    tf = next(r for r in rows if r["metric"] == "tflops")
    assert tf["verdict"] == "DROP" and tf["effects"][0]["against"] == shas[2]
    got = tf["effects"][0]["machine"]
    for side in ("reference", "new"):
        m = got[side]
        assert (m["gpu"], m["processes"], m["sm_mhz_median"], m["power_w_median"],
                m["temp_c_max"], m["power_capped_pct"]) == ("NVIDIA H200", 4, 1755.0, 690.0,
                                                            61.0, 100.0), side
        assert m["samples"] >= 4 and m["sm_mhz_by_process"] == [1755.0] * 4
    kept = json.loads((tmp_path / "verdicts" / "h200" / f"{shas[3]}.json").read_text())
    assert next(r for r in kept["rows"] if r["metric"] == "tflops")["effects"][0]["machine"] == got
    m = from_rows(rows, "05_2d", "4096", shas[2])
    assert m.alike and m.part().endswith("max temp 61 vs 61 C: alike")


def test_each_arms_own_timer_clocks_are_kept_per_target_and_said_where_they_differ(
        tmp_path, monkeypatch):
    """The SM clock each arm's own timer read over a target's samples (the gemm.measure/1
    records' clocks_mhz), per process through abtest.in_trees, kept in the effect as the median
    over the arm's processes and said in the note where the kernel's differ by 2 % or more:
    unlike the NVML figures, they cover that target's samples only."""
    from gemm.track import abtest

    def doc(kernel_mhz, baseline_mhz):
        return {"records": [{"role": "kernel", "kernel": "14_bf16_wgmma_tma", "size": "2048",
                             "kernel_time": {"clocks_mhz": [kernel_mhz] * 3 + [None]},
                             "baseline_time": {"clocks_mhz": [baseline_mhz] * 3}}]}

    def fake_measure(tree, what, walls=None, clocks=None, **kw):
        d = doc(1620, 1650) if tree == "ref-tree" else doc(1425, 1650)
        for key, got in abtest.clocks_of(d).items():
            for who, mhz in got.items():
                clocks.setdefault(key, {}).setdefault(who, []).append(mhz)
        v = 30.0 if tree == "ref-tree" else 29.0
        return {(k, s, m): v for k, sizes in what.items() for s in sizes
                for m in ("tflops", "pct_of_cublas")}
    monkeypatch.setattr(abtest, "measure", fake_measure)
    row = Row("14_bf16_wgmma_tma", "2048", "tflops", 4, 30.0, 29.0, -0.033, 0.005, "drop?",
              reference="c1", min_effect=0.01)
    clocks: dict = {}
    ab = abrun.ABRun([(row, "c1")], GateConfig(), "NEW",
                     abtest.in_trees({"c1": "ref-tree", "NEW": "new-tree"}, clocks),
                     lambda s: None, None)
    ab.run()
    abreport.finish(ab, None, clocks)
    got = row.effects[0]["clocks"]
    assert got == {"reference": {"kernel": 1620, "baseline": 1650},
                   "new": {"kernel": 1425, "baseline": 1650}}
    assert "the kernel's samples at 1620 MHz in the reference, 1425 MHz in the new code" in row.note
    assert abtest.clocks_of({"records": [{"role": "kernel", "kernel": "k", "size": "1",
                                          "kernel_time": {"clocks_mhz": [None]}}]}) == {}


def test_explain_reads_each_arms_own_timer_clocks_of_the_target():
    """An effect's per-target clocks (the arms' own timers over the kernel's samples) join the
    NVML figures in gemm explain's words, and tell the arms apart where those, over whole
    processes of other targets too, look alike."""
    arm = {"gpu": "NVIDIA H200", "processes": 2, "samples": 40, "sm_mhz_median": 1620.0,
           "power_w_median": 680.0, "temp_c_max": 58.0, "power_capped_pct": 97.0,
           "sm_mhz_by_process": [1620.0, 1620.0]}
    row = {"kernel": "14_bf16_wgmma_tma", "size": "2048", "metric": "tflops", "verdict": "DROP",
           "effects": [{"against": OLD, "machine": {"reference": arm, "new": arm},
                        "clocks": {"reference": {"kernel": 1620, "baseline": 1650},
                                   "new": {"kernel": 1425, "baseline": 1650}}}]}
    m = from_rows([row], "14_bf16_wgmma_tma", "2048", OLD[:10])
    assert m is not None and m.kernel_mhz == (1620, 1425) and m.alike is False
    assert "the kernel's own samples at 1620 vs 1425 MHz" in m.part()
    assert "the kernel's own samples' clock -12.0 %" in m.part()
    del row["effects"][0]["clocks"]
    assert from_rows([row], "14_bf16_wgmma_tma", "2048", OLD[:10]).alike is True


def test_one_rule_tells_two_clocks_apart():
    """gemm.machine.nvml.clocks_differ: more than 1 % of the larger apart, the rule of the
    gate's per-target clock note and of gemm explain's machine lines (they were 2 % and 1 %)."""
    from gemm.machine.nvml import clocks_differ
    from gemm.track.abreport import _clock_note
    assert not clocks_differ(1000, 990) and clocks_differ(1000, 989) and clocks_differ(989, 1000)
    assert not clocks_differ(None, 1000) and not clocks_differ(0, 1000)
    assert _clock_note({"kernel": 1980}, {"kernel": 1950}) != ""       # 1.5 %: said now
    assert _clock_note({"kernel": 1980}, {"kernel": 1970}) == ""
