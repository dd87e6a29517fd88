"""The package's layers, checked: each subpackage imports only the layers it may, and the
layers without a GPU work where the CUDA libraries cannot even be imported.

  core     -> core                               (pure data and rules)
  cuda     -> core, cuda
  measure  -> core, cuda, measure
  track    -> core, track                         (the A/B measures through `gemm measure`)
  record   -> core, track, record, measure        (asv's setup_cache runs a sweep)
  explain  -> core, explain                       (nvcc, cuobjdump and git as tools, no GPU)
  cli, api, testing -> anything

and every layer -> gemm.measure.nvml (SHARED: the NVML sampler that the A/B and gemm explain
both use; it imports no gemm layer and pynvml only lazily).
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "gemm"
ALLOWED = {
    "core": {"core"},
    "cuda": {"core", "cuda"},
    "measure": {"core", "cuda", "measure"},
    "track": {"core", "track"},
    "record": {"core", "track", "record", "measure"},
    "explain": {"core", "explain"},
}
SHARED = {("measure", "nvml")}
GPU_LIBS = ("pycuda", "nvmath", "cuda", "pynvml")


def gemm_imports(path: Path) -> set[str]:
    """The gemm subpackages a module imports, anywhere in it (module level or in functions),
    but for the SHARED modules."""
    layer = path.relative_to(PKG).parts[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                parts = [layer] + (node.module or "").split(".")
            elif node.level == 2:
                parts = (node.module or "").split(".")
            elif node.level == 0 and (node.module or "").startswith("gemm."):
                parts = node.module.split(".")[1:]
            else:
                continue
            names = [tuple(parts[:2])] if len(parts) > 1 else [(parts[0], a.name)
                                                                for a in node.names]
            if all(n in SHARED for n in names):
                continue
            if parts[0] in ALLOWED or parts[0] in ("cli", "api", "testing"):
                out.add(parts[0])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("gemm.") and tuple(a.name.split(".")[1:3]) not in SHARED:
                    out.add(a.name.split(".")[1])
    return out


MODULES = sorted(p for layer in ALLOWED for p in (PKG / layer).glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_each_layer_imports_only_what_it_may(path):
    layer = path.relative_to(PKG).parts[0]
    extra = gemm_imports(path) - ALLOWED[layer]
    assert not extra, f"{path.relative_to(PKG)} ({layer}) imports {sorted(extra)}"


def test_the_contract_is_enforced():
    """The checker itself sees a forbidden import (here: track reaching for cuda, and for
    gemm.measure beyond its shared NVML sampler)."""
    fake = PKG / "track" / "_contract_probe.py"
    fake.write_text("def f():\n    from ..cuda.device import cuda\n")
    try:
        assert gemm_imports(fake) - ALLOWED["track"] == {"cuda"}
        for line in ("from ..measure import nvml, worker", "from ..measure.sweep import sweep",
                     "import gemm.measure.worker"):
            fake.write_text(f"{line}\n")
            assert gemm_imports(fake) - ALLOWED["track"] == {"measure"}, line
        for line in ("from ..measure import nvml", "from ..measure.nvml import Sampler",
                     "import gemm.measure.nvml"):
            fake.write_text(f"{line}\n")
            assert gemm_imports(fake) == set(), line
    finally:
        fake.unlink()


@pytest.mark.parametrize("layer, module", sorted(SHARED))
def test_a_shared_module_imports_no_layer(layer, module):
    """A module every layer may import stays below them all: it imports no gemm module."""
    tree = ast.parse((PKG / layer / f"{module}.py").read_text())
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    levels = [n.level for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not any(x.startswith("gemm") for x in names) and not any(levels), names


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
import gemm.track.gate, gemm.track.confirm, gemm.track.abtest, gemm.track.history
import gemm.record.suite, gemm.record.recorder, gemm.record.plot, gemm.record.publish
import gemm.cuda.device, gemm.measure.sweep, gemm.measure.worker, gemm.measure.nvml
from gemm.cli import main
assert main(["list"]) == 0
assert main(["bench", "--sizes", "64"]) == 2          # one sentence: needs a GPU
assert main(["measure", "--probe"]) == 2
from gemm.cuda.device import probe
ok, why = probe()
assert not ok and "blocked" in why, why
with gemm.measure.nvml.Sampler() as s:         # no samples, no error
    pass
assert not s.samples and "blocked" in s.why, s.why
arms = gemm.measure.nvml.ArmSamples()          # the A/B's sampler: no figures, no error
assert arms.sampling(lambda arm, what: 1)("a", {}) == 1 and arms.pair("a", "b") is None
print("OK")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PKG.parent)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-2000:]
    assert "needs a CUDA GPU" in out.stderr and "Traceback" not in out.stderr

