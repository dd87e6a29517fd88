"""`gemm explain` (gemm/explain): the SASS and resource parsers on captured text, the
occupancy arithmetic, and real builds compared (nvcc + cuobjdump, no GPU; skipped with the
reason where either is missing): 14 with STAGES 4 vs 3, 09 with a barrier added in a commit,
with STAGES 3 vs 2 and with MIN_BLOCKS 1 vs 2, identical builds, the CLI and ci/explain.sh."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gemm.explain import build, explain, report, resources as res, sass

ROOT = Path(__file__).resolve().parents[1]

# cuobjdump --dump-sass of 14_bf16_wgmma_tma (nvcc 13.0, sm_90a), cut down: a spin loop, the
# K loop [0x3f0, 0x920], the end, and an out-of-line wait stub that branches back (not a loop)
SNIPPET = """
\tcode for sm_90a
\t\tFunction : sgemm_bf16_wgmma_tma
\t.headerflags\t@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0300*/                   WARPSYNC.ALL ;                                          /* 0x0000000000007948 */
                                                                                           /* 0x000fe20000000800 */
        /*0310*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8 ;                /* 0x000000e8000079c8 */
        /*0320*/                   PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x0 ;              /* 0x000000000000781c */
        /*0330*/              @!P0 BRA 0x300 ;                                             /* 0xfffffffc00f08947 */
        /*0360*/               @P0 EXIT ;                                                  /* 0x000000000000094d */
        /*03f0*/                   S2UR UR14, SR_CgaCtaId ;                                /* 0x00000000000e79c3 */
        /*04b0*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR7], R4 ;          /* 0x00000004ff0075a7 */
        /*04c0*/              @!P0 BRA 0xe750 ;                                            /* 0x000000e000a08947 */
        /*04d0*/                   WARPGROUP.ARRIVE ;                                      /* 0x0000000000007948 */
        /*06a0*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24, UP0 ;   /* 0x03e00000101879f0 */
        /*06b0*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR20], R24, UP0 ;   /* 0x03e00000101879f0 */
        /*07d0*/                   IMAD.IADD R5, R5, 0x1, R12 ;                            /* 0x00000001050 */
        /*07e0*/                   LEA R6, R5, UR4, 0x3 ;                                  /* 0x00000001050 */
        /*08c0*/                   SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR8], RZ ;               /* 0x000000ffffff79a7 */
        /*0920*/              @!P0 BRA 0x3f0 ;                                             /* 0xfffffff800b08947 */
        /*0930*/                   STG.E desc[UR6][R2.64], R24 ;                           /* 0x00000018 */
        /*0940*/                   FFMA R7, R24, c[0x0][0x38], RZ ;                        /* 0x00000018 */
        /*dee0*/                   EXIT ;                                                  /* 0x000000000000794d */
        /*e750*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR7], R4 ;          /* 0x00000004ff0075a7 */
        /*e760*/              @!P0 BRA 0xe750 ;                                            /* 0xfffffffc00f88947 */
        /*e770*/                   BRA 0x4d0 ;                                             /* 0xffffff1c00547947 */
        /*e7b0*/                   BRA 0xe7b0;                                             /* 0xfffffffc00fc7947 */
"""

PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'sgemm_pipeline_main' for 'sm_90'
ptxas info    : Function properties for sgemm_pipeline_main
    1064 bytes stack frame, 2744 bytes spill stores, 3024 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 1064 bytes cumulative stack size, 37248 bytes smem
"""
USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function sgemm_pipeline_main:
  REG:245 STACK:8 SHARED:38272 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


# --- parsers (no tools) -------------------------------------------------------------------

