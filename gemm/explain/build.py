"""Build one side of an explanation: a revision's kernel, with that tree's own registry entry,
defines (tuned constants for the size class where the entry is tuned, then any overrides)
and nvcc flags, compiled for sm_90 (or the entry's arch) into a cubin, then read back with
ptxas -v and cuobjdump (resources, SASS). No GPU: nvcc and cuobjdump only.

A revision is checked out with `git worktree add --detach` into a temporary directory and
removed afterwards; "." is the working tree as it is (uncommitted edits included).
"""
from __future__ import annotations

import ast
import contextlib
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..core import geometry, git, tuning
from ..core.splitk import split_k
from ..core.problem import Problem, ShapeRefused
from ..core.registry import (KernelSpec, RegistryError, kernel_sources, kernels_dir,
                             load_registry)
from . import kstep
from . import resources as res
from . import sass

DEFAULT_ARCH = "sm_90"
DEFAULT_GPU = "h200"           # the tuned table (kernels/tuned/<gpu>.toml) a tuned kernel uses
BASE_OPTIONS = ("-O3", "-std=c++17", "-lineinfo")   # gemm/cuda/loader.py's, where a tree has none
TIMEOUT_S = 180
WORKTREE = "."


class ExplainError(RuntimeError):
    """The explanation cannot be made (a tool missing, an unknown revision or kernel, nvcc
    failed); the message is one sentence."""


@dataclass(frozen=True)
class Tools:
    nvcc: str
    cuobjdump: str


def _wheel_tool(name: str) -> str | None:
    roots = {sysconfig.get_paths()["purelib"], *(p for p in sys.path if p.endswith("packages"))}
    for root in sorted(roots):
        hits = sorted(glob.glob(os.path.join(root, "nvidia", "*", "bin", name)))
        if hits:
            return hits[-1]
    return None


