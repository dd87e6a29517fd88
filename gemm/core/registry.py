"""The kernel registry: kernels/kernels.toml read into plain KernelSpec records.

A spec is data: which file, which entry points, which -D constants, the launch geometry as
arithmetic over those constants, the precision class and the cuBLAS baseline. Nothing here
touches a GPU.
"""
from __future__ import annotations

import ast
import operator
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from .precision import B_LAYOUTS, BASELINES, PRECISIONS, OperandFormat, baseline_name

NAME = re.compile(r"^[0-9a-z][0-9a-z_]*$")
ENTRY_PREFIX = "sgemm_"   # every kernel entry point; compute-sanitizer filters on it
ARCH = re.compile(r"^sm_(\d+)(a?)$")
SWIZZLES = ("none", "32B", "64B", "128B")
TMA_OPERANDS = ("A", "B", "C")   # C: the output, for kernels that store it with TMA


class RegistryError(ValueError):
    """kernels.toml cannot be used as it is; the message is one sentence naming the file and
    the entry (the command line prints it and exits 2)."""


def kernels_dir() -> Path:
    """Where the .cu files and kernels.toml live: $GEMM_KERNELS_DIR; else the copy shipped
    inside the installed package (gemm/kernels); else kernels/ of the source tree."""
    env = os.environ.get("GEMM_KERNELS_DIR")
    if env:
        return Path(env)
    pkg = Path(__file__).resolve().parent.parent
    shipped = pkg / "kernels"
    return shipped if (shipped / "kernels.toml").is_file() else pkg.parent / "kernels"


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv}