def test_sass_parser_reads_functions_opcodes_predicates_and_targets():
    fn = sass.parse_sass(SNIPPET)["sgemm_bf16_wgmma_tma"]
    assert len(fn.instrs) == 22
    hg = [i for i in fn.instrs if i.base == "HGMMA"]
    assert hg[0].opcode == "HGMMA.64x256x16.F32.BF16" and hg[0].operands.startswith("R24,")
    br = next(i for i in fn.instrs if i.addr == 0x920)
    assert (br.pred, br.target) == ("@!P0", 0x3f0)
    assert sass.classify("LDGSTS.E.BYPASS.128") == sass.InstrClass.GLOBAL_LOAD
    assert sass.classify("UTMALDG.2D") == sass.InstrClass.GLOBAL_LOAD
    assert sass.classify("BAR.SYNC.DEFER_BLOCKING") == sass.InstrClass.BARRIER
    assert sass.classify("ULEA") == sass.classify("IMAD.IADD") == sass.InstrClass.INT
    assert sass.classify("LDSM.16.M88.4") == sass.InstrClass.SHARED_LOAD
    assert sass.classify("STL.64") == sass.InstrClass.LOCAL
    m = sass.mix(fn.instrs)
    assert list(m) == [c.value for c in sass.InstrClass] and sum(m.values()) == 22
    assert (m["tensor"], m["ffma"], m["store"], m["barrier"]) == (2, 1, 1, 5)


def test_the_k_loop_is_the_innermost_loop_with_the_tensor_work():
    fn = sass.parse_sass(SNIPPET)["sgemm_bf16_wgmma_tma"]
    spans = {(lp.start, lp.end) for lp in sass.loops(fn)}
    # the wait stub's branch back into the body (0xe770 -> 0x4d0) spans an EXIT: not a loop;
    # a branch to itself (the end trap) is none either
    assert spans == {(0x300, 0x330), (0x3f0, 0x920), (0xe750, 0xe760)}
    lp = sass.main_loop(fn)
    assert (lp.start, lp.end, len(lp.instrs)) == (0x3f0, 0x920, 10)
    assert sass.mix(lp.instrs)["tensor"] == 2


def test_normalised_listings_ignore_register_numbers_and_collapse_runs():
    fn = sass.parse_sass(SNIPPET)["sgemm_bf16_wgmma_tma"]
    lp = sass.main_loop(fn)
    lines = sass.normalised(lp.instrs, lp)
    assert "LEA R, R, UR, 0x3" in lines and "@!P BRA <head>" in lines
    assert "@!P BRA <addr>" in lines
    renumbered = sass.Instr(0x7e0, "LEA", "R9, R1, UR5, 0x3")
    assert sass.normalise(renumbered) == "LEA R, R, UR, 0x3"
    assert sass.collapse(["FFMA R, R, R.reuse, R"] * 5 + ["BAR.SYNC 0x0"]) == \
        ["FFMA x5", "BAR.SYNC 0x0"]
    diff = sass.unified(["A"] * 100 + ["X", "B"], ["A"] * 100 + ["Y", "B"], cap=40)
    assert "-X" in diff and "+Y" in diff and " A x100" in diff
    long = sass.unified([f"I{i}" for i in range(100)], [f"J{i}" for i in range(100)], cap=40)
    assert len(long) == 40 and long[-1].startswith("... ")


def test_resource_parsers_and_their_combination():
    p = res.parse_ptxas(PTXAS)["sgemm_pipeline_main"]
    assert p == {"stack": 1064, "spill_stores": 2744, "spill_loads": 3024, "regs": 128,
                 "barriers": 1, "smem": 37248}
    u = res.parse_resource_usage(USAGE)["sgemm_pipeline_main"]
    assert (u["REG"], u["STACK"], u["SHARED"], u["LOCAL"]) == (245, 8, 38272, 0)
    r = res.combine({"sgemm_pipeline_main": p}, {"sgemm_pipeline_main": u})["sgemm_pipeline_main"]
    assert (r.regs, r.static_smem, r.stack, r.spill_stores, r.spill_loads) == \
        (245, 37248, 8, 2744, 3024)      # registers and stack as cuobjdump read the cubin
    # cuobjdump alone: its SHARED counts the 1 KB the system reserves per block
    only = res.combine({}, {"f": u})["f"]
    assert only.static_smem == 37248


