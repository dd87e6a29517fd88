"""A non-editable install works: the wheel carries the kernels, their registry and the support
kernels, and `gemm list` runs from it with no source tree around."""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
                           capture_output=True, text=True, timeout=300)
    if build.returncode != 0:
        pytest.fail(f"pip wheel failed: {build.stderr[-2000:]}")
    whl, = out.glob("gemm-*.whl")
    return whl


def test_the_wheel_carries_kernels_registry_and_support_code(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    kernels = sorted(p.name for p in (ROOT / "kernels").glob("*.c*"))
    for n in ["gemm/kernels/kernels.toml", "gemm/cuda/support.cu", "gemm/core/registry.py"] + \
            [f"gemm/kernels/{k}" for k in kernels]:
        assert n in names, n


def test_gemm_list_from_the_installed_wheel(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)   # a wheel unpacked is an installed package
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GEMM_KERNELS_DIR")}
    env["PYTHONPATH"] = str(site)
    code = ("import gemm.core.registry as r; from gemm.cli import main; "
            "print(r.kernels_dir()); raise SystemExit(main(['list']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == str(site / "gemm" / "kernels")
    assert "05_2d_blocktiling" in out.stdout
    shutil.rmtree(site)
