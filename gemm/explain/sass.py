"""SASS as data: cuobjdump's --dump-sass text parsed into functions of instructions, each
instruction in a class (FFMA, tensor, shared loads, ...), the main K loop found, and two
listings compared with register numbers normalised. Pure text processing: no GPU, no tools.

The main K loop is a backward branch's range [target, branch]: among the loops with math in
them (tensor or FFMA instructions) the innermost ones (holding no other loop with math; a loop
without math inside, such as a wait on the clock, does not count), the one with the most
tensor, then FFMA instructions; where no loop has math, the longest innermost loop. A range
holding an unpredicated EXIT is not a loop (an out-of-line wait stub that jumps back into the
body is a backward branch too).
"""
from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum


class InstrClass(StrEnum):
    """What an instruction does, coarsely; the order is the order tables show."""
    FFMA = "ffma"              # FFMA (FP32 fused multiply-add)
    TENSOR = "tensor"          # HMMA, HGMMA, IMMA, ... (tensor cores)
    SHARED_LOAD = "lds"        # LDS, LDSM
    GLOBAL_LOAD = "ldg"        # LDG, LDGSTS (cp.async), UTMALDG (TMA), UBLKCP, LD
    STORE = "store"            # STG, STS, UTMASTG, ST, RED, ATOM
    LOCAL = "local"            # LDL, STL: spills and stack
    BARRIER = "barrier"        # BAR, SYNCS (mbarrier), DEPBAR, LDGDEPBAR, MEMBAR, WARPGROUP
    BRANCH = "branch"          # BRA, EXIT, BSSY, BSYNC, CALL, RET, ...
    INT = "int"                # integer and address arithmetic: IMAD, IADD3, LEA, SHF, LOP3
    OTHER = "other"


_BY_BASE = {
    InstrClass.FFMA: {"FFMA"},
    InstrClass.TENSOR: {"HMMA", "HGMMA", "IMMA", "IGMMA", "BMMA", "BGMMA", "DMMA", "QGMMA",
                        "UTCHMMA", "UTCQMMA"},
    InstrClass.SHARED_LOAD: {"LDS", "LDSM"},
    InstrClass.GLOBAL_LOAD: {"LDG", "LDGSTS", "UTMALDG", "UBLKCP", "LD", "UTMAPF"},
    InstrClass.STORE: {"STG", "STS", "ST", "UTMASTG", "STSM", "RED", "REDG", "ATOM", "ATOMG",
                       "ATOMS", "UTMAREDG"},
    InstrClass.LOCAL: {"LDL", "STL"},
    InstrClass.BARRIER: {"BAR", "SYNCS", "DEPBAR", "LDGDEPBAR", "MEMBAR", "WARPGROUP",
                         "WARPSYNC", "ERRBAR", "CCTL", "FENCE", "ARRIVES", "UCGABAR_ARV",
                         "UCGABAR_WAIT"},
    InstrClass.BRANCH: {"BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL", "BSSY", "BSYNC",
                        "BREAK", "BPT", "KILL", "NANOSLEEP", "YIELD"},
    InstrClass.INT: {"IMAD", "IADD3", "IADD", "LEA", "SHF", "LOP3", "ISETP", "IMNMX", "IABS",
                     "SEL", "SHL", "SHR", "PRMT", "POPC", "FLO", "BMSK", "SGXT", "IMUL",
                     "VIADD", "VIMNMX", "IDP", "IDP4A", "PLOP3", "LOP", "BREV", "ISCADD"},
}
CLASS_OF = {base: cls for cls, bases in _BY_BASE.items() for base in bases}
UNIFORM_INT = {"UIMAD", "UIADD3", "ULEA", "USHF", "ULOP3", "UISETP", "USEL", "UPRMT",
               "UPOPC", "UFLO", "UBMSK", "USGXT", "UPLOP3", "UIMNMX", "UBREV"}

# "        /*0070*/               @P1 BRA 0x1f0 ;       /* 0x00000000005c1947 */"
_LINE = re.compile(r"/\*([0-9a-fA-F]{4,})\*/\s+(?:(@!?U?P[0-9T]+)\s+)?([A-Z][A-Za-z0-9_.]*)"
                   r"([^;]*);")