def test_occupancy_on_the_h200():
    assert res.occupancy(168, 384, 197632 + 64).blocks == 1          # 14: registers and smem
    assert res.occupancy(168, 384, 197632 + 64).limiter == "registers+smem"
    assert res.occupancy(128, 256, 0).blocks == 2                    # 128 * 32 * 8 warps
    assert res.occupancy(128, 256, 0).limiter == "registers"
    assert res.occupancy(32, 256, 100 * 1024).limiter == "smem"      # (100 + 1) KB: 2 blocks
    assert res.occupancy(32, 256, 100 * 1024).blocks == 2
    assert res.occupancy(16, 64, 0).blocks == 32                     # the blocks cap
    assert res.occupancy(16, 1024, 0).limiter == "threads"
    assert res.occupancy(64, 256, 228 * 1024).limiter == "too big"
    assert res.occupancy(33, 32, 0).by_regs == 65536 // 1280         # 33 * 32 -> 1280 (unit 256)
    assert res.kib(197632) == "193 KB" and res.kib(64) == "64 B"


# --- real builds --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stages(tools):
    """14 at 4096 with STAGES 4 (old) and 3 (new), from this working tree, on a GPU model
    without a tuned table (14 is tuned: what h200's table holds for it must not move this)."""
    return explain("14_bf16_wgmma_tma", "4096", old=".", new=".", repo=ROOT,
                   old_defines={"STAGES": 4}, new_defines={"STAGES": 3}, gpu="untuned-gpu")


def test_fewer_stages_shrink_dynamic_shared_memory_and_say_so(stages):
    ex = stages
    assert ex.defines == {"STAGES": [4, 3]}
    main = ex.entries["sgemm_bf16_wgmma_tma"]
    assert main.resources["dynamic_smem"] == [4 * 384 * 128 + 1024, 3 * 384 * 128 + 1024]
    assert ex.launch["dynamic_smem"] == [197632, 148480]
    assert "waves" not in ex.launch and ex.new.launch.entries[0][1] == (132, 1, 1)
    assert ex.new.launch.tiles == 32 * 16 and ex.new.launch.persistent
    old, new = ex.old.entries["sgemm_bf16_wgmma_tma"], ex.new.entries["sgemm_bf16_wgmma_tma"]
    assert old.resources.regs == new.resources.regs == 168       # the setmaxnreg cap
    assert old.loop.mix["tensor"] == new.loop.mix["tensor"] == 4  # 4 x k16 per 64-wide K tile
    assert not main.identical_sass and main.loop_diff
    assert ex.summary.startswith("STAGES 4 -> 3: dynamic smem 193 KB -> 145 KB")
    assert ex.new.defines_source == \
        "registry defaults (no tuned large entry for untuned-gpu) + STAGES=3"


def test_the_json_document(stages, tmp_path):
    doc = json.loads(json.dumps(stages.to_json()))
    assert doc["schema"] == "gemm.explain/1" and doc["mode"] == "static"
    assert doc["machine"]["sms"] == 132 and doc["machine"]["regs_per_sm"] == 65536
    side = doc["new"]["entries"]["sgemm_bf16_wgmma_tma"]
    assert set(side) == {"resources", "occupancy", "mix", "loop", "sass_sha256"}
    assert side["resources"]["regs"] == 168 and side["occupancy"]["blocks"] == 1
    assert doc["new"]["launch"]["dynamic_smem"] == 148480 and doc["new"]["arch"] == "sm_90a"
    d = doc["diff"]
    assert d["defines"] == {"STAGES": [4, 3]} and not d["identical"]
    assert set(d["entries"]["sgemm_bf16_wgmma_tma"]) >= {"resources", "mix", "loop_mix",
                                                        "loop_opcodes", "loop_diff"}
    assert doc["summary"] == stages.summary


def test_identical_builds_say_harness_or_machine(tools, monkeypatch):
    monkeypatch.setattr(build, "_compiled", {})    # compile both sides, no cache
    ex = explain("14", "4096", old=".", new=".", repo=ROOT, old_defines={"STAGES": 4},
                 new_defines={"STAGES": 4})
    assert ex.identical and ex.summary == report.IDENTICAL
    assert all(d.identical_sass and not d.loop_diff for d in ex.entries.values())


