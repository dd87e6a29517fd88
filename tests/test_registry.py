import re

import pytest

from gemm.core import registry
from gemm.core.registry import eval_int, load_registry

SPECS = list(registry.registry().values())


def test_the_five_steps_are_registered():
    assert [s.name for s in SPECS][:5] == ["01_naive", "02_coalesced", "03_smem_tiling",
                                           "04_1d_blocktiling", "05_2d_blocktiling"]


def source_of(path) -> str:
    """A kernel file with the kernel files it includes (a step may build on another's code)."""
    text = path.read_text()
    for inc in re.findall(r'#include "(\d\d_\w+\.cu)"', text):
        text += source_of(path.parent / inc)
    return text


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_entry_is_consistent_with_its_source(spec):
    src = source_of(spec.path)
    for entry in spec.entries:
        assert re.search(rf'extern "C" __global__ void[^;{{]*?\b{entry}\s*\(', src), entry
    for name in spec.defines:  # every constant has a default in the file and is overridable
        assert re.search(rf"#ifndef {name}\b", src), f"{spec.file}: no #ifndef {name}"
    head = spec.path.read_text().lstrip().splitlines()[0]
    assert head.startswith("//"), f"{spec.file} must open with a comment on what it changes"


def test_seed_kernel_geometry():
    s = registry.get("05")
    assert s.defines == {"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 8}
    assert s.threads == 64 and s.tile == (64, 64) and s.split
    one_d = registry.get("04")
    assert one_d.threads == 512 and one_d.defines["TM"] == 8


def test_with_defines_changes_geometry():
    s = registry.get("05").with_defines(BM=128, BN=128)
    assert s.threads == 256 and s.tile == (128, 128)
    with pytest.raises(ValueError, match="no constants"):
        registry.get("05").with_defines(XX=1)


def test_eval_int():
    assert eval_int("BM * BN / (TM * TN)", {"BM": 64, "BN": 64, "TM": 8, "TN": 8}) == 64
    assert eval_int(7, {}) == 7
    with pytest.raises(ValueError):
        eval_int("__import__('os')", {})
    with pytest.raises(ValueError, match="unknown constant"):
        eval_int("BQ", {})
    with pytest.raises(ValueError, match="division by zero"):
        eval_int("BM / 0", {"BM": 1})


def test_lookup_by_prefix_and_unknown_names():
    assert registry.get("05_2d").name == "05_2d_blocktiling"
    with pytest.raises(ValueError, match="unknown kernel"):
        registry.get("99_nothing")
    with pytest.raises(ValueError, match="ambiguous"):
        registry.get("0")


def _write(tmp_path, body):
    p = tmp_path / "kernels.toml"
    p.write_text(body)
    return p


def load_text(tmp_path, body):
    """The registry of a kernels.toml holding `body`."""
    return load_registry(_write(tmp_path, body))


def kernel_entry(*lines: str, main: str = "sgemm_x") -> str:
    """A [[kernel]] table named x (file x.cu, entry `main`), then `lines` as given: the
    registry tests' entries differ only there."""
    return (f'[[kernel]]\nname = "x"\nfile = "x.cu"\nmain = "{main}"\n'
            + "".join(f"{line}\n" for line in lines))


BASE = kernel_entry("block = [64]", "tile = [64, 64]", 'precision = "fp32"',
                    'baseline = "cublas_fp32"', main="sgemm_k")


def test_registry_rejects_bad_entries(tmp_path):
    assert list(load_registry(_write(tmp_path, BASE))) == ["x"]
    with pytest.raises(ValueError, match="twice"):
        load_registry(_write(tmp_path, BASE + BASE))
    with pytest.raises(ValueError, match="precision"):
        load_registry(_write(tmp_path, BASE.replace('"fp32"', '"fp8"')))
    with pytest.raises(ValueError, match="unknown keys"):
        load_registry(_write(tmp_path, BASE + 'colour = "red"\n'))
    with pytest.raises(ValueError, match="missing keys"):
        load_registry(_write(tmp_path, BASE.replace('main = "sgemm_k"\n', "")))
    with pytest.raises(ValueError, match="valid CUDA block"):
        load_registry(_write(tmp_path, BASE.replace("[64]", "[2048]")))
    with pytest.raises(ValueError, match="start with 'sgemm_'"):   # memcheck's filter
        load_registry(_write(tmp_path, BASE.replace('"sgemm_k"', '"k"')))