def find_tools() -> Tools:
    """nvcc from the PATH (or $CUDA_HOME/bin); cuobjdump from the PATH, the toolkit beside
    nvcc, or NVIDIA's nvidia-cuda-cuobjdump wheel (pip install .[sass])."""
    nvcc = shutil.which("nvcc") or shutil.which("nvcc", path=os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin"))
    if not nvcc:
        raise ExplainError("nvcc is not on the PATH (nor in $CUDA_HOME/bin): gemm explain "
                           "compiles the kernels with it")
    dump = (shutil.which("cuobjdump") or shutil.which("cuobjdump", path=os.path.dirname(nvcc))
            or _wheel_tool("cuobjdump"))
    if not dump:
        raise ExplainError("no cuobjdump: install the CUDA toolkit's or `pip install .[sass]` "
                           "(nvidia-cuda-cuobjdump)")
    return Tools(nvcc, dump)


def _git(repo, *args) -> str:
    try:
        return git.run(repo, *args)
    except git.GitError as exc:
        raise ExplainError(str(exc)) from None


def resolve_rev(repo, rev: str) -> str | None:
    """The commit a revision names (None for the working tree, ".")."""
    if rev == WORKTREE:
        return None
    try:
        return git.run(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except git.GitError:
        raise ExplainError(f"{rev!r} is not a commit of the repository at {repo}") from None


@dataclass(frozen=True)
class Tree:
    rev: str                   # as asked: HEAD~1, a sha, "."
    commit: str | None         # the full sha; None for the working tree
    kernels: Path              # its kernels/ (kernels.toml, the .cu files)
    root: Path | None          # the checkout (None: an installed package's kernels)


@contextlib.contextmanager
def checkout(repo, revs: list[str]):
    """{rev: Tree} for each revision, each commit in its own temporary worktree (one per
    distinct commit), removed afterwards."""
    trees, made, parent = {}, [], None
    try:
        for rev in revs:
            sha = resolve_rev(repo, rev)
            if sha is None:
                root = Path(repo) if (Path(repo) / "kernels" / "kernels.toml").is_file() else None
                trees[rev] = Tree(rev, None, root / "kernels" if root else kernels_dir(), root)
                continue
            same = next((t for t in trees.values() if t.commit == sha), None)
            if same:
                trees[rev] = Tree(rev, sha, same.kernels, same.root)
                continue
            parent = parent or Path(tempfile.mkdtemp(prefix="gemm-explain-"))
            root = parent / sha[:12]
            _git(repo, "worktree", "add", "--detach", "--force", str(root), sha)
            made.append(root)
            trees[rev] = Tree(rev, sha, root / "kernels", root)
        yield trees
    finally:
        for root in made:
            with contextlib.suppress(ExplainError):
                _git(repo, "worktree", "remove", "--force", str(root))
        if parent:
            shutil.rmtree(parent, ignore_errors=True)


def base_options(tree: Tree) -> tuple[str, ...]:
    """The tree's own nvcc flags: BASE_OPTIONS of its gemm/cuda/loader.py, read as a literal
    (its code is not imported); ours where it has none."""
    path = tree.root / "gemm" / "cuda" / "loader.py" if tree.root else None
    if path and path.is_file():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "BASE_OPTIONS"
                                                    for t in node.targets):
                with contextlib.suppress(ValueError):
                    return tuple(ast.literal_eval(node.value))
    return BASE_OPTIONS


def lookup(specs: dict[str, KernelSpec], name: str, where: str) -> KernelSpec:
    if name in specs:
        return specs[name]
    hits = [n for n in specs if n.startswith(name)]
    if len(hits) == 1:
        return specs[hits[0]]
    raise ExplainError(f"{where} has no kernel {name!r}" if not hits else
                       f"kernel {name!r} is ambiguous in {where}: {', '.join(hits)}")


def parse_defines(items) -> dict[str, int]:
    """["STAGES=3", ...] -> {"STAGES": 3}."""
    out = {}
    for item in items or ():
        k, sep, v = str(item).partition("=")
        try:
            out[k.strip()] = int(v, 0)
        except ValueError:
            raise ExplainError(f"define {item!r} is not NAME=INTEGER") from None
        if not sep or not k.strip():
            raise ExplainError(f"define {item!r} is not NAME=INTEGER")
    return out


def resolve_spec(tree: Tree, name: str, prob: Problem, gpu: str = DEFAULT_GPU,
                 overrides: dict | None = None) -> tuple[KernelSpec, str]:
    """(the spec as that tree builds it for `prob`, where its defines come from)."""
    where = f"{tree.rev} ({tree.commit[:10]})" if tree.commit else "the working tree"
    try:
        spec = lookup(load_registry(tree.kernels / "kernels.toml", files=True), name, where)
    except RegistryError as exc:
        raise ExplainError(str(exc)) from None
    source = "registry defaults"
    if spec.tuned:
        bucket = tuning.tuning_bucket(prob)
        table = tree.kernels / "tuned" / f"{gpu}.toml"
        won = None
        if table.is_file():
            with open(table, "rb") as f:
                won = tomllib.load(f).get(spec.name, {}).get(bucket)
        if won and isinstance(won.get("defines"), dict):
            spec = spec.with_defines(**won["defines"])
            source = f"tuned for {gpu} ({bucket})"
        else:
            source = f"registry defaults (no tuned {bucket} entry for {gpu})"
    if overrides:
        try:
            spec = spec.with_defines(**overrides)
        except ValueError as exc:
            raise ExplainError(str(exc)) from None
        source += " + " + " ".join(f"{k}={v}" for k, v in overrides.items())
    return spec, source


@dataclass(frozen=True)
class LoopInfo:
    start: int
    end: int
    instructions: int
    mix: dict
    steps: int | None = None   # K steps one iteration covers (gemm.explain.kstep; None: unknown)
    clock_reads: dict = field(default_factory=dict)   # opcode -> reads of the clock
    inner: int = 0             # loops nested in it (a wait, say)
    inner_clock: int = 0       # ... of them reading the clock

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "instructions": self.instructions,
                "mix": self.mix, "steps": self.steps, "clock_reads": self.clock_reads,
                "inner_loops": self.inner}


def loop_info(fn: sass.Function, loop: sass.Loop, spec: KernelSpec) -> LoopInfo:
    inner = sass.inner_loops(fn, loop)
    return LoopInfo(loop.start, loop.end, len(loop.instrs), sass.mix(loop.instrs),
                    kstep.k_steps(loop.instrs, spec.tile, spec.threads, spec.defines),
                    dict(sass.clock_reads(loop.instrs)), len(inner),
                    sum(1 for lp in inner if sass.clock_reads(lp.instrs)))