_FUNC = re.compile(r"Function\s*:\s*(\S+)")
_TARGET = re.compile(r"(?:^|[\s,`(])0x([0-9a-fA-F]+)\b")
_REG = re.compile(r"\b(U?R)(?!Z\b)\d+\b|\b(U?P)(?!T\b)\d\b|\bB\d+\b")


@dataclass(frozen=True)
class Instr:
    addr: int
    opcode: str            # with modifiers: HGMMA.64x256x16.F32.BF16
    operands: str = ""
    pred: str = ""         # @P0, @!P1, ... or ""

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def klass(self) -> InstrClass:
        return classify(self.opcode)

    @property
    def target(self) -> int | None:
        """The branch target address of a BRA (cuobjdump prints absolute addresses)."""
        if self.base not in ("BRA", "BRX", "JMP", "CALL", "BSSY"):
            return None
        m = _TARGET.search(" " + self.operands)
        return int(m.group(1), 16) if m else None

    def text(self) -> str:
        return " ".join(p for p in (self.pred, self.opcode, self.operands) if p)


@dataclass(frozen=True)
class Function:
    name: str
    instrs: tuple[Instr, ...]


@dataclass(frozen=True)
class Loop:
    start: int             # the branch target (the loop head)
    end: int               # the address of the backward branch
    instrs: tuple[Instr, ...]


def classify(opcode: str) -> InstrClass:
    base = opcode.split(".")[0]
    if base in CLASS_OF:
        return CLASS_OF[base]
    if base in UNIFORM_INT:
        return InstrClass.INT
    return InstrClass.OTHER


def parse_sass(text: str) -> dict[str, Function]:
    """{function name: Function} from `cuobjdump --dump-sass` (or nvdisasm -c) output."""
    out: dict[str, list[Instr]] = {}
    current: list[Instr] | None = None
    for line in text.splitlines():
        m = _FUNC.search(line)
        if m:
            current = out.setdefault(m.group(1), [])
            continue
        m = _LINE.search(line)
        if m and current is not None:
            current.append(Instr(int(m.group(1), 16), m.group(3), m.group(4).strip(),
                                 m.group(2) or ""))
    return {name: Function(name, tuple(ins)) for name, ins in out.items()}


def mix(instrs) -> dict[str, int]:
    """Instructions per class, every class present (0 where none), in the classes' order."""
    counts = Counter(i.klass for i in instrs)
    return {c.value: counts.get(c, 0) for c in InstrClass}


def opcodes(instrs) -> Counter:
    """Instructions per full opcode (BAR.SYNC.DEFER_BLOCKING, HGMMA.64x256x16.F32.BF16)."""
    return Counter(i.opcode for i in instrs)


def loops(fn: Function) -> list[Loop]:
    """Every backward branch's range [target, branch] that is a loop (no unpredicated EXIT
    inside; not a branch to itself, the end-of-code trap)."""
    out = []
    for k, ins in enumerate(fn.instrs):
        t = ins.target
        if ins.base != "BRA" or t is None or t >= ins.addr:
            continue
        body = tuple(i for i in fn.instrs[:k + 1] if i.addr >= t)
        if any(i.base in ("EXIT", "RET") and not i.pred for i in body[:-1]):
            continue
        out.append(Loop(t, ins.addr, body))
    return out


def _work(loop: Loop) -> tuple[int, int]:
    """(tensor, FFMA) instructions in the loop."""
    k = Counter(i.klass for i in loop.instrs)
    return k.get(InstrClass.TENSOR, 0), k.get(InstrClass.FFMA, 0)


def _inside(inner: Loop, outer: Loop) -> bool:
    """`inner` lies within `outer` and is not it."""
    return (outer.start <= inner.start and inner.end <= outer.end
            and (inner.start, inner.end) != (outer.start, outer.end))


