"""The package's layers, checked: each subpackage imports only the layers it may, and the
layers without a GPU work where the CUDA libraries cannot even be imported.

  core     -> core                               (pure data and rules)
  machine  -> core, machine                      (NVML from outside any CUDA context)
  cuda     -> core, cuda
  measure  -> core, cuda, measure
  store    -> core, store                         (the recorded history and the kept verdicts)
  track    -> core, machine, store, track         (the A/B measures through `gemm measure`)
  calibrate -> core, machine, store, track, calibrate (the runner's noise, on the gate's engine)
  record   -> core, store, track, record, measure (asv's setup_cache runs a sweep)
  explain  -> core, machine, explain              (nvcc, cuobjdump and git as tools, no GPU)
  cli, api, testing -> anything
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "gemm"
ALLOWED = {
    "core": {"core"},
    "machine": {"core", "machine"},
    "cuda": {"core", "cuda"},
    "measure": {"core", "cuda", "measure"},
    "store": {"core", "store"},
    "track": {"core", "machine", "store", "track"},
    "calibrate": {"core", "machine", "store", "track", "calibrate"},
    "record": {"core", "store", "track", "record", "measure"},
    "explain": {"core", "machine", "explain"},
}
GPU_LIBS = ("pycuda", "nvmath", "cuda", "pynvml")


def imported_modules(path: Path) -> set[str]:
    """The gemm modules a module under gemm/ imports, anywhere in it (module level or in
    functions), as dotted names; `from X import n` gives both X and X.n."""
    package = ["gemm", *path.relative_to(PKG).parent.parts]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            base = ".".join(base + ([node.module] if node.module else []))
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m.startswith("gemm.")}


def gemm_imports(path: Path) -> set[str]:
    """The gemm subpackages a module imports, anywhere in it (module level or in functions)."""
    return {m.split(".")[1] for m in imported_modules(path)} & (set(ALLOWED) |
                                                                 {"cli", "api", "testing"})


MODULES = sorted(p for layer in ALLOWED for p in (PKG / layer).glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_each_layer_imports_only_what_it_may(path):
    layer = path.relative_to(PKG).parts[0]
    extra = gemm_imports(path) - ALLOWED[layer]
    assert not extra, f"{path.relative_to(PKG)} ({layer}) imports {sorted(extra)}"


def test_the_contract_is_enforced():
    """The checker itself sees a forbidden import (here: track reaching for cuda or measure)."""
    fake = PKG / "track" / "_contract_probe.py"
    fake.write_text("def f():\n    from ..cuda.device import cuda\n")
    try:
        assert gemm_imports(fake) - ALLOWED["track"] == {"cuda"}
        for line in ("from ..measure import worker", "from ..measure.sweep import sweep",
                     "import gemm.measure.worker"):
            fake.write_text(f"{line}\n")
            assert gemm_imports(fake) - ALLOWED["track"] == {"measure"}, line
        fake.write_text("from ..machine.nvml import Sampler\n")
        assert gemm_imports(fake) == {"machine"}
    finally:
        fake.unlink()


def test_each_module_reads_in_one_sitting():
    """No module of the package is over 400 lines (the guide's ceiling)."""
    long = {str(p.relative_to(PKG)): n for p in sorted(PKG.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > 400}
    assert not long, f"modules over 400 lines: {long}"


BLOCK = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {GPU_LIBS!r}:
            raise ImportError(f"{{name}} is blocked: no GPU libraries on this machine")
sys.meta_path.insert(0, Block())
"""


def test_no_gpu_layers_and_the_cli_work_without_gpu_libraries():
    code = BLOCK + """
import gemm, gemm.api, gemm.testing
import gemm.core.registry, gemm.core.geometry, gemm.core.metrics, gemm.core.tolerance
import gemm.track.gate, gemm.track.confirm, gemm.track.abtest, gemm.store.history
import gemm.record.suite, gemm.record.recorder, gemm.record.plot, gemm.record.publish
import gemm.cuda.device, gemm.measure.sweep, gemm.measure.worker, gemm.machine.nvml
from gemm.cli import main
assert main(["list"]) == 0
assert main(["bench", "--sizes", "64"]) == 2          # one sentence: needs a GPU
assert main(["measure", "--probe"]) == 2
from gemm.cuda.device import probe
ok, why = probe()
assert not ok and "blocked" in why, why
with gemm.machine.nvml.Sampler() as s:         # no samples, no error
    pass
assert not s.samples and "blocked" in s.why, s.why
arms = gemm.machine.nvml.ArmSamples()          # the A/B's sampler: no figures, no error
assert arms.sampling(lambda arm, what: 1)("a", {}) == 1 and arms.pair("a", "b") is None
print("OK")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PKG.parent)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-2000:]
    assert "needs a CUDA GPU" in out.stderr and "Traceback" not in out.stderr