@dataclass
class EntryBuild:
    name: str
    resources: res.Resources
    occupancy: res.Occupancy
    mix: dict
    loop: LoopInfo | None
    listing: tuple = ()        # the whole function, normalised (sass.normalise)
    loop_listing: tuple = ()   # the K loop's body, normalised
    loop_opcodes: dict = field(default_factory=dict)   # full opcode -> count in the loop

    def to_dict(self) -> dict:
        return {"resources": self.resources.to_dict(), "occupancy": self.occupancy.to_dict(),
                "mix": self.mix, "loop": self.loop.to_dict() if self.loop else None,
                "sass_sha256": hashlib.sha256("\n".join(self.listing).encode()).hexdigest()}


@dataclass(frozen=True)
class Launch:
    entries: tuple             # ((entry, (gx, gy, gz)), ...) in launch order
    block: tuple
    threads: int
    dynamic_smem: int
    tiles: int                 # tiles of C (blocks of a non-persistent launch)
    blocks_per_sm: int         # the main entry's
    waves: float               # blocks launched (tiles x split-K's S) / (SMs * blocks per SM)
    persistent: bool = False
    refused: str = ""          # why the kernel refuses this shape, if it does

    def to_dict(self) -> dict:
        return {"entries": [[e, list(g)] for e, g in self.entries], "block": list(self.block),
                "threads": self.threads, "dynamic_smem": self.dynamic_smem,
                "tiles": self.tiles, "blocks_per_sm": self.blocks_per_sm,
                "waves": round(self.waves, 3), "persistent": self.persistent,
                "refused": self.refused}


@dataclass
class Build:
    rev: str
    commit: str | None
    kernel: str
    arch: str
    defines: dict
    defines_source: str
    options: tuple
    source_sha256: str
    entries: dict              # entry -> EntryBuild, in the spec's order (main, edge, fallback)
    launch: Launch

    def to_dict(self) -> dict:
        return {"rev": self.rev, "commit": self.commit, "kernel": self.kernel,
                "arch": self.arch, "defines": self.defines,
                "defines_source": self.defines_source, "nvcc_options": list(self.options),
                "source_sha256": self.source_sha256,
                "entries": {k: v.to_dict() for k, v in self.entries.items()},
                "launch": self.launch.to_dict()}


_ANGLE = re.compile(r'^\s*#\s*include\s*<([^>]+)>', re.MULTILINE)


def source_hash(kernels: Path, spec: KernelSpec) -> str:
    """The kernel's .cu file and what it includes from kernels/ (transitively), and any file
    there that an #include <name> would find first (nvcc is given -I kernels/), present or not."""
    def read(name: str) -> str | None:
        p = kernels / name
        return p.read_text(errors="replace") if p.is_file() else None
    files = kernel_sources(read, spec.file)
    for name in {n for text in list(files.values()) for n in _ANGLE.findall(text or "")}:
        files.setdefault(f"<{name}>", read(name))
    h = hashlib.sha256()
    for name, text in files.items():
        h.update(name.encode() + b"\0" + (text.encode() if text is not None else b"\1"))
    return h.hexdigest()


_compiled: dict = {}


def _run(cmd: list[str], what: str, env: dict | None = None) -> subprocess.CompletedProcess:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise ExplainError(f"{what} took over {TIMEOUT_S} s") from None
    except OSError as exc:
        raise ExplainError(f"{what}: {exc}") from None
    if out.returncode != 0:
        raise ExplainError(f"{what} failed:\n{out.stderr.strip()[-1500:]}")
    return out


