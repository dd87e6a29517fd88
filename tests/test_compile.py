"""Every kernel compiles with nvcc for sm_90 with the loader's own flags; ptxas is clean."""
import re
import subprocess
from pathlib import Path

import pytest

from gemm.core import registry
from gemm.core.registry import kernels_dir
from gemm.cuda.loader import nvcc_options, target_arch

SPECS = list(registry.registry().values())


def ptxas_report(nvcc, spec, tmp_path, source=None):
    """{function: ptxas's figures} of `spec` compiled as the loader does (`source`: another
    file in its place, with kernels/ still on the include path)."""
    arch = target_arch(spec, "sm_90")
    cmd = [nvcc, "--cubin", "-arch", arch, *nvcc_options(spec), f"-I{kernels_dir()}",
           "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), str(source or spec.path)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    funcs = {}
    current = None
    for line in out.stderr.splitlines():
        m = re.search(r"Function properties for (\w+)", line)
        if m:
            current = funcs.setdefault(m.group(1), {})
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current is not None:
            current.update(stack=int(m.group(1)), spill_st=int(m.group(2)), spill_ld=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m and current is not None:
            current["regs"] = int(m.group(1))
        # ptxas's own performance warnings (C7510, C7517, C7518, ...): wgmmas serialized or a
        # warpgroup.wait injected, each naming its function
        m = re.search(r"\((C\d{4})\) .* function '(\w+)'", line)
        if m:
            funcs.setdefault(m.group(2), {}).setdefault("perf_loss", []).append(line.strip())
    return funcs


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_compiles_without_spills_or_local_memory(nvcc, spec, tmp_path):
    funcs = ptxas_report(nvcc, spec, tmp_path)
    for entry in spec.entries:
        assert entry in funcs, f"ptxas did not report {entry}"
        f = funcs[entry]
        assert f["spill_st"] == 0 and f["spill_ld"] == 0, f"{entry} spills: {f}"
        assert f["stack"] == 0, f"{entry} uses local memory (stack frame): {f}"
        assert f["regs"] * spec.threads <= 65536, f"{entry}: a block needs more registers than an SM has"
        assert not f.get("perf_loss"), f"{entry}: {f['perf_loss']}"


def test_constants_are_tunable_without_edits(nvcc, tmp_path):
    spec = registry.get("05").with_defines(BM=128, BN=128)  # 256 threads, the 128x128 variant
    funcs = ptxas_report(nvcc, spec, tmp_path)
    assert funcs["sgemm_2d_main"]["spill_st"] == 0


@pytest.mark.parametrize("overrides", [{"BM": 64, "BN": 256, "STAGES": 5},
                                       {"BM": 128, "BN": 192, "STAGES": 5}],
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_pingpong_tiles_outside_its_search_space_compile_without_spills(nvcc, tmp_path, overrides):
    """15's 64x256 tile (14's m64n256 per consumer; not in its `tune` space, whose BM x BN
    product would hold the refused 128x256) and its largest, 128x192 at 5 stages, build clean
    with the registry's setmaxnreg counts."""
    spec = registry.get("15").with_defines(**overrides)
    f = ptxas_report(nvcc, spec, tmp_path)[spec.main]
    assert f["spill_st"] == 0 and f["spill_ld"] == 0 and f["stack"] == 0, f


def test_pingpong_refuses_a_tile_whose_accumulators_do_not_fit(nvcc, tmp_path):
    """128x256 per consumer would be 256 accumulators per thread: a static_assert, not a spill."""
    spec = registry.get("15").with_defines(BM=128, BN=256)
    out = subprocess.run([nvcc, "--cubin", "-arch", target_arch(spec, "sm_90"), *nvcc_options(spec),
                          f"-I{kernels_dir()}", "-o", str(tmp_path / "k.cubin"), str(spec.path)],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "static assert" in out.stderr.lower().replace("_", " "), out.stderr


def test_a_broken_constant_fails_to_compile(nvcc, tmp_path):
    spec = registry.get("05").with_defines(TM=7)  # 64 is not a multiple of 7: static_assert
    arch = target_arch(spec, "sm_90")
    out = subprocess.run([nvcc, "--cubin", "-arch", arch, *nvcc_options(spec), f"-I{kernels_dir()}",
                          "-o", str(tmp_path / "k.cubin"), str(spec.path)], capture_output=True, text=True)
    err = out.stderr.lower()
    assert out.returncode != 0 and ("static assert" in err or "static_assert" in err), err


def _blocks_by_registers(regs: int, threads: int) -> int:
    return 65536 // (-(-regs // 8) * 8 * threads)


@pytest.mark.parametrize("spec", [s for s in SPECS if s.edge], ids=lambda s: s.name)
def test_the_edge_entry_keeps_the_main_entrys_blocks_per_sm(nvcc, spec, tmp_path):
    """A shape with any partial tile runs the edge entry over every tile, full ones on its main
    path: it must fit as many blocks per SM as the main entry (04's took 86 registers, one
    512-thread block per SM against two, and ran 3001x2999x3003 at 8.8 TFLOPS, not 14.6)."""
    funcs = ptxas_report(nvcc, spec, tmp_path)
    main = _blocks_by_registers(funcs[spec.main]["regs"], spec.threads)
    edge = _blocks_by_registers(funcs[spec.edge]["regs"], spec.threads)
    assert edge >= main, f"{spec.edge}: {edge} blocks per SM by registers, {spec.main}: {main}"


@pytest.mark.parametrize("entry", ["sgemm_stage_pad_k_b32", "sgemm_stage_pad_k_b16",
                                   "sgemm_split_k_reduce"])
def test_support_kernels_compile_without_spills(nvcc, entry, tmp_path):
    """gemm/cuda/support.cu: the padded-K copies (13, 14) and split-K's sum (10); named with
    the entry prefix, so ci/memcheck.sh instruments them with the GEMM kernels."""
    src = Path(registry.__file__).resolve().parent.parent / "cuda" / "support.cu"
    out = subprocess.run([nvcc, "--cubin", "-arch", "sm_90", "-O3", "-Xptxas", "-v", "-o",
                          str(tmp_path / "s.cubin"), str(src)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    m = re.search(rf"Function properties for {entry}\n\s*(\d+) bytes stack frame, "
                  rf"(\d+) bytes spill stores, (\d+) bytes spill loads", out.stderr)
    assert m, f"ptxas did not report {entry}:\n{out.stderr}"
    assert m.groups() == ("0", "0", "0"), m.group(0)
    assert entry.startswith(registry.ENTRY_PREFIX)


def test_ptxas_performance_warnings_are_seen(nvcc, tmp_path):
    """A wgmma main loop with a function call in it (a printf after the commit, as a clock64
    probe once had) is serialized by ptxas (C7510): the report above must see it, so a kernel
    change that makes ptxas serialize its wgmmas fails here, without a GPU."""
    spec = registry.get("16_bf16_tma_store")
    src = spec.path.read_text()
    anchor = "                wgmma_commit();\n"
    assert src.count(anchor) == 1
    probe = tmp_path / spec.path.name
    probe.write_text(src.replace(anchor, anchor + '                printf("");\n'))
    funcs = ptxas_report(nvcc, spec, tmp_path, source=probe)
    assert funcs[spec.main].get("perf_loss"), funcs[spec.main]
    assert "C7510" in funcs[spec.main]["perf_loss"][0]