def test_min_blocks_trades_registers_for_spills_and_occupancy(tools):
    """09 asked for 2 blocks per SM: ptxas caps it at 128 registers and spills."""
    ex = explain("09", "4096", old=".", new=".", repo=ROOT, old_defines={"MIN_BLOCKS": 1},
                 new_defines={"MIN_BLOCKS": 2})
    main = ex.entries["sgemm_pipeline_main"]
    old_regs, new_regs = main.resources["regs"]
    assert new_regs <= 128 < old_regs
    assert main.resources["blocks_per_sm"] == [1, 2]
    assert main.resources["spill_stores"][0] == 0 < main.resources["spill_stores"][1]
    assert "static_smem" not in main.resources
    assert main.loop_mix["local"][0] == 0 < main.loop_mix["local"][1]
    assert ex.launch["waves"][1] == pytest.approx(ex.launch["waves"][0] / 2, rel=0.01)
    assert f"registers {old_regs} -> {new_regs}, spill stores 0 B -> " in ex.summary
    assert "blocks/SM 1 -> 2" in ex.summary and " STL" in ex.summary
    assert ex.summary.endswith("waves 3.88 -> 1.94")


@pytest.fixture(scope="module")
def two_commits(tmp_path_factory):
    """A repository of kernels/ with two commits: the second adds a __syncthreads() in 09's
    K loop (after the stage refill)."""
    if not shutil.which("git"):
        pytest.skip("no git")
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "kernels", repo / "kernels")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    src = repo / "kernels" / "09_cp_async_pipeline.cu"
    text = src.read_text()
    anchor = "write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;\n"
    assert anchor in text
    src.write_text(text.replace(anchor, anchor + "                __syncthreads();\n", 1))
    subprocess.run([*git, "commit", "-qam", "barrier"], check=True)
    return repo


def test_an_added_barrier_is_one_more_bar_per_k_step(tools, two_commits):
    ex = explain("09", "2048", repo=two_commits)         # HEAD against its parent
    assert ex.old.commit != ex.new.commit and ex.old.rev == "HEAD~1"
    assert ex.old.source_sha256 != ex.new.source_sha256 and not ex.defines
    for entry in ("sgemm_pipeline_main", "sgemm_pipeline_edge", "sgemm_pipeline_fallback"):
        d = ex.entries[entry]
        assert d.loop_mix["barrier"][1] == d.loop_mix["barrier"][0] + 1
        bars = {k: v for k, v in d.loop_opcodes.items() if k.startswith("BAR.SYNC")}
        assert [v[1] - v[0] for v in bars.values()] == [1]
        bodies = 2 if entry == "sgemm_pipeline_edge" else 1   # its full-tile and checked bodies
        assert d.mix["barrier"][1] == d.mix["barrier"][0] + bodies
    assert ex.entries["sgemm_pipeline_main"].loop_diff
    assert any("BAR.SYNC" in ln and ln.startswith("+")
               for ln in ex.entries["sgemm_pipeline_main"].loop_diff)
    assert "+1 BAR.SYNC.DEFER_BLOCKING per K step" in ex.summary    # 09: one K step per iteration
    listed = subprocess.run(["git", "-C", str(two_commits), "worktree", "list"],
                            capture_output=True, text=True).stdout
    assert len(listed.splitlines()) == 1                  # the temporary worktrees are gone


def test_fewer_stages_of_09_shrink_static_shared_memory(tools):
    ex = explain("09", "2048", old=".", new=".", repo=ROOT, old_defines={"STAGES": 3},
                 new_defines={"STAGES": 2})
    smem = ex.entries["sgemm_pipeline_main"].resources["static_smem"]
    assert smem == [3 * 8 * (132 + 256) * 4, 2 * 8 * (132 + 256) * 4]
    assert "static smem 36 KB -> 24 KB" in ex.summary


def test_cli_table_json_and_errors(stages, tmp_path, capsys):
    from gemm.cli.main import main
    out = tmp_path / "e" / "x.json"
    untuned = ["--gpu", "untuned-gpu"]   # as the fixture: whatever h200's table holds for 14
    assert main(["explain", "14_bf16", "--size", "4096", "--new", ".", "--repo", str(ROOT),
                 "--old-define", "STAGES=4", "--new-define", "STAGES=3", "--static",
                 "--json", str(out), *untuned]) == 0
    text = capsys.readouterr().out
    assert "dynamic smem" in text and "193 KB" in text and "145 KB" in text
    assert f"summary: {stages.summary}" in text
    assert json.loads(out.read_text())["summary"] == stages.summary
    assert main(["explain", "14", "--size", "4096", "--new", ".", "--repo", str(ROOT),
                 "--define", "STAGES=4", "--brief", "--static", *untuned]) == 0
    assert capsys.readouterr().out.strip() == f"14_bf16_wgmma_tma at 4096: {report.IDENTICAL}"
    for argv, why in [(["--define", "STAGE=3"], "no constants"),
                      (["--define", "STAGES"], "NAME=INTEGER"),
                      (["--old", "no-such-rev"], "not a commit")]:
        assert main(["explain", "14", "--size", "4096", "--new", ".", "--repo", str(ROOT),
                     *argv]) == 2
        assert why in capsys.readouterr().err


