"""Two builds of a kernel compared: what changed in the defines, the resources of each entry
point, its SASS mix (whole function and the K loop per iteration; the summary compares the
K loop per K step where it can, gemm.explain.kstep), the K loop's body and the launch, and
one summary line naming the largest differences (with, where the sides ran on a GPU,
gemm.explain.gpureport's: time, counters, stalls, machine; for a drop the gate confirmed,
the machine over its A/B, gemm.explain.abmachine). Pure: builds in, data out.

The JSON document (schema gemm.explain/1) is described in docs/explain.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import kstep
from . import resources as res
from . import sass
from .abmachine import ABMachine
from .build import Build
from .gpureport import GpuReport, gpu_parts

SCHEMA = "gemm.explain/1"
IDENTICAL = "identical SASS and launch: the harness or the machine"
RESOURCE_FIELDS = ("regs", "stack", "spill_stores", "spill_loads", "local", "static_smem",
                   "dynamic_smem", "blocks_per_sm", "limiter")
LAUNCH_FIELDS = ("grid", "block", "dynamic_smem", "tiles", "blocks_per_sm", "waves", "refused")
# the K loop's classes a summary names first (what moves a GEMM's time)
SALIENT = (sass.InstrClass.BARRIER, sass.InstrClass.TENSOR, sass.InstrClass.GLOBAL_LOAD,
           sass.InstrClass.SHARED_LOAD, sass.InstrClass.LOCAL, sass.InstrClass.STORE,
           sass.InstrClass.FFMA)
DIFF_LINES = 40


def _pairs(old: dict, new: dict) -> dict:
    """{key: [old, new]} for the keys whose values differ (None where a side lacks it)."""
    return {k: [old.get(k), new.get(k)] for k in dict.fromkeys([*old, *new])
            if old.get(k) != new.get(k)}


def entry_facts(b: Build, entry: str) -> dict:
    e = b.entries[entry]
    return {**e.resources.to_dict(), "dynamic_smem": b.launch.dynamic_smem,
            "blocks_per_sm": e.occupancy.blocks, "limiter": e.occupancy.limiter}


def launch_facts(b: Build) -> dict:
    ln = b.launch
    return {"grid": [list(g) for _, g in ln.entries], "block": list(ln.block),
            "dynamic_smem": ln.dynamic_smem, "tiles": ln.tiles,
            "blocks_per_sm": ln.blocks_per_sm, "waves": round(ln.waves, 3),
            "refused": ln.refused}


@dataclass
class EntryDiff:
    entry: str
    present: tuple                       # (in old, in new)
    resources: dict = field(default_factory=dict)    # field -> [old, new], changed only
    mix: dict = field(default_factory=dict)          # class -> [old, new], changed only
    loop_mix: dict = field(default_factory=dict)     # class -> [old, new] per iteration
    loop_opcodes: dict = field(default_factory=dict)  # opcode -> [old, new] per iteration
    loop_diff: list = field(default_factory=list)    # unified diff, registers normalised
    identical_sass: bool = False
    loop_size: tuple = (0, 0)                        # K-loop instructions, old and new
    basis: kstep.Basis = field(default_factory=kstep.Basis)   # per K step or per iteration
    loop_words: str = ""                             # the summary's part for the K loop

    def to_dict(self) -> dict:
        return {"present": list(self.present), "resources": self.resources, "mix": self.mix,
                "loop_mix": self.loop_mix, "loop_opcodes": self.loop_opcodes,
                "loop_diff": self.loop_diff, "loop_instructions": list(self.loop_size),
                "loop_steps": list(self.basis.steps), "loop_unit": self.basis.unit,
                "identical_sass": self.identical_sass}


@dataclass
class Explanation:
    kernel: str
    size: str
    old: Build
    new: Build
    limits: res.SmLimits = res.SM90
    defines: dict = field(default_factory=dict)   # name -> [old, new], changed only
    entries: dict = field(default_factory=dict)   # entry -> EntryDiff
    launch: dict = field(default_factory=dict)    # field -> [old, new], changed only
    options: list = field(default_factory=list)   # [old nvcc flags, new] where they differ
    summary: str = ""
    gpu: GpuReport | None = None                  # both sides on the GPU (None: --static)
    ab_machine: ABMachine | None = None           # the gate's A/B of these commits, its machine

    @property
    def identical_sass(self) -> bool:
        return all(d.identical_sass for d in self.entries.values())

    @property
    def identical(self) -> bool:
        return self.identical_sass and not self.launch

    def to_json(self) -> dict:
        lim = self.limits
        return {"schema": SCHEMA, "kernel": self.kernel, "size": self.size,
                "mode": "gpu" if self.gpu is not None and self.gpu.ran else "static",
                "machine": {"name": lim.name, "sms": lim.sms, "regs_per_sm": lim.regs_per_sm,
                            "reg_unit": lim.reg_unit, "smem_per_sm": lim.smem_per_sm,
                            "smem_per_block": lim.smem_per_block,
                            "smem_reserved": lim.smem_reserved,
                            "threads_per_sm": lim.threads_per_sm,
                            "blocks_per_sm": lim.blocks_per_sm},
                "old": self.old.to_dict(), "new": self.new.to_dict(),
                "diff": {"defines": self.defines, "nvcc_options": self.options,
                         "entries": {k: v.to_dict() for k, v in self.entries.items()},
                         "launch": self.launch, "identical_sass": self.identical_sass,
                         "identical": self.identical},
                "gpu": self.gpu.to_dict() if self.gpu is not None else None,
                "ab_machine": self.ab_machine.to_dict() if self.ab_machine else None,
                "summary": self.summary}


def diff_entry(old: Build, new: Build, entry: str) -> EntryDiff:
    """An entry point's differences; its K loop compared per K step where the K steps an
    iteration covers are known (gemm.explain.kstep), else per iteration."""
    a, b = old.entries.get(entry), new.entries.get(entry)
    d = EntryDiff(entry, (a is not None, b is not None))
    if a is None or b is None:
        return d
    d.resources = _pairs(entry_facts(old, entry), entry_facts(new, entry))
    d.mix = _pairs(a.mix, b.mix)
    d.loop_size = (a.loop.instructions if a.loop else 0, b.loop.instructions if b.loop else 0)
    d.loop_mix = _pairs(a.loop.mix if a.loop else {}, b.loop.mix if b.loop else {})
    ops = _pairs(a.loop_opcodes, b.loop_opcodes)
    d.loop_opcodes = {k: [v[0] or 0, v[1] or 0] for k, v in ops.items()}
    d.identical_sass = a.listing == b.listing
    d.basis = kstep.basis(a.loop, b.loop, old.defines == new.defines)
    if not d.identical_sass:
        d.loop_words = kstep.loop_part(a, b, d.basis, SALIENT)
    if a.loop_listing != b.loop_listing:
        d.loop_diff = sass.unified(list(a.loop_listing), list(b.loop_listing), DIFF_LINES,
                                   f"old {entry} K loop", f"new {entry} K loop")
    return d


def compare(old: Build, new: Build, size: str, limits: res.SmLimits = res.SM90) -> Explanation:
    ex = Explanation(old.kernel if old.kernel == new.kernel else f"{old.kernel} -> {new.kernel}",
                     size, old, new, limits)
    ex.defines = _pairs(old.defines, new.defines)
    if old.options != new.options:
        ex.options = [list(old.options), list(new.options)]
    for entry in dict.fromkeys([*old.entries, *new.entries]):
        ex.entries[entry] = diff_entry(old, new, entry)
    ex.launch = _pairs(launch_facts(old), launch_facts(new))
    ex.summary = summarise(ex)
    return ex


def _fmt(key: str, v) -> str:
    if key in ("dynamic_smem", "static_smem", "stack", "spill_stores", "spill_loads", "local"):
        return res.kib(v) if isinstance(v, int) else str(v)
    if isinstance(v, list) and v and isinstance(v[0], list):
        return " + ".join("x".join(map(str, g)) for g in v)
    if isinstance(v, list):
        return "x".join(map(str, v))
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


NAMES = {"regs": "registers", "stack": "stack frame", "spill_stores": "spill stores",
         "spill_loads": "spill loads", "local": "local memory", "static_smem": "static smem",
         "dynamic_smem": "dynamic smem", "blocks_per_sm": "blocks/SM", "waves": "waves",
         "grid": "grid", "tiles": "tiles", "block": "block", "refused": "refused"}


def change(key: str, pair) -> str:
    return f"{NAMES.get(key, key)} {_fmt(key, pair[0])} -> {_fmt(key, pair[1])}"


def summarise(ex: Explanation) -> str:
    """The largest differences, most telling first, in one line: the builds', then (where
    the sides ran on a GPU) the time, counters, stalls and machine, then the machine over the
    gate's A/B where the explanation has it."""
    ab = [ex.ab_machine.part()] if ex.ab_machine else []
    return "; ".join([static_summary(ex), *gpu_parts(ex.gpu, ex.identical), *ab])