def inner_loops(fn: Function, loop: Loop) -> list[Loop]:
    """The loops nested in `loop` (a wait on the clock, a fill loop the compiler kept)."""
    return [lp for lp in loops(fn) if _inside(lp, loop)]


def main_loop(fn: Function) -> Loop | None:
    """The K loop: among the loops with math (tensor or FFMA instructions), the innermost
    ones (no loop with math inside them; a loop without math, a wait say, may be), the one
    with the most tensor, then FFMA instructions; where no loop has math, the longest
    innermost loop; None where the function has no loop."""
    found = loops(fn)
    working = [lp for lp in found if any(_work(lp))]
    pool = working or found
    inner = [lp for lp in pool if not any(_inside(o, lp) for o in pool)]
    if not inner:
        return None
    return max(inner, key=lambda lp: (*_work(lp), len(lp.instrs), -lp.start))


CLOCKS = ("SR_CLOCKLO", "SR_CLOCKHI", "SR_GLOBALTIMERLO", "SR_GLOBALTIMERHI")


def clock_reads(instrs) -> Counter:
    """Reads of the SM clock or the global timer (clock64(), %globaltimer: CS2R, S2R, S2UR
    of SR_CLOCKLO, ...), per full opcode."""
    return Counter(i.opcode for i in instrs if any(c in i.operands for c in CLOCKS))


_MMA_SHAPE = re.compile(r"^(16|8)(8)(\d+)$")


def mma_shape(opcode: str) -> tuple[int, int, int] | None:
    """(m, n, k) of a warp-wide HMMA/IMMA (HMMA.1688.F32.TF32: 16 x 8 x 8); None for any
    other instruction (HGMMA is warpgroup-wide)."""
    parts = opcode.split(".")
    if parts[0] not in ("HMMA", "IMMA") or len(parts) < 2:
        return None
    m = _MMA_SHAPE.match(parts[1])
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def normalise(ins: Instr, loop: Loop | None = None) -> str:
    """An instruction's text with register, predicate and barrier numbers and addresses
    taken out (R12 -> R, UP1 -> UP), so that a renumbering is no difference; a branch to the
    loop's head reads <head>, any other target <addr>."""
    ops = _REG.sub(lambda m: m.group(1) or m.group(2) or "B", ins.operands)
    pred = _REG.sub(lambda m: m.group(1) or m.group(2) or "B", ins.pred)
    t = ins.target
    if t is not None:
        label = "<head>" if loop is not None and t == loop.start else "<addr>"
        ops = re.sub(r"`?\(?0x[0-9a-fA-F]+\)?", label, ops, count=1)
    return " ".join(p for p in (pred, ins.opcode, ops.strip()) if p)


def normalised(instrs, loop: Loop | None = None) -> list[str]:
    return [normalise(i, loop) for i in instrs]


def collapse(lines: list[str], min_run: int = 3) -> list[str]:
    """Runs of `min_run` or more consecutive instructions of one opcode as one line
    ("FFMA x24"; operands dropped, .reuse flags and all), so that a rescheduled block of
    FFMAs is no difference and an instruction moved into it reads as one line."""
    def op(line: str) -> str:
        toks = line.split()
        return next((t for t in toks if not t.startswith("@")), "")
    out, i = [], 0
    while i < len(lines):
        j = i
        while j < len(lines) and op(lines[j]) == op(lines[i]):
            j += 1
        out += [f"{op(lines[i])} x{j - i}"] if j - i >= min_run else lines[i:j]
        i = j
    return out


def unified(old: list[str], new: list[str], cap: int = 40, old_name: str = "old",
            new_name: str = "new") -> list[str]:
    """A unified diff (one line of context) of two normalised listings, runs collapsed
    (collapse), at most `cap` lines (a last line says how many were left out)."""
    old, new = collapse(old), collapse(new)
    lines = [ln.rstrip("\n") for ln in difflib.unified_diff(old, new, old_name, new_name, n=1,
                                                             lineterm="")]
    if len(lines) > cap:
        lines = lines[:cap - 1] + [f"... {len(lines) - cap + 1} more diff lines"]
    return lines
