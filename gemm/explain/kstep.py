"""The K loop per K step: how many K steps one trip of a build's K loop covers, the basis two
builds' loops are compared on, and the summary's part naming what changed in it. Pure.

A loop iteration is not a unit of work: where the compiler unrolls the K loop differently in
the two builds (an added wait made it unroll less), per-iteration counts halve or double and
say nothing of the change. So the loops are compared per K step where the K steps an
iteration covers are known:

1. **From the math** (`k_steps`): a K step of a block tile BM x BN (the registry's `tile`)
   is BM * BN * BK multiply-adds (BK the entry's define). In FP32 each is one thread's FFMA,
   so a K step is BM * BN * BK / threads FFMA in one thread's code; with warp-wide mma
   (HMMA.1688 = 16 x 8 x 8) it is BM * BN * BK / (warps * m * n * k) of them. An iteration
   covers (its FFMA, or its HMMA) / that many K steps, where that is a whole number.
2. **From the other side** (`basis`): where only one side is known, or neither (no BK
   define, warpgroup-wide HGMMA), and both sides have the same defines (so the math of a K
   step is the same), the ratio of their math per iteration (tensor instructions, else FFMA)
   where it is a whole number: the side known gives the other's; where neither is, the side
   with less math per iteration is taken as one K step and the words say so.
3. Else: per iteration, as before; where the math per iteration differs, the words say the
   unroll or the K step differs.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import sass


def k_steps(instrs, tile, threads: int, defines: dict) -> int | None:
    """The K steps one iteration of the loop `instrs` covers, from its math (rule 1); None
    where it cannot be told."""
    bk = defines.get("BK")
    if not isinstance(bk, int) or bk <= 0 or not tile or len(tile) < 2 or threads <= 0:
        return None
    macs = tile[0] * tile[1] * bk
    tensor = [i for i in instrs if i.klass == sass.InstrClass.TENSOR]
    if tensor:
        shapes = {sass.mma_shape(i.opcode) for i in tensor}
        if len(shapes) != 1 or None in shapes or threads % 32:
            return None
        m, n, k = shapes.pop()
        per, count = macs / (threads // 32 * m * n * k), len(tensor)
    else:
        per = macs / threads
        count = sum(1 for i in instrs if i.klass == sass.InstrClass.FFMA)
    if per != int(per) or per < 1 or count == 0 or count % int(per):
        return None
    return count // int(per)


def _math(loop) -> int:
    """Math per iteration: tensor instructions where there are any, else FFMA."""
    return loop.mix.get("tensor") or loop.mix.get("ffma") or 0


@dataclass(frozen=True)
class Basis:
    unit: str = "iteration"           # "K step" | "iteration"
    steps: tuple = (None, None)       # K steps per iteration of each loop (None: not known)
    note: str = ""                    # what the reader must know about the unit

    @property
    def per(self) -> str:
        return "per K step" if self.unit == "K step" else "per K-loop iteration"

    def div(self, side: int) -> int:
        return (self.steps[side] or 1) if self.unit == "K step" else 1


def _steps_words(s: int) -> str:
    return f"{s} K step{'' if s == 1 else 's'}"


def basis(a, b, same_defines: bool) -> Basis:
    """How two K loops (build.LoopInfo, with .steps and .mix) are compared: per K step where
    both sides' K steps per iteration are known or follow from the other's (rules 1 and 2),
    else per iteration."""
    if a is None or b is None:
        return Basis()
    sa, sb = a.steps, b.steps
    wa, wb = _math(a), _math(b)
    relative = False
    if (not sa or not sb) and same_defines and wa and wb and wa != wb and \
            max(wa, wb) % min(wa, wb) == 0:
        r = max(wa, wb) // min(wa, wb)
        if sa:
            sb = sa * wb // wa if (sa * wb) % wa == 0 else None
        elif sb:
            sa = sb * wa // wb if (sb * wa) % wb == 0 else None
        else:
            sa, sb, relative = (r, 1, True) if wa > wb else (1, r, True)
    if sa and sb:
        if sa == sb:
            return Basis("K step", (sa, sb), "" if sa == 1 else
                         f"each loop covers {_steps_words(sa)} per iteration")
        if relative:
            more, less = ("old", "new") if sa > sb else ("new", "old")
            return Basis("K step", (sa, sb), f"the {more} loop covers {max(sa, sb)} times the "
                         f"{less}'s K steps per iteration; the {less}'s taken as one")
        return Basis("K step", (sa, sb), f"the old loop covers {_steps_words(sa)} per "
                     f"iteration, the new {sb}")
    if wa != wb:
        return Basis("iteration", (sa, sb), f"the K loops' math per iteration differs ({wa} -> "
                     f"{wb}): the unroll or the K step differs")
    return Basis("iteration", (sa, sb))


def num(x: float, sign: bool = False) -> str:
    """3, 0.5, +3, -0.5: a count per K step, to a tenth."""
    text = f"{x:+.1f}" if sign else f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _per(counts: dict, d: int) -> dict:
    return {k: v / d for k, v in counts.items()}


def _delta(a: dict, b: dict) -> dict:
    return {k: b.get(k, 0) - a.get(k, 0) for k in dict.fromkeys([*a, *b])
            if abs(b.get(k, 0) - a.get(k, 0)) > 1e-9}


def loop_part(old, new, bs: Basis, salient, limit: int = 3) -> str:
    """The summary's words for the K loop (old, new: build.EntryBuild), on basis `bs`: the
    opcodes of the salient classes whose count moved ("+1 BAR.SYNC.DEFER_BLOCKING"), then
    what was added or removed that is no math: clock reads ("+3 CS2R (clock reads)") and
    inner loops ("+1 inner loop (a wait on the clock)"); where no salient opcode moved, the
    loop's size and the classes that moved most; then the unit and its note."""
    la, lb = old.loop, new.loop
    if la is None or lb is None:
        return ""
    da, db = bs.div(0), bs.div(1)
    ops = _delta(_per(old.loop_opcodes, da), _per(new.loop_opcodes, db))
    order = [c.value for c in salient]
    rank = {op: order.index(sass.classify(op).value) for op in ops
            if sass.classify(op).value in order}
    named = [f"{num(v, True)} {op}" for op, v in
             sorted(((op, v) for op, v in ops.items() if op in rank),
                    key=lambda kv: (rank[kv[0]], -abs(kv[1])))][:limit]
    salient_moved = bool(named)
    clocks = _delta(_per(la.clock_reads, da), _per(lb.clock_reads, db))
    named += [f"{num(v, True)} {op} (clock reads)" for op, v in clocks.items()]
    inner = lb.inner / db - la.inner / da
    if abs(inner) > 1e-9:
        waits = lb.inner_clock / db - la.inner_clock / da
        named.append(f"{num(inner, True)} inner loop{'' if abs(inner) == 1 else 's'}"
                     + (" (a wait on the clock)" if abs(waits) > 1e-9 else ""))
    mix = _delta(_per(la.mix, da), _per(lb.mix, db))
    size = (la.instructions / da, lb.instructions / db)
    moved = ", ".join(f"{k} {num(v, True)}" for k, v in
                      sorted(mix.items(), key=lambda kv: -abs(kv[1]))[:3])
    note = f" ({bs.note})" if bs.note else ""
    if salient_moved:
        return ", ".join(named) + f" {bs.per}{note}"
    if named:
        sized = f", {num(size[0])} -> {num(size[1])} instructions ({moved})" if mix else ""
        return ", ".join(named) + sized + f" {bs.per}{note}"
    if mix:
        unit = "per iteration" if bs.unit == "iteration" else bs.per
        return f"K loop {num(size[0])} -> {num(size[1])} instructions {unit} ({moved}){note}"
    return f"the same K loop {bs.per}{note}" if bs.note else ""
