"""`gemm explain`'s K loop per K step (gemm.explain.kstep): which loop is the K loop where a
wait on the clock sits inside it, how many K steps an iteration covers, and what the summary
names. On captured SASS and synthetic loops (no tools), and on real builds of 05 (nvcc +
cuobjdump, no GPU): the K-step wait of ci/probes/tailspin.py --kstep, which a DROP's summary
once read as "-2 BAR.SYNC.DEFER_BLOCKING, -16 LDG.E.CONSTANT, -32 LDS.128 per K-loop
iteration" (the wait's loop taken for the K loop), with and without an unroll change."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gemm.explain import explain, kstep, report, sass
from gemm.explain.build import LoopInfo

ROOT = Path(__file__).resolve().parents[1]
MAIN, EDGE = "sgemm_2d_main", "sgemm_2d_edge"

# 05's K loop with the K-step wait (nvcc 13.0, sm_90), cut down: the clock read at the top,
# the K step's math, the wait (an inner loop on the clock), the branch back
WAIT = """
\t\tFunction : sgemm_2d_main
        /*0920*/                   LDG.E.CONSTANT R4, desc[UR4][R2.64] ;
        /*0930*/                   CS2R R126, SR_CLOCKLO ;
        /*0a00*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0a10*/                   LDS.128 R8, [R0] ;
        /*0a20*/                   FFMA R20, R8, R12, R20 ;
        /*0a30*/                   FFMA R21, R9, R12, R21 ;
        /*0a40*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*3300*/                   CS2R R28, SR_CLOCKLO ;
        /*3460*/                   CS2R R28, SR_CLOCKLO ;
        /*3470*/                   ISETP.GE.U32.AND P0, PT, R28, R23, PT ;
        /*3480*/                   ISETP.GE.AND.EX P0, PT, R29, R27, PT, P0 ;
        /*3490*/              @!P0 BRA 0x3460 ;
        /*34c0*/                   ISETP.LT.AND P0, PT, R2, UR6, PT ;
        /*34d0*/              @!P0 BRA 0x920 ;
        /*34e0*/                   EXIT ;
"""


def test_a_wait_inside_the_k_loop_is_not_the_k_loop():
    fn = sass.parse_sass(WAIT)[MAIN]
    assert {(lp.start, lp.end) for lp in sass.loops(fn)} == {(0x3460, 0x3490), (0x920, 0x34d0)}
    lp = sass.main_loop(fn)        # the innermost loop with math, though it holds the wait
    assert (lp.start, lp.end) == (0x920, 0x34d0)
    assert [(w.start, w.end) for w in sass.inner_loops(fn, lp)] == [(0x3460, 0x3490)]
    assert sass.clock_reads(lp.instrs) == {"CS2R": 3}
    assert sass.mma_shape("HMMA.1688.F32.TF32") == (16, 8, 8)
    assert sass.mma_shape("HMMA.16816.F32.BF16") == (16, 8, 16)
    assert sass.mma_shape("HGMMA.64x256x16.F32.BF16") is None


def _ins(*ops):
    return [sass.Instr(4 * k, op) for k, op in enumerate(ops)]


def test_k_steps_from_the_math_of_the_block_tile():
    d = {"BK": 8}
    # FP32: 64 x 64 x 8 multiply-adds over 64 threads = 512 FFMA per K step
    assert kstep.k_steps(_ins(*["FFMA"] * 1024, "BRA"), (64, 64), 64, d) == 2
    assert kstep.k_steps(_ins(*["FFMA"] * 512), (64, 64), 64, d) == 1
    assert kstep.k_steps(_ins(*["FFMA"] * 300), (64, 64), 64, d) is None    # not whole
    assert kstep.k_steps(_ins(*["FFMA"] * 512), (64, 64), 64, {}) is None   # no BK
    # mma.sync 16x8x8 per warp: 128 x 128 x 32 / (8 warps * 1024) = 64 per K step
    assert kstep.k_steps(_ins(*["HMMA.1688.F32.TF32"] * 64), (128, 128), 256, {"BK": 32}) == 1
    # warpgroup-wide HGMMA: not told from the math
    assert kstep.k_steps(_ins(*["HGMMA.64x256x16.F32.BF16"] * 4), (128, 256), 384,
                         {"BK": 64}) is None


def _loop(steps, tensor=0, ffma=0, n=100):
    return LoopInfo(0, 0x100, n, {"ffma": ffma, "tensor": tensor}, steps)


def test_the_basis_two_loops_are_compared_on():
    b = kstep.basis(_loop(2, ffma=1024), _loop(1, ffma=512), True)
    assert (b.unit, b.steps, b.per) == ("K step", (2, 1), "per K step")
    assert b.note == "the old loop covers 2 K steps per iteration, the new 1"
    assert kstep.basis(_loop(1, ffma=512), _loop(1, ffma=512), True).note == ""
    # one side known: the other from the ratio of their math (the same defines)
    assert kstep.basis(_loop(None, ffma=1024), _loop(1, ffma=512), True).steps == (2, 1)
    # neither known (HGMMA): the side with less math taken as one K step, and said
    b = kstep.basis(_loop(None, tensor=8), _loop(None, tensor=4), True)
    assert b.steps == (2, 1) and "the old loop covers 2 times the new's K steps" in b.note
    # the defines differ (BK?) or the ratio is not whole: per iteration, saying why
    for b in (kstep.basis(_loop(None, tensor=8), _loop(None, tensor=4), False),
              kstep.basis(_loop(None, tensor=6), _loop(None, tensor=4), True)):
        assert b.unit == "iteration" and b.per == "per K-loop iteration"
        assert b.note.endswith("the unroll or the K step differs")
    same = kstep.basis(_loop(None, tensor=4), _loop(None, tensor=4), False)
    assert (same.unit, same.note) == ("iteration", "")
    assert kstep.num(0.5, True) == "+0.5" and kstep.num(-3.0, True) == "-3"


# --- real builds of 05 ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def waits(tmp_path_factory):
    """kernels/ in three commits: 05's K loop unrolled by 2 (#pragma unroll 2), then as it is,
    then with ci/probes/tailspin.py's K-step wait (KSTEP_HOOKS)."""
    if not shutil.which("git"):
        pytest.skip("no git")
    repo = tmp_path_factory.mktemp("kstep")
    shutil.copytree(ROOT / "kernels", repo / "kernels")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    cu = repo / "kernels" / "05_2d_blocktiling.cu"
    plain = cu.read_text()
    loop = "    for (; k0 + BK <= K; k0 += BK)\n"
    assert plain.count(loop) == 1
    cu.write_text(plain.replace(loop, "#pragma unroll 2\n" + loop))
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "unrolled by 2"], check=True)
    cu.write_text(plain)
    subprocess.run([*git, "commit", "-qam", "as it is"], check=True)
    spec = importlib.util.spec_from_file_location("tailspin",
                                                  ROOT / "ci" / "probes" / "tailspin.py")
    ts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ts)
    ts.set_spin(repo, ["05_2d_blocktiling=10000"], ts.KSTEP_HOOKS)
    subprocess.run([*git, "add", "-A"], check=True)      # with the twin's source
    subprocess.run([*git, "commit", "-qm", "the K-step wait"], check=True)
    return repo


