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

from gemm.core import registry
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