def static_summary(ex: Explanation) -> str:
    """The builds' largest differences."""
    if ex.identical:
        same_src = ex.old.source_sha256 == ex.new.source_sha256
        return IDENTICAL + ("" if same_src else " (the source differs, the SASS does not)")
    parts = []
    dyn = ex.launch.get("dynamic_smem")
    if ex.defines:
        d = ", ".join(f"{k} {o} -> {n}" for k, (o, n) in ex.defines.items())
        parts.append(d + (f": {change('dynamic_smem', dyn)}" if dyn else ""))
    elif dyn:
        parts.append(change("dynamic_smem", dyn))
    shown_res = False
    for entry, d in ex.entries.items():
        if not all(d.present):
            parts.append(f"{entry} {'added' if d.present[1] else 'removed'}")
            continue
        keys = [k for k in ("regs", "spill_stores", "spill_loads", "stack", "static_smem",
                            "blocks_per_sm") if k in d.resources]
        if keys and not shown_res:
            prefix = "" if entry == next(iter(ex.entries)) else f"{entry}: "
            parts.append(prefix + ", ".join(change(k, d.resources[k]) for k in keys))
            shown_res = True
    main = next(iter(ex.entries.values()), None)
    if main and all(main.present):
        loop = main.loop_words
        if loop:
            parts.append(loop)
        elif main.mix and not main.identical_sass:
            moved = sorted(main.mix.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))
            parts.append("SASS " + ", ".join(f"{k} {o} -> {n}" for k, (o, n) in moved[:3]))
    for k in ("grid", "waves", "refused"):
        if k in ex.launch:
            parts.append(change(k, ex.launch[k]))
    if ex.options:
        parts.append("nvcc flags differ")
    if not parts:
        what = [e for e, d in ex.entries.items() if not d.identical_sass]
        parts.append(f"SASS differs in {', '.join(what)} with the same mix and resources "
                     f"(scheduling or register allocation)" if what else "launch differs")
    return "; ".join(parts)