def compile_cubin(tools: Tools, kernels: Path, spec: KernelSpec, arch: str,
                  options: tuple) -> tuple[str, str, str, str]:
    """(ptxas -v report, cuobjdump --dump-sass, cuobjdump --dump-resource-usage, the cubin's
    launch-relevant ELF sections: resources.elf_facts), cached in this process by source, flags
    and arch."""
    opts = [*options, *(f"-D{k}={v}" for k, v in sorted(spec.defines.items()))]
    key = (source_hash(kernels, spec), spec.file, tuple(opts), arch, tools.nvcc)
    if key in _compiled:
        return _compiled[key]
    env = {**os.environ, "PATH": os.path.dirname(tools.cuobjdump) + os.pathsep
           + os.environ.get("PATH", "")}
    with tempfile.TemporaryDirectory(prefix="gemm-explain-build-") as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        ptxas = _run([tools.nvcc, "--cubin", "-arch", arch, *opts, f"-I{kernels}",
                      "-Xptxas", "-v", "-o", cubin, str(kernels / spec.file)],
                     f"nvcc for {spec.name}")
        dump = _run([tools.cuobjdump, "--dump-sass", cubin], "cuobjdump --dump-sass", env)
        usage = _run([tools.cuobjdump, "--dump-resource-usage", cubin],
                     "cuobjdump --dump-resource-usage", env)
        elf = _run([tools.cuobjdump, "--dump-elf", cubin], "cuobjdump --dump-elf", env)
    _compiled[key] = (ptxas.stderr + ptxas.stdout, dump.stdout, usage.stdout,
                      res.elf_facts(elf.stdout))
    return _compiled[key]


def launch_of(spec: KernelSpec, prob: Problem, blocks: int,
              limits: res.SmLimits = res.SM90) -> Launch:
    """The launch at `prob`: grids from gemm.core.geometry (persistent: min(tiles, SMs))."""
    try:
        calls = geometry.plan(spec, prob)
    except ShapeRefused as exc:
        return Launch((), spec.block, spec.threads, spec.smem, 0, blocks, 0.0,
                      spec.persistent, str(exc))
    tiles = sum(gx * gy * gz for _, (gx, gy, gz) in calls)
    if spec.persistent:
        calls = [(e, geometry.persistent_grid(g, limits.sms)) for e, g in calls]
    split = split_k(spec, prob, limits.sms)
    if split is not None:                # S blocks per tile (grid z), then the reduction
        calls = [(e, (g[0], g[1], split.splits)) for e, g in calls]
    launched = tiles * (split.splits if split is not None else 1)
    waves = launched / (limits.sms * blocks) if blocks else float("inf")
    return Launch(tuple(calls), spec.block, spec.threads, spec.smem, tiles, blocks, waves,
                  spec.persistent)


def build(tools: Tools, tree: Tree, name: str, prob: Problem, arch: str = DEFAULT_ARCH,
          gpu: str = DEFAULT_GPU, overrides: dict | None = None,
          limits: res.SmLimits = res.SM90) -> Build:
    """One side: compile the tree's kernel for `prob` and read what it became."""
    spec, source = resolve_spec(tree, name, prob, gpu, overrides)
    target = arch if spec.arch == "native" else spec.arch
    options = base_options(tree)
    ptxas, dump, usage, _ = compile_cubin(tools, tree.kernels, spec, target, options)
    used = res.combine(res.parse_ptxas(ptxas), res.parse_resource_usage(usage), limits)
    fns = sass.parse_sass(dump)
    entries = {}
    for entry in spec.entries:
        if entry not in used or entry not in fns:
            raise ExplainError(f"{spec.name}: {entry} is not in the cubin nvcc made "
                               f"(found {', '.join(sorted(fns)) or 'nothing'})")
        r, fn = used[entry], fns[entry]
        occ = res.occupancy(r.regs, spec.threads, r.static_smem + spec.smem, limits)
        loop = sass.main_loop(fn)
        entries[entry] = EntryBuild(
            entry, r, occ, sass.mix(fn.instrs),
            loop_info(fn, loop, spec) if loop else None,
            tuple(sass.normalised(fn.instrs, loop)),
            tuple(sass.normalised(loop.instrs, loop)) if loop else (),
            dict(sass.opcodes(loop.instrs)) if loop else {})
    main_blocks = entries[spec.main].occupancy.blocks
    return Build(tree.rev, tree.commit, spec.name, target, dict(spec.defines), source, options,
                 source_hash(tree.kernels, spec), entries, launch_of(spec, prob, main_blocks,
                                                                      limits))
