"""`gemm explain`'s GPU part without a GPU: ncu's raw CSV read by metric name (a capture from
the H200, tests/data/ncu_raw_14_h200.csv, and a hand-written variant,
tests/data/ncu_raw_handwritten.csv), the profiling command and its retry through a fake `ncu`,
the machine's samples, the counters' diff and the summary's words, each side's launcher, the
graceful absence of a GPU or of ncu, the JSON document and the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import gemm.explain as ge
from gemm.explain import ncu, report, runs
from gemm.machine import nvml
from gemm.explain.gpureport import Counters, GpuReport, SideRun, gpu_parts, machine_part
from gemm.explain.render import render, render_gpu

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CAPTURE = (DATA / "ncu_raw_14_h200.csv").read_text()
HANDWRITTEN = (DATA / "ncu_raw_handwritten.csv").read_text()
QUERY = """Chip gh100
--------------------------------------------- --------------- ------ -----------------------
Metric Name                                   Metric Type     Metric Unit Metric Description
--------------------------------------------- --------------- ------ -----------------------
CTC.TriageCompute.ctc__rx_bytes               Counter         byte   # of bytes of CTC RX
dram__throughput                              Throughput      %      DRAM throughput
gpc__cycles_elapsed                           Counter         cycle  # of cycles elapsed on GPC
gpu__time_duration                            Counter         ns     total duration
lts__t_sector_hit_rate                        Ratio                  proportion of L2 sector
                                                                     lookups that hit
lts__throughput                               Throughput      %      L2 throughput
TPC.TriageCompute.sm__pipe_tensor_op_hmma_cycles_active Counter cycle # of cycles
sm__throughput                                Throughput      %      SM throughput
sm__warps_active                              Counter         warp   # of warps active
smsp__issue_active                            Counter         cycle  # of cycles issued
smsp__average_warps_issue_stalled_barrier_per_issue_active Ratio  inst   # of warps stalled
"""


# --- ncu's CSV -------------------------------------------------------------------------------

def test_the_h200_capture_is_read_by_metric_name():
    rows = ncu.parse_raw(CAPTURE)
    assert [r.kernel for r in rows] == ["sgemm_bf16_wgmma_tma"]
    values, extra, stalls = ncu.read(rows[0])
    assert values == {"sm_throughput": 82.98, "tensor_pipe": 87.85, "issue_active": 17.88,
                      "occupancy": 14.03, "dram": 22.05, "l2": 60.0, "l2_hit": 82.55}
    assert extra["metric"]["tensor_pipe"] == \
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
    assert extra["duration_ms"] == pytest.approx(0.190752)          # 190,752 ns
    assert extra["sm_mhz"] == pytest.approx(1605.536, abs=0.01)      # 1,605,535,590.71 hz
    assert "selected" not in stalls and len(stalls) == 18
    assert sorted(stalls, key=lambda k: -stalls[k])[:3] == ["barrier", "wait", "long_scoreboard"]
    assert stalls["barrier"] == pytest.approx(4.16)
    assert rows[0].metrics["device__attribute_clock_rate"] == (1980000.0, "")


def test_a_handwritten_variant_other_locales_and_sampled_stalls():
    rows = ncu.parse_raw(HANDWRITTEN)
    assert [r.kernel for r in rows] == ["sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32",
                                        "sgemm_pipeline_main"]
    values, extra, stalls = ncu.read(rows[1])
    assert values["sm_throughput"] == 82.5 and values["occupancy"] == 12.25
    assert values["l2_hit"] == 88.75 and values["dram"] is None      # n/a
    assert values["tensor_pipe"] is None and values["l2"] is None    # not in the file
    assert extra["duration_ms"] == pytest.approx(0.366816)           # no unit: ns
    assert stalls == {"barrier": 1200.0, "long_scoreboard": 600.0}   # sampled; no selected
    assert ncu.parse_raw("no table here\n==PROF== nothing") == []


def test_numbers_as_ncu_prints_them():
    for text, value in [("1,980,000", 1980000.0), ("21.826443", 21.826443), ("82,5", 82.5),
                        ("1.234,5", 1234.5), ("1,605,535,590.71", 1605535590.71),
                        ('"7"', 7.0), ("n/a", None), ("", None), ("PolicySpread", None),
                        ("-3", -3.0), ("1\u202f024", 1024.0)]:
        assert ncu.number(text) == value, text


def test_the_query_lists_base_names_and_filters_the_request():
    known = ncu.parse_query(QUERY)
    assert {"ctc__rx_bytes", "sm__pipe_tensor_op_hmma_cycles_active", "sm__throughput",
            "lts__t_sector_hit_rate"} <= known
    assert "Metric" not in known and "lookups" not in known
    asked = ncu.available(ncu.wanted(), known)
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" in asked
    assert "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active" not in asked
    assert ncu.STALL.format("barrier") in asked and ncu.STALL.format("wait") not in asked
    assert ncu.available(["a__b.sum"], set()) == ["a__b.sum"]       # no query: ask for all


def test_refused_metrics_and_why_nothing_was_profiled():
    assert ncu.refused("==ERROR== Failed to find metric sm__foo_bar.avg.pct_of_peak\n"
                       "==PROF== Disconnected") == {"sm__foo_bar.avg.pct_of_peak"}
    assert ncu.refused("==WARNING== metric sm__x is slow") == set()
    perm = ncu.why_not("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "e",
                       3, 1)
    assert "ERR_NVGPUCTRPERM" in perm and "counters" in perm
    none = ncu.why_not("==WARNING== No kernels were profiled.", "sgemm_x", 3, 0)
    assert "no launch of sgemm_x" in none and "skips 3" in none


# --- a fake ncu --------------------------------------------------------------------------------

def fake_ncu(tmp_path: Path, behaviour: str = "ok", query: str = QUERY) -> Path:
    """An `ncu` that logs its arguments and prints the capture (ok), refuses the gmma metric
    once asked for it (refuse), or fails as ncu does without access to the counters (perm)."""
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    (d / "query.txt").write_text(query)
    (d / "capture.csv").write_text(CAPTURE)
    script = d / "ncu"
    script.write_text(f"""#!{sys.executable}