HALVED = re.compile(r"BAR\.|LDG|LDS|FFMA")     # what the K step's own math and memory are


def test_the_k_step_wait_is_named_per_k_step(tools, waits):
    ex = explain("05_2d_blocktiling", "2048", old="HEAD~1", new="HEAD", repo=waits)
    for entry in (MAIN, EDGE):
        d = ex.entries[entry]
        old, new = ex.old.entries[entry].loop, ex.new.entries[entry].loop
        assert old.mix["ffma"] == new.mix["ffma"] == 512       # the K loop, not the wait
        assert (old.steps, new.steps) == (1, 1) and d.basis.unit == "K step"
        assert (old.inner, new.inner, new.inner_clock) == (0, 1, 1)
        assert not old.clock_reads and new.clock_reads.get("CS2R", 0) >= 2
        assert all(d.loop_mix.get(k) is None for k in ("ffma", "lds", "ldg", "barrier"))
    reads = ex.new.entries[MAIN].loop.clock_reads["CS2R"]
    part = ex.entries[MAIN].loop_words
    assert part.startswith(f"+{reads} CS2R (clock reads), +1 inner loop (a wait on the clock), ")
    assert part.endswith(" per K step") and part in ex.summary
    assert not HALVED.search(ex.summary), ex.summary
    assert "per K-loop iteration" not in ex.summary


def test_an_unroll_change_is_compared_per_k_step(tools, waits):
    # the DROP's case: the old loop unrolled by 2, the new one K step and the wait
    ex = explain("05_2d_blocktiling", "2048", old="HEAD~2", new="HEAD", repo=waits)
    d = ex.entries[MAIN]
    assert (ex.old.entries[MAIN].loop.steps, ex.new.entries[MAIN].loop.steps) == (2, 1)
    assert d.loop_mix["ffma"] == [1024, 512] and d.loop_mix["barrier"] == [4, 2]  # per iteration
    assert d.loop_words.endswith(" per K step (the old loop covers 2 K steps per iteration, "
                                 "the new 1)")
    assert "CS2R (clock reads), +1 inner loop (a wait on the clock)" in ex.summary
    assert not HALVED.search(ex.summary), ex.summary
    doc = ex.to_json()["diff"]["entries"][MAIN]
    assert doc["loop_steps"] == [2, 1] and doc["loop_unit"] == "K step"
    # the unroll alone: nothing of the K step's math or memory moved per K step
    ex = explain("05_2d_blocktiling", "2048", old="HEAD~2", new="HEAD~1", repo=waits)
    d = ex.entries[MAIN]
    assert d.basis.steps == (2, 1) and d.loop_opcodes.get("LDS.128") == [64, 32]
    assert d.loop_words.startswith("K loop ") and "CS2R" not in ex.summary
    assert d.loop_words.endswith("(the old loop covers 2 K steps per iteration, the new 1)")
    assert not HALVED.search(ex.summary), ex.summary
    assert not ex.summary.startswith(report.IDENTICAL)