def attachment(doc: dict) -> dict:
    """What a confirmed DROP's row keeps of a gemm.explain/1 document (its `explanation`,
    docs/gate.md): the summary line, the mode, both commits and the compact differences
    (defines, resources per entry, the main K loop's mix per iteration, the launch, and where
    the sides ran on a GPU its time, counters, stalls and machine, and the machine over the
    gate's A/B); never the SASS or its diff."""
    diff = doc.get("diff") or {}
    entries = diff.get("entries") or {}
    main = next(iter(entries.values()), {})
    gpu = doc.get("gpu") or {}

    def commit(side):
        s = doc.get(side) or {}
        return s.get("commit") or s.get("rev")
    return {"schema": doc.get("schema", SCHEMA), "summary": doc.get("summary", ""),
            "mode": doc.get("mode", "static"), "against": commit("old"), "new": commit("new"),
            "defines": diff.get("defines") or {},
            "resources": {e: d["resources"] for e, d in entries.items() if d.get("resources")},
            "loop_mix": main.get("loop_mix") or {}, "launch": diff.get("launch") or {},
            "identical": bool(diff.get("identical")),
            "gpu": {"device": gpu.get("device", ""), **(gpu.get("diff") or {})}
            if doc.get("mode") == "gpu" else None, "ab_machine": doc.get("ab_machine")}