def test_ci_explains_confirmed_drops_only_and_never_fails(tools, tmp_path):
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    sha = head.stdout.strip()
    # the machine over the gate's A/B, as its effect keeps it (gemm.machine.nvml.ArmMachine)
    arm = {"gpu": "NVIDIA H200", "processes": 4, "samples": 300, "power_w_median": 690.0,
           "temp_c_max": 61.0, "power_capped_pct": 0.0, "sm_mhz_by_process": [1980.0] * 4}
    machine = {"reference": {**arm, "sm_mhz_median": 1980.0},
               "new": {**arm, "sm_mhz_median": 1755.0}}
    rows = [{"kernel": "14_bf16_wgmma_tma", "size": "4096", "metric": "tflops",
             "verdict": "DROP", "unconfirmed": False, "reference": "0" * 40,
             "effects": [{"against": sha, "verdict": "DROP", "machine": machine}]},
            {"kernel": "14_bf16_wgmma_tma", "size": "4096", "metric": "pct_of_cublas",
             "verdict": "DROP", "unconfirmed": False, "reference": sha},
            {"kernel": "09_cp_async_pipeline", "size": "2048", "verdict": "DROP",
             "unconfirmed": True, "reference": sha},
            {"kernel": "13_tf32_wgmma_tma", "size": "1024", "verdict": "UNRESOLVED",
             "reference": sha},
            {"kernel": "99_nope", "size": "512", "verdict": "DROP", "anchor": sha}]
    judged = "e" * 40
    (tmp_path / "regress.json").write_text(json.dumps({"rows": rows, "machine": "h200",
                                                       "commit": judged}))
    from gemm.store import verdicts
    kept = verdicts.save(tmp_path / "verdicts", "h200", judged, [dict(r) for r in rows[:2]],
                         summary={"counts": {"DROP": 2}, "exit": 1, "anchor": None,
                                  "rows": [dict(r) for r in rows]})
    out = subprocess.run(["bash", str(ROOT / "ci" / "explain.sh")], capture_output=True,
                         text=True, env={**os.environ, "OUT": str(tmp_path),
                                         "VERDICTS": str(tmp_path / "verdicts"),
                                         "EXPLAIN_COUNTERS": "0"}, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    ab = ("machine over the A/B (reference vs new): SM clock 1980 vs 1755 MHz, power 690 vs "
          "690 W, max temp 61 vs 61 C: differ (SM clock -11.4 %): a machine change candidate")
    assert lines[0] == (f"explain: 14_bf16_wgmma_tma at 4096: {report.IDENTICAL}; {ab} "
                        f"(vs {sha[:10]})")
    assert lines[1].startswith("explain: 99_nope at 512: explain failed (exit 2")
    doc = json.loads((tmp_path / "explain" / "14_bf16_wgmma_tma-4096.json").read_text())
    assert doc["schema"] == "gemm.explain/1" and doc["old"]["commit"] == sha
    assert (tmp_path / "explain" / "summary.txt").read_text().splitlines() == lines
    # attached to the DROP rows of 14 at 4096 (both metrics) in the report and the kept file
    want = report.attachment(doc)
    assert want["summary"] == f"{report.IDENTICAL}; {ab}" and want["against"] == sha
    assert want["ab_machine"]["new"]["sm_mhz_median"] == 1755.0
    got = json.loads((tmp_path / "regress.json").read_text())["rows"]
    assert [r.get("explanation") for r in got] == [want, want, None, None, None]
    data = json.loads(kept.read_text())
    assert [r.get("explanation") for r in data["rows"]] == [want, want]
    assert [r.get("explanation") for r in data["summary"]["rows"]] == [want, want, None, None,
                                                                        None]