def eval_int(expr: int | str, names: dict[str, int]) -> int:
    """Evaluate integer arithmetic (+ - * / //, parentheses) over the kernel's defines.

    `/` is integer division, as in the CUDA source. Anything else is rejected.
    """
    if isinstance(expr, int):
        return expr

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"unknown constant {node.id!r} in {expr!r}")
            return int(names[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            right = ev(node.right)
            if isinstance(node.op, (ast.Div, ast.FloorDiv)) and right == 0:
                raise ValueError(f"division by zero in {expr!r}")
            return _BINOPS[type(node.op)](ev(node.left), right)
        raise ValueError(f"unsupported expression {expr!r}")

    return ev(ast.parse(str(expr), mode="eval"))


@dataclass(frozen=True)
class TmaOperand:
    """A TMA tensor map the launcher encodes for a kernel (registry `tma`): `operand` "A" or
    "B" as stored (B as N x K when b_layout = "nk"), or "C" (M x N float32, for TMA stores;
    listed last, after A and B), `box` the [rows, cols] tile one copy moves (expressions over
    the defines; cols are contiguous), `swizzle` the shared-memory swizzle (none | 32B | 64B |
    128B)."""
    operand: str
    box: tuple
    swizzle: str = "none"


def arch_support(arch: str, device_arch: str) -> str | None:
    """None if code built for `arch` runs on a device of `device_arch` (sm_XY), else why not.
    'native' always runs; sm_XYa (architecture-specific: wgmma, setmaxnreg) only on sm_XY;
    a plain sm_XY on sm_XY and later."""
    if arch == "native":
        return None
    want, dev = ARCH.match(arch), ARCH.match(device_arch)
    if not want or not dev:
        return f"cannot compare arch {arch!r} with device {device_arch!r}"
    if want.group(2):
        if want.group(1) != dev.group(1):
            return (f"built for {arch} (instructions of that GPU generation only); this "
                    f"device is {device_arch}")
        return None
    if int(dev.group(1)) < int(want.group(1)):
        return f"built for {arch}; this device is {device_arch}"
    return None


@dataclass(frozen=True)
class KernelSpec:
    name: str
    file: str
    main: str
    precision: str
    baseline: str
    block_expr: tuple = ()
    tile_expr: tuple = ()
    edge: str | None = None
    fallback: str | None = None    # entry for shapes that break `align` (over a ceil grid)
    align: int = 1                 # main/edge need N % align == 0 and K % align == 0
    defines: dict = field(default_factory=dict)
    arch: str = "native"
    sass: tuple = ()               # SASS mnemonics the main entry must contain
    tune: dict = field(default_factory=dict)   # search space: constant -> candidate values
    tuned: bool = False            # constants per size class from kernels/tuned/<gpu>.toml
    inject_delay: float = 0.0      # test-only fault injection (gemm.core.faults); 0: off
    b_layout: str = "kn"           # B as K x N row-major, or "nk": stored N x K (K-major)
    smem_expr: int | str = 0       # dynamic shared memory per block, bytes (expression)
    tma: tuple = ()                # TmaOperand: tensor maps passed first, by value
    persistent: bool = False       # launched as min(tiles, SMs) blocks that stride over the tiles
    pad_k: bool = False            # K off TMA's 16-byte rows: A and B staged padded (core.staging)
    split_k: bool = False          # below half a wave, K split over grid z (core.splitk)
    summary: str = ""

    def with_defines(self, **overrides: int) -> "KernelSpec":
        """The same kernel with some constants changed (tuning without edits). Constants
        given explicitly win over a tuned table: the result is not `tuned`."""
        unknown = set(overrides) - set(self.defines)
        if unknown:
            raise ValueError(f"{self.name} has no constants {sorted(unknown)}")
        spec = replace(self, defines={**self.defines, **overrides}, tuned=False)
        spec.validate()
        return spec

    @property
    def block(self) -> tuple[int, int, int]:
        dims = [eval_int(e, self.defines) for e in self.block_expr]
        return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]

    @property
    def threads(self) -> int:
        x, y, z = self.block
        return x * y * z

    @property
    def tile(self) -> tuple[int, int]:
        m, n = (eval_int(e, self.defines) for e in self.tile_expr)
        return m, n

    @property
    def smem(self) -> int:
        return eval_int(self.smem_expr, self.defines)

    @property
    def operands(self) -> OperandFormat:
        return OperandFormat(self.precision, self.b_layout)

    def tma_boxes(self) -> list[tuple[str, int, int, str]]:
        """[(operand, box rows, box cols, swizzle), ...] in parameter order."""
        return [(t.operand, eval_int(t.box[0], self.defines), eval_int(t.box[1], self.defines),
                 t.swizzle) for t in self.tma]

    @property
    def split(self) -> bool:
        return self.edge is not None

    @property
    def entries(self) -> tuple[str, ...]:
        return tuple(e for e in (self.main, self.edge, self.fallback) if e)

    @property
    def path(self) -> Path:
        return kernels_dir() / self.file

    def validate(self) -> None:
        """Raise ValueError if the entry is inconsistent (checked on load)."""
        where = f"kernel {self.name!r}"
        if not NAME.match(self.name):
            raise ValueError(f"{where}: names use lower-case letters, digits and _ only")
        bad = [e for e in self.entries if not e.startswith(ENTRY_PREFIX)]
        if bad:
            raise ValueError(f"{where}: entry points start with {ENTRY_PREFIX!r} (ci/memcheck.sh "
                             f"instruments kernels by that prefix): {bad}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"{where}: precision {self.precision!r} is not one of "
                             f"{', '.join(PRECISIONS)}")
        if self.b_layout not in B_LAYOUTS:
            raise ValueError(f"{where}: b_layout must be one of {B_LAYOUTS}")
        if self.baseline != baseline_name(self.precision, self.b_layout):
            raise ValueError(f"{where}: a {self.precision} kernel with b_layout "
                             f"{self.b_layout!r} is compared with "
                             f"{baseline_name(self.precision, self.b_layout)!r}, not "
                             f"{self.baseline!r}")
        if self.arch != "native" and not ARCH.match(self.arch):
            raise ValueError(f"{where}: arch is 'native' or sm_XY / sm_XYa, not {self.arch!r}")
        if self.smem < 0 or self.smem > 227 * 1024:
            raise ValueError(f"{where}: smem {self.smem} is not 0..227 KiB")
        ops = [t.operand for t in self.tma]
        if "C" in ops and (ops.count("C") > 1 or ops[-1] != "C" or not {"A", "B"} <= set(ops)):
            raise ValueError(f"{where}: a tma map of C (TMA stores) is the last, once, after "
                             f"the maps of A and B")
        for op, rows, cols, swz in self.tma_boxes():
            if op not in TMA_OPERANDS or swz not in SWIZZLES:
                raise ValueError(f"{where}: tma operands are {', '.join(TMA_OPERANDS)}, "
                                 f"swizzles {SWIZZLES}")
            if not (1 <= rows <= 256 and 1 <= cols <= 256):
                raise ValueError(f"{where}: tma box {rows} x {cols}: each side 1..256")
        if not 1 <= len(self.block_expr) <= 3 or len(self.tile_expr) != 2:
            raise ValueError(f"{where}: block needs 1-3 dims and tile exactly 2")
        if any(d < 1 for d in self.block) or self.threads > 1024:
            raise ValueError(f"{where}: block {self.block} is not a valid CUDA block")
        if any(t < 1 for t in self.tile):
            raise ValueError(f"{where}: tile {self.tile} must be positive")
        if not isinstance(self.align, int) or self.align < 1:
            raise ValueError(f"{where}: align must be a positive integer")
        if self.align > 1 and not self.fallback and not self.tma:
            raise ValueError(f"{where}: align = {self.align} needs a fallback entry for other shapes")
        if self.pad_k and (not self.tma or self.b_layout != "nk"):
            raise ValueError(f"{where}: pad_k stages A and B with K padded, so it needs tma maps "
                             f"and b_layout = \"nk\" (both operands' rows run along K)")
        if self.split_k and (self.tma or self.persistent or "BK" not in self.defines
                             or self.defines.get("SPLIT_K_OK") != 1):
            raise ValueError(f"{where}: split_k needs a kernel built with its split code "
                             f"(defines SPLIT_K_OK = 1) that steps K by BK (defines BK), and "
                             f"no tma maps or persistent grid (their launches have no grid z)")
        if self.persistent and self.split:
            raise ValueError(f"{where}: a persistent kernel has one entry over all tiles, no edge")
        if not isinstance(self.inject_delay, (int, float)) or not 0 <= self.inject_delay < 1:
            raise ValueError(f"{where}: inject_delay is a share of the kernel's time in [0, 1)")
        unknown = set(self.tune) - set(self.defines)
        if unknown or not all(isinstance(v, list) and v for v in self.tune.values()):
            raise ValueError(f"{where}: tune maps constants it defines to lists of values "
                             f"(unknown: {sorted(unknown)})")


_KEYS = {"name", "file", "main", "edge", "fallback", "align", "defines", "block", "tile",
         "precision", "baseline", "arch", "sass", "tune", "tuned", "inject_delay", "summary",
         "b_layout", "smem", "tma", "persistent", "pad_k", "split_k"}
_TMA_KEYS = {"operand", "box", "swizzle"}
_REQUIRED = {"name", "file", "main", "block", "tile", "precision", "baseline"}


def _spec_from_entry(entry: dict) -> KernelSpec:
    extra = set(entry) - _KEYS
    if extra:
        raise ValueError(f"registry entry {entry.get('name')!r}: unknown keys {sorted(extra)}")
    missing = _REQUIRED - set(entry)
    if missing:
        raise ValueError(f"registry entry {entry.get('name')!r}: missing keys {sorted(missing)}")
    tma = []
    for t in entry.get("tma", []):
        if not isinstance(t, dict) or set(t) - _TMA_KEYS or "operand" not in t \
                or len(t.get("box", ())) != 2:
            raise ValueError(f"registry entry {entry.get('name')!r}: each tma item is "
                             f"{{ operand, box = [rows, cols], swizzle }}")
        tma.append(TmaOperand(t["operand"], tuple(t["box"]), t.get("swizzle", "none")))
    spec = KernelSpec(
        name=entry["name"], file=entry["file"], main=entry["main"], edge=entry.get("edge"),
        fallback=entry.get("fallback"), align=entry.get("align", 1),
        defines=dict(entry.get("defines", {})), block_expr=tuple(entry["block"]),
        tile_expr=tuple(entry["tile"]), precision=entry["precision"],
        baseline=entry["baseline"], arch=entry.get("arch", "native"),
        sass=tuple(entry.get("sass", ())), tune=dict(entry.get("tune", {})),
        tuned=bool(entry.get("tuned", False)), inject_delay=entry.get("inject_delay", 0.0),
        b_layout=entry.get("b_layout", "kn"), smem_expr=entry.get("smem", 0), tma=tuple(tma),
        persistent=bool(entry.get("persistent", False)), pad_k=bool(entry.get("pad_k", False)),
        split_k=bool(entry.get("split_k", False)), summary=entry.get("summary", ""))
    spec.validate()
    return spec


def load_registry(path: Path | None = None, files: bool = False) -> dict[str, KernelSpec]:
    """The specs of a kernels.toml (default: kernels_dir()'s), checked entry by entry;
    `files`: each entry's .cu file must be beside it too. Raises RegistryError."""
    path = Path(path or kernels_dir() / "kernels.toml")
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise RegistryError(f"the kernel registry {path} cannot be read "
                            f"({exc.strerror or exc}); set GEMM_KERNELS_DIR to a directory "
                            f"holding kernels.toml") from None
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path} is not valid TOML: {exc}") from None
    entries = data.get("kernel", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise RegistryError(f"{path}: kernels are [[kernel]] tables")
    specs: dict[str, KernelSpec] = {}
    for i, entry in enumerate(entries):
        try:
            spec = _spec_from_entry(entry)
        except (ValueError, TypeError, KeyError, SyntaxError) as exc:
            what = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            if not what.startswith(("kernel ", "registry entry ")):
                what = f"kernel {entry.get('name', f'#{i + 1}')!r}: {what}"
            raise RegistryError(f"{path}: {what}") from None
        if spec.name in specs:
            raise RegistryError(f"{path}: kernel {spec.name!r} is registered twice")
        if files and not (path.parent / spec.file).is_file():
            raise RegistryError(f"{path}: kernel {spec.name!r} names {spec.file}, which is not "
                                f"in {path.parent}")
        specs[spec.name] = spec
    return specs


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def kernel_sources(read, file: str) -> dict[str, str | None]:
    """{name: text} of a kernel's .cu `file` and what it includes from kernels/ (quoted
    includes, transitively), in the order met; `read(name)` gives a file's text (None where
    it has none)."""
    out: dict[str, str | None] = {}
    todo = [file]
    while todo:
        name = todo.pop(0)
        if name not in out:
            out[name] = read(name)
            todo += _INCLUDE.findall(out[name] or "")
    return out


@lru_cache(maxsize=1)
def registry() -> dict[str, KernelSpec]:
    """The registered kernels (kernels_dir()'s kernels.toml, every .cu file present)."""
    return load_registry(files=True)


def names() -> list[str]:
    return list(registry())


def baselines() -> list[str]:
    """The cuBLAS configurations the registered kernels are compared with."""
    return sorted({s.baseline for s in registry().values()})


def label(name: str) -> str:
    """A kernel's name as tables and plots show it: with its arithmetic where that is not
    FP32 ("13_tf32_wgmma_tma [TF32]"); a name no longer registered as it is."""
    try:
        p = get(name).precision
    except ValueError:
        return name
    return name if p == "fp32" else f"{name} [{p.upper()}]"


def get(name: str) -> KernelSpec:
    """Look a kernel up by its full name or a unique prefix (`05`, `05_2d`)."""
    reg = registry()
    if name in reg:
        return reg[name]
    hits = [n for n in reg if n.startswith(name)]
    if len(hits) == 1:
        return reg[hits[0]]
    if not hits:
        raise ValueError(f"unknown kernel {name!r}; registered: {', '.join(reg)}")
    raise ValueError(f"kernel name {name!r} is ambiguous: {', '.join(hits)}")
