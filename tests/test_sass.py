"""What a kernel's registry entry claims about its machine code (`sass`: e.g. LDG.E.128,
LDS.128, STG.E.128, LDGSTS) is in the SASS of its main entry point, compiled for sm_90 with
the loader's own flags and disassembled with cuobjdump (the toolkit's, or NVIDIA's
nvidia-cuda-cuobjdump wheel; skipped with the reason where neither is installed)."""
import glob
import os
import re
import shutil
import subprocess
import sysconfig

import pytest

from gemm.core import registry, tuning
from gemm.core.registry import kernels_dir
from gemm.cuda.loader import nvcc_options, target_arch

CLAIMS = [s for s in registry.registry().values() if s.sass]


def _disassembler():
    found = shutil.which("cuobjdump")
    if not found:
        hits = glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "bin",
                                      "cuobjdump"))
        found = hits[0] if hits else None
    return found


@pytest.fixture(scope="session")
def cuobjdump():
    path = _disassembler()
    if not path:
        pytest.skip("no cuobjdump: install the toolkit or `pip install .[sass]`")
    return path


def sass_of(nvcc, cuobjdump, spec, entry, tmp_path) -> str:
    cubin = tmp_path / f"{spec.name}.cubin"
    out = subprocess.run([nvcc, "--cubin", "-arch", target_arch(spec, "sm_90"),
                          *nvcc_options(spec), f"-I{kernels_dir()}", "-o", str(cubin),
                          str(spec.path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    env = {**os.environ, "PATH": os.path.dirname(cuobjdump) + os.pathsep + os.environ["PATH"]}
    out = subprocess.run([cuobjdump, "--dump-sass", "--function", entry, str(cubin)],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


def mnemonics(sass: str) -> set[str]:
    return set(re.findall(r"\b([A-Z][A-Z0-9]*(?:\.[A-Z0-9_]+)*)\b", sass))


@pytest.mark.parametrize("spec", CLAIMS, ids=lambda s: s.name)
def test_claimed_instructions_are_in_the_main_entry(nvcc, cuobjdump, spec, tmp_path):
    found = mnemonics(sass_of(nvcc, cuobjdump, spec, spec.main, tmp_path))
    missing = [m for m in spec.sass if not any(f == m or f.startswith(m + ".") for f in found)]
    assert not missing, f"{spec.name}: {spec.main} has no {missing}"


def test_the_check_can_fail(nvcc, cuobjdump, tmp_path):
    """The seed kernel loads scalars from global memory: no 128-bit global load in its SASS."""
    spec = registry.get("05")
    found = mnemonics(sass_of(nvcc, cuobjdump, spec, spec.main, tmp_path))
    assert "FFMA" in found and not any(f.startswith("LDG.E.128") for f in found)


TMA_SPECS = [s for s in registry.registry().values() if s.tma]


@pytest.mark.parametrize("spec", TMA_SPECS, ids=lambda s: s.name)
def test_tma_parameter_layout_matches_the_packed_buffer(nvcc, cuobjdump, spec, tmp_path):
    """The launcher packs [padding][maps][M N K alpha A B beta C] (gemm.cuda.launch) and the
    driver copies that buffer to the start of the parameter space: every parameter's offset
    that ptxas recorded (EIATTR_KPARAM_INFO) must be where the packing puts it."""
    import struct
    from gemm.cuda.launch import param_format, param_head, tma_param_pad
    arch = target_arch(spec, "sm_90")
    cubin = tmp_path / f"{spec.name}.cubin"
    out = subprocess.run([nvcc, "--cubin", "-arch", arch, *nvcc_options(spec),
                          f"-I{kernels_dir()}", "-o", str(cubin), str(spec.path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    env = {**os.environ, "PATH": os.path.dirname(cuobjdump) + os.pathsep + os.environ["PATH"]}
    elf = subprocess.run([cuobjdump, "-elf", str(cubin)], capture_output=True, text=True,
                         env=env).stdout
    found = {int(o, 16): int(off, 16) for o, off in
             re.findall(r"Ordinal\s*:\s*(0x[0-9a-f]+)\s+Offset\s*:\s*(0x[0-9a-f]+)", elf)}
    n = len(spec.tma)
    assert len(found) == n + 8, found
    # where struct (native alignment, as PyCUDA's packer) puts each parameter
    fmt = param_format(spec, arch)
    pad = tma_param_pad(arch)
    want = [pad + 128 * i for i in range(n)]
    scalars = "iiifPPfP"
    for i in range(len(scalars)):
        want.append(struct.calcsize(fmt[:len(fmt) - len(scalars) + i + 1]) -
                    struct.calcsize(scalars[i]))
    assert [found[i] for i in range(n + 8)] == want
    assert len(param_head(spec, arch, (b"m" * 128,) * n)) == n + 1


# The search spaces of the wgmma kernels (13, 14: `gemm tune`, issue 27): every candidate
# must be one the tuner can accept, so none is lost to spills on the GPU and each keeps the
# machine code its registry entry claims (wgmma, TMA; setmaxnreg in 14, where BM = 64 leaves
# 256 threads and ptxas takes CONSUMER_REGS, 232, at entry: setmaxnreg.inc stays legal).
WGMMA_CANDIDATES = [(s, c) for s in registry.registry().values() if s.tma and s.tune
                    for c in tuning.candidates(s)]


@pytest.mark.parametrize("spec,cand", WGMMA_CANDIDATES,
                         ids=[f"{s.name}-" + "-".join(f"{k}{v}" for k, v in c.items())
                              for s, c in WGMMA_CANDIDATES])
def test_every_wgmma_tune_candidate_compiles_clean_with_its_claimed_sass(nvcc, cuobjdump, spec,
                                                                        cand, tmp_path):
    from tests.test_compile import ptxas_report
    spec = spec.with_defines(**cand)
    funcs = ptxas_report(nvcc, spec, tmp_path)
    f = funcs[spec.main]
    assert f["spill_st"] == f["spill_ld"] == f["stack"] == 0, f"{cand}: {f}"
    assert f["regs"] * spec.threads <= 65536, f"{cand}: {f}"
    assert not f.get("perf_loss"), f"{cand}: {f['perf_loss']}"   # ptxas serializing wgmmas
    env = {**os.environ, "PATH": os.path.dirname(cuobjdump) + os.pathsep + os.environ["PATH"]}
    out = subprocess.run([cuobjdump, "--dump-sass", "--function", spec.main,
                          str(tmp_path / "k.cubin")], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    found = mnemonics(out.stdout)
    missing = [m for m in spec.sass if not any(x == m or x.startswith(m + ".") for x in found)]
    assert not missing, f"{spec.name} {cand}: no {missing}"
    # the wgmma shape follows BN (m64nBNk8 tf32 / m64nBNk16 bf16)
    assert re.search(rf"HGMMA\.64x{cand['BN']}x(8|16)\.", out.stdout), cand