import sys
here = {str(d)!r}
args = sys.argv[1:]
open(here + "/calls.log", "a").write(repr(args) + "\\n")
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2099.1.0.0 (build 1)")
    sys.exit(0)
if args == ["--query-metrics"]:
    text = open(here + "/query.txt").read()
    print(text)
    sys.exit(0 if text else 1)
metrics = args[args.index("--metrics") + 1].split(",")
bad = "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
if {behaviour!r} == "refuse" and bad in metrics:
    print("==ERROR== Failed to find metric " + bad)
    sys.exit(1)
if {behaviour!r} == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
          "Performance Counters on the target device 0.")
    sys.exit(1)
print(open(here + "/capture.csv").read())
""")
    script.chmod(0o755)
    return script


def calls(ncu_path: Path) -> list:
    import ast
    return [ast.literal_eval(ln) for ln in (ncu_path.parent / "calls.log").read_text().splitlines()]


def test_profile_leaves_the_clocks_alone_and_filters_by_entry(tmp_path):
    fake = fake_ncu(tmp_path)
    p = ncu.profile(str(fake), ["python3", "-m", "gemm.measure.once", "14"],
                    "sgemm_bf16_wgmma_tma", 3, ncu.parse_query(QUERY))
    assert p.row is not None and not p.dropped and not p.why
    args = calls(fake)[-1]
    at = {a: args[i + 1] for i, a in enumerate(args[:-1])}
    assert at["--clock-control"] == "none" and at["--target-processes"] == "all"
    assert at["-k"] == "regex:^sgemm_bf16_wgmma_tma$" and at["--launch-skip"] == "3"
    assert at["--launch-count"] == "1" and at["--page"] == "raw" and "--csv" in args
    assert at["--section"] == "WarpStateStats"
    assert "sm__pipe_tensor_op_gmma_cycles_active" not in at["--metrics"]   # the query
    assert args[-4:] == ["python3", "-m", "gemm.measure.once", "14"]
    assert p.command[:1] == [str(fake)]


def test_a_refused_metric_is_dropped_and_the_run_retried(tmp_path):
    fake = fake_ncu(tmp_path, "refuse", query="")     # the query says nothing: ask for all
    p = ncu.profile(str(fake), ["app"], "sgemm_bf16_wgmma_tma", 3, ncu.query(str(fake)))
    assert p.row is not None
    assert p.dropped == ["sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"]
    assert len(calls(fake)) == 3                      # the query, the refused run, the retry


def test_no_access_to_the_counters_is_one_sentence(tmp_path):
    fake = fake_ncu(tmp_path, "perm")
    p = ncu.profile(str(fake), ["app"], "sgemm_bf16_wgmma_tma", 3, set())
    assert p.row is None and "ERR_NVGPUCTRPERM" in p.why


# --- the machine --------------------------------------------------------------------------------

def test_machine_samples_inside_the_window_or_where_busy():
    samples = [(0.0, 345.0, 80.0, 36.0, 0.0), (1.0, 1980.0, 600.0, 50.0, 100.0),
               (1.5, 1755.0, 650.0, 52.0, 100.0), (2.0, 1980.0, 640.0, 51.0, 100.0),
               (3.0, 345.0, 90.0, 45.0, 20.0)]
    s = nvml.summarise(samples, [0.9, 2.1], "NVIDIA H200", "GPU-1")
    assert s["samples"] == 3 and s["of"] == "while it ran"
    assert s["sm_mhz"] == {"min": 1755.0, "median": 1980.0, "max": 1980.0}
    assert s["power_w"]["median"] == 640.0 and s["temp_c"]["max"] == 52.0
    busy = nvml.summarise(samples)
    assert busy["samples"] == 3 and "busy" in busy["of"]
    assert nvml.summarise(samples, [5.0, 6.0]) is None and nvml.summarise([]) is None


def test_without_nvml_the_sampler_says_why(monkeypatch):
    def broken():
        raise ImportError("no pynvml here")
    monkeypatch.setattr(nvml, "_nvml", broken)
    with nvml.Sampler() as s:
        pass
    assert s.samples == [] and "no NVML" in s.why and s.summary() is None


# --- the diff and the summary --------------------------------------------------------------------

def side(values: dict, stalls: dict, ms: float, mhz: float, watts: float, temp: float) -> SideRun:
    stat = lambda v: {"min": v, "median": v, "max": v}
    return SideRun(ge.runs.ONCE, time_ms=ms,
                   machine={"sm_mhz": stat(mhz), "power_w": stat(watts), "temp_c": stat(temp)},
                   counters=Counters("sgemm_x", values, stalls, 0.3, mhz))


OLD = {"sm_throughput": 70.0, "tensor_pipe": 81.0, "issue_active": 40.0, "occupancy": 48.0,
       "dram": 30.0, "l2": 50.0, "l2_hit": 80.0}
NEW = {**OLD, "sm_throughput": 69.0, "tensor_pipe": 78.0, "occupancy": 24.0, "dram": 35.0}
OLD_STALLS = {"barrier": 1.2, "long_scoreboard": 3.6, "wait": 3.2, "mio_throttle": 2.0}
NEW_STALLS = {"barrier": 3.1, "long_scoreboard": 3.0, "wait": 2.9, "mio_throttle": 1.0}


def report_of(tensor=True, same_machine=False) -> GpuReport:
    new_clock, new_temp = (1980.0, 45.0) if same_machine else (1755.0, 52.0)
    return GpuReport(device="NVIDIA H200", ncu="2025.3.1.0", tensor=tensor,
                     old=side(OLD, OLD_STALLS, 0.300, 1980.0, 650.0, 45.0),
                     new=side(NEW, NEW_STALLS, 0.330, new_clock, 660.0, new_temp))


def test_the_summary_names_the_largest_counter_stall_and_machine_differences():
    parts = gpu_parts(report_of())
    assert parts == ["timed here 0.300 -> 0.330 ms per launch (+10.0 %)",
                     "achieved occupancy 48 % -> 24 %", "DRAM throughput 30 % -> 35 %",
                     "tensor pipe 81 % -> 78 %", "top stall: barrier 12 % -> 31 %",
                     "machine: SM clock 1980 -> 1755 MHz, temperature 45 -> 52 C (medians "
                     "while each side ran)"]
    assert not any("tensor" in p for p in gpu_parts(report_of(tensor=False)))
    assert not any("SM throughput" in p for p in parts)            # 1 point: not named
    d = report_of().diff()
    assert d["counters"]["occupancy"] == [48.0, 24.0]
    assert d["stalls"]["barrier"] == [12.0, 31.0] and d["time_ms"] == [0.3, 0.33]
    assert d["machine"]["sm_mhz"] == [1980.0, 1755.0]


def test_a_stall_that_moves_without_leading_and_a_top_that_changes():
    g = report_of()
    g.new.counters.stalls = {"barrier": 1.2, "long_scoreboard": 4.0, "wait": 2.0,
                             "mio_throttle": 2.8}          # wait moved most; not the top
    assert "stall: wait 32 % -> 20 %" in gpu_parts(g)
    g.new.counters.stalls = {"barrier": 1.2, "long_scoreboard": 3.4, "wait": 3.45,
                             "mio_throttle": 1.95}         # none moved 3 points; a new top
    assert "top stall: long_scoreboard -> wait" in gpu_parts(g)


def test_identical_code_on_the_same_machine_says_so():
    g = report_of(same_machine=True)
    g.new.counters.values = dict(OLD)
    g.new.counters.stalls = dict(OLD_STALLS)
    g.new.time_ms = 0.301
    assert machine_part(g, identical=True) == \
        "machine: no difference in SM clock, power or temperature (1980 MHz)"
    assert machine_part(g) == ""
    assert gpu_parts(g, identical=True) == [
        "timed here 0.300 -> 0.301 ms per launch (+0.3 %)",
        "machine: no difference in SM clock, power or temperature (1980 MHz)"]
    g.old.launcher = runs.BENCH
    g.new.machine["power_w"] = {"min": 400.0, "median": 400.0, "max": 400.0}
    assert machine_part(g, identical=True) == (
        "machine: not alike, the old side ran through gemm bench and the new through "
        "gemm.measure.once (medians: SM clock 1980 -> 1980 MHz, power 650 -> 400 W, "
        "temperature 45 -> 45 C)")


def test_a_side_without_counters_adds_no_counter_words():
    g = report_of()
    g.new.counters = Counters("sgemm_x", error="ncu: profiling failed")
    parts = gpu_parts(g)
    assert parts[0].startswith("timed here") and parts[-1].startswith("machine:")
    assert len(parts) == 2
    assert gpu_parts(GpuReport(why="no GPU answers here")) == []
    assert any("not measured: ncu: profiling failed" in ln for ln in render_gpu(g))


# --- the sides ------------------------------------------------------------------------------------

def fake_build(kernel="14_bf16_wgmma_tma", refused="", tensor=4):
    launch = SimpleNamespace(entries=((kernel and "sgemm_edge", (1, 1, 1)),
                                      ("sgemm_bf16_wgmma_tma", (132, 1, 1))),
                             refused=refused)
    return SimpleNamespace(kernel=kernel, rev="HEAD", launch=launch,
                           entries={"sgemm_bf16_wgmma_tma": SimpleNamespace(mix={"tensor": tensor})})


def tree(tmp_path: Path, once: bool) -> Path:
    root = tmp_path / ("new" if once else "old")
    (root / "gemm" / "measure").mkdir(parents=True)
    if once:
        (root / "gemm" / "measure" / "once.py").write_text("")
    return root


def test_each_side_launches_with_what_its_tree_has(tmp_path):
    new = runs.Side("new", tree(tmp_path, True), fake_build(), {"STAGES": 3}, "4096")
    old = runs.Side("old", tree(tmp_path, False), fake_build(), {}, "4096")
    assert runs.profiled_entry(new.build) == "sgemm_bf16_wgmma_tma"       # the most blocks
    cmd = runs.app(new, 4, 0.0)
    assert cmd[1:5] == ["-m", "gemm.measure.once", "14_bf16_wgmma_tma", "--size"]
    assert "--define=STAGES=3" in cmd and cmd[-4:] == ["--launches", "4", "--seconds", "0.0"]
    assert runs.app(old, 4, 1.0, "/x.json")[1:] == ["-m", "gemm", "bench", "-k",
                                                    "14_bf16_wgmma_tma", "--sizes", "4096",
                                                    "--json", "/x.json"]
    assert runs.cannot(new) == "" and runs.cannot(old) == ""
    old.overrides = {"STAGES": 4}
    assert "predates gemm.measure.once" in runs.cannot(old) and "STAGES=4" in runs.cannot(old)
    assert "refuses" in runs.cannot(runs.Side("x", new.root, fake_build(refused="K % 64"), {},
                                              "100"))
    assert "no checkout" in runs.cannot(runs.Side("x", None, fake_build(), {}, "4096"))
    env = runs.env_for(new.root)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(new.root)
    assert runs._in_tree({"package": str(new.root / "gemm" / "__init__.py")}, new.root) == ""
    assert "not from" in runs._in_tree({"package": "/elsewhere/gemm/__init__.py"}, new.root)
    doc = runs.once_doc('noise\n@@ONCE {"ms": 0.25, "busy": [1, 2]}\n')
    assert doc == {"ms": 0.25, "busy": [1, 2]} and runs.once_doc("@@ONCE {") is None
    bench = {"records": [{"kernel": "cublas_bf16_nk", "role": "baseline",
                          "kernel_time": {"samples_s": [1.0]}},
                         {"kernel": "14_bf16_wgmma_tma", "role": "kernel",
                          "kernel_time": {"samples_s": [3e-4, 1e-4, 2e-4]}}]}
    assert runs.bench_ms(bench, "14_bf16_wgmma_tma") == pytest.approx(0.2)


def fake_timed(s, run, opts):
    run.launcher = runs.ONCE
    run.time_ms = {"old": 0.30, "new": 0.33}[s.name]
    run.machine = {"sm_mhz": {"min": 1980.0, "median": 1980.0, "max": 1980.0}}


def test_no_ncu_on_the_path_is_a_line_not_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))                 # nothing there: no ncu
    monkeypatch.setattr(nvml, "gpu_here", lambda: (True, "NVIDIA H200"))
    monkeypatch.setattr(runs, "timed", fake_timed)
    sides = [runs.Side(n, tree(tmp_path / n, True), fake_build(), {}, "4096")
             for n in ("old", "new")]
    g = runs.measure(*sides, runs.GpuOptions())
    assert g.ran and g.ncu == "" and g.counters_why == "ncu (Nsight Compute) is not on the PATH"
    assert g.old.counters is None and g.new.time_ms == 0.33
    assert "  counters: not measured: ncu (Nsight Compute) is not on the PATH" in render_gpu(g)
    assert gpu_parts(g) == ["timed here 0.300 -> 0.330 ms per launch (+10.0 %)"]
    g = runs.measure(*sides, runs.GpuOptions(counters=False))
    assert g.counters_why == "not asked for (--no-counters)"


def test_counters_through_a_fake_ncu(tmp_path, monkeypatch):
    fake = fake_ncu(tmp_path)
    monkeypatch.setenv("PATH", str(fake.parent) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setattr(nvml, "gpu_here", lambda: (True, "NVIDIA H200"))
    monkeypatch.setattr(runs, "timed", fake_timed)
    sides = [runs.Side(n, tree(tmp_path / n, True), fake_build(), {}, "4096")
             for n in ("old", "new")]
    out = tmp_path / "ncu.txt"
    g = runs.measure(*sides, runs.GpuOptions(ncu_output=str(out)))
    assert g.ncu == "2099.1.0.0" and g.tensor
    c = g.new.counters
    assert c.entry == "sgemm_bf16_wgmma_tma" and not c.error and c.values["tensor_pipe"] == 87.85
    assert c.command.startswith(str(fake)) and "--clock-control none" in c.command
    assert c.missing == []
    assert out.read_text().count("==== gemm explain: the ") == 2
    table = "\n".join(render_gpu(g))
    assert "tensor pipe" in table and "barrier" in table and "1606 MHz" in table


def test_a_side_that_cannot_run_is_said_and_not_profiled(tmp_path, monkeypatch):
    fake = fake_ncu(tmp_path)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.setattr(nvml, "gpu_here", lambda: (True, "NVIDIA H200"))
    monkeypatch.setattr(runs, "timed", fake_timed)
    old = runs.Side("old", tree(tmp_path / "o", False), fake_build(), {"STAGES": 4}, "4096")
    new = runs.Side("new", tree(tmp_path / "n", True), fake_build(), {"STAGES": 3}, "4096")
    g = runs.measure(old, new, runs.GpuOptions())
    assert "predates" in g.old.error and g.old.counters is None and g.new.counters is not None
    assert any(ln.startswith("  old: not run: its tree predates") for ln in render_gpu(g))
    assert not any(p.startswith("timed here") for p in gpu_parts(g))


# --- the whole explanation, its JSON and the CLI ------------------------------------------------------

def test_no_gpu_leaves_a_static_report_that_says_why(tools, monkeypatch):
    monkeypatch.setattr(nvml, "gpu_here", lambda: (False, "NVML: no driver; no nvidia-smi"))
    ex = ge.explain("14", "4096", old=".", new=".", repo=ROOT, old_defines={"STAGES": 4},
                    new_defines={"STAGES": 4}, on_gpu=runs.GpuOptions())
    assert ex.summary == report.IDENTICAL and not ex.gpu.ran
    doc = ex.to_json()
    assert doc["mode"] == "static" and doc["gpu"]["why"].startswith("no GPU answers here")
    assert "static only: no GPU answers here" in render(ex).splitlines()[0]
    assert ge.explain("14", "4096", old=".", new=".", repo=ROOT).to_json()["gpu"] is None


def test_the_json_and_the_table_with_the_gpu(tools, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(ge, "measure", lambda old, new, opts, log: report_of())
    from gemm.cli.main import main
    path = tmp_path / "x.json"
    assert main(["explain", "14", "--size", "4096", "--new", ".", "--repo", str(ROOT),
                 "--define", "STAGES=4", "--json", str(path)]) == 0
    text = capsys.readouterr().out
    assert "static, and run on NVIDIA H200" in text.splitlines()[0]
    assert "achieved occupancy" in text and "warp stalls" in text
    doc = json.loads(path.read_text())
    assert doc["schema"] == "gemm.explain/1" and doc["mode"] == "gpu"
    g = doc["gpu"]
    assert set(g) == {"why", "device", "ncu", "counters_why", "old", "new", "diff"}
    assert set(g["new"]) == {"launcher", "error", "time_ms", "machine", "machine_why",
                             "counters"}
    c = g["new"]["counters"]
    assert set(c) == {"entry", "error", "values", "stalls", "duration_ms", "sm_mhz",
                      "metrics", "missing", "command"}
    assert c["values"]["occupancy"] == 24.0 and c["stalls"]["barrier"]["share"] == 31.0
    assert list(c["stalls"])[0] == "barrier"                          # largest first
    assert set(g["diff"]) == {"time_ms", "counters", "stalls", "machine"}
    assert doc["summary"].startswith(report.IDENTICAL + "; timed here 0.300 -> 0.330")
    assert "achieved occupancy 48 % -> 24 %" in doc["summary"]
    assert main(["explain", "14", "--size", "4096", "--static", "--counters"]) == 2
    assert "not with --counters" in capsys.readouterr().err


def test_the_gpu_modules_import_without_gpu_libraries():
    code = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pycuda", "nvmath", "cuda", "pynvml"):
            raise ImportError(f"{name} is blocked")
sys.meta_path.insert(0, Block())
import gemm.explain, gemm.explain.runs, gemm.machine.nvml, gemm.explain.ncu, gemm.measure.once
from gemm.machine import nvml
ok, why = nvml.gpu_here()
assert not ok and "blocked" in why, why
sys.exit(gemm.measure.once.main(["14", "--size", "64"]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PATH": "/nonexistent"})
    assert out.returncode == 4, out.stderr[-2000:]
    assert "gemm.measure.once: no GPU" in out.stderr and "Traceback" not in out.stderr


def test_once_refuses_bad_defines_and_kernels_in_one_sentence():
    code = ("import sys, gemm.measure.once as o; "
            "sys.exit(o.main(sys.argv[1:]))")
    bad = subprocess.run([sys.executable, "-c", code, "14", "--size", "64", "--define", "X"],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "NAME=INTEGER" in bad.stderr
    unknown = subprocess.run([sys.executable, "-c", code, "99_nope", "--size", "64"],
                             capture_output=True, text=True, cwd=ROOT)
    assert unknown.returncode == 2 and "unknown kernel" in unknown.stderr


def test_ci_takes_the_gpu_path_where_ncu_and_a_gpu_answer(tools, tmp_path):
    """Fake ncu and nvidia-smi: ci/explain.sh runs explain without --static; whatever the
    GPU's part finds here, the line is the static summary's and the job does not fail."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    sha = head.stdout.strip()
    fake = fake_ncu(tmp_path)
    smi = fake.parent / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\n")
    smi.chmod(0o755)
    rows = [{"kernel": "14_bf16_wgmma_tma", "size": "4096", "verdict": "DROP",
             "unconfirmed": False, "effects": [{"against": sha, "verdict": "DROP"}]}]
    (tmp_path / "regress.json").write_text(json.dumps({"rows": rows}))
    env = {**os.environ, "OUT": str(tmp_path), "EXPLAIN_TIMEOUT_S": "200",
           "PATH": str(fake.parent) + os.pathsep + os.environ.get("PATH", "")}
    out = subprocess.run(["bash", str(ROOT / "ci" / "explain.sh")], capture_output=True,
                         text=True, env=env, timeout=400)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith(f"explain: 14_bf16_wgmma_tma at 4096: {report.IDENTICAL}"), line
    log = (tmp_path / "explain" / "14_bf16_wgmma_tma-4096.log").read_text()
    assert "explain: timing the old side" in log
    assert json.loads((tmp_path / "explain" / "14_bf16_wgmma_tma-4096.json").read_text())["gpu"]
