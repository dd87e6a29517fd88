"""Bad input says one sentence and exits 2, before any GPU work and with nothing recorded
changed: a broken kernel registry, an unknown kernel for the gate, malformed or truncated
result files (gemm regress, gemm show, gemm publish), a calibration made on another GPU, a
missing extra; `gemm list` fits 100 columns, `gemm show` reads asv's result files, every option
has help, and the ci scripts make and use a virtual environment outside one."""
import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemm import cli
from gemm.track.history import HistoryError, load_runs
from tests.asvfake import write_benchmarks, write_run

ROOT = Path(__file__).resolve().parent.parent
K = ["04_1d_blocktiling", "05_2d_blocktiling"]
S = ["1024", "4096"]


def run(*args, cwd=None, env=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}   # this checkout's gemm
    return subprocess.run([sys.executable, "-m", "gemm", *args], capture_output=True, text=True,
                          cwd=cwd, env=env)


def one_sentence(out, *parts):
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    for p in parts:
        assert p in out.stderr, out.stderr


# --- the kernel registry ------------------------------------------------------------------

@pytest.fixture
def kernels(tmp_path):
    """A copy of kernels/ that GEMM_KERNELS_DIR points at."""
    d = tmp_path / "kernels"
    shutil.copytree(ROOT / "kernels", d)
    return d


DUPLICATE = '''
[[kernel]]
name = "01_naive"
file = "01_naive.cu"
main = "sgemm_naive"
block = [32, 32]
tile = [32, 32]
precision = "fp32"
baseline = "cublas_fp32"
'''


def _break(d: Path, how: str) -> str:
    """Break the registry copy in d; returns what the message must name besides the file."""
    toml = d / "kernels.toml"
    text = toml.read_text()
    if how == "duplicate":
        toml.write_text(text + DUPLICATE)
        return "kernel '01_naive' is registered twice"
    if how == "precision":
        toml.write_text(text.replace('precision = "fp32"', 'precision = "fp64"', 1))
        return "kernel '01_naive': precision 'fp64' is not one of fp32, tf32, bf16"
    if how == "syntax":
        toml.write_text(text + "\n[[kernel\n")
        return "is not valid TOML"
    if how == "missing_cu":
        (d / "05_2d_blocktiling.cu").unlink()
        return "kernel '05_2d_blocktiling' names 05_2d_blocktiling.cu, which is not in"
    if how == "bad_expression":
        toml.write_text(text.replace("tile = [\"BLOCK\", \"BLOCK\"]", "tile = [\"BLOCK +\", 32]", 1))
        return "kernel '01_naive'"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["duplicate", "precision", "syntax", "missing_cu",
                                 "bad_expression"])
@pytest.mark.parametrize("argv", [["list"], ["bench", "-k", "05"], ["check"]])
def test_a_broken_registry_is_one_sentence_naming_file_and_entry(kernels, how, argv):
    what = _break(kernels, how)
    out = run(*argv, env={"GEMM_KERNELS_DIR": str(kernels)})
    one_sentence(out, f"gemm {argv[0]}: {kernels / 'kernels.toml'}", what)
    assert "needs a CUDA GPU" not in out.stderr   # said before anything asks for a GPU


def test_no_registry_at_all(tmp_path):
    out = run("list", env={"GEMM_KERNELS_DIR": str(tmp_path / "none")})
    one_sentence(out, f"the kernel registry {tmp_path / 'none' / 'kernels.toml'} cannot be read")


def test_the_registry_checks_cu_files_only_where_asked(tmp_path):
    from gemm.core.registry import RegistryError, load_registry
    (tmp_path / "kernels.toml").write_text(DUPLICATE)
    assert list(load_registry(tmp_path / "kernels.toml")) == ["01_naive"]
    with pytest.raises(RegistryError, match="names 01_naive.cu, which is not in"):
        load_registry(tmp_path / "kernels.toml", files=True)


# --- gemm list ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["list"], ["list", "-v"]])
def test_gemm_list_fits_100_columns(argv):
    from gemm.core import registry
    out = run(*argv)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    for s in registry.registry().values():
        assert any(line.startswith(s.name) for line in lines)
    words = out.stdout.split()
    # every word of every summary is there (wrapped, not cut)
    for s in registry.registry().values():
        assert all(w in words for w in s.summary.split()), s.name
    if "-v" in argv:   # the constants, files and baselines moved here
        assert "BM=128 BN=256 STAGES=4 GROUP_M=16 PRODUCER_REGS=40 CONSUMER_REGS=232" in out.stdout
        assert "14_bf16_wgmma_tma.cu" in out.stdout and "cublas_bf16_nk" in out.stdout
