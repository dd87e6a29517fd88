"""What the GPU said about each side: a timed run (time per launch, and the machine's SM clock,
power and temperature while it ran) and one launch profiled with ncu (throughputs, achieved
occupancy, L2 hit rate, warp stalls); the two sides compared, and the summary's words for the
largest differences. Pure: runs in, data and sentences out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..machine.nvml import clocks_differ
from .ncu import LABELS

COUNTER_POINTS = 3.0    # a counter (% of peak) named in the summary: moved this many points
STALL_POINTS = 3.0      # a stall reason named: its share of stall cycles moved this many
POWER_REL = 0.05        # ... median power
TEMP_C = 5.0            # ... median temperature (degrees)
TIME_REL = 0.01         # the table marks times that differ by this much (relative)
TOP_STALLS = 5


@dataclass
class Counters:
    """One launch of `entry` under ncu."""
    entry: str
    values: dict = field(default_factory=dict)   # key (ncu.QUANTITIES) -> % or None
    stalls: dict = field(default_factory=dict)   # reason -> cycles per issued instruction
    duration_ms: float | None = None             # the profiled launch
    sm_mhz: float | None = None                  # SM clock during it (ncu's gpc cycles/s)
    metrics: dict = field(default_factory=dict)  # key -> the metric name that gave it
    missing: list = field(default_factory=list)  # asked for, not reported
    error: str = ""                              # why there are none
    command: str = ""                            # the ncu command line (to run it again)

    def shares(self) -> dict:
        """{reason: % of all stall cycles}."""
        total = sum(v for v in self.stalls.values() if v)
        return {k: 100.0 * v / total for k, v in self.stalls.items()} if total else {}

    def top(self, n: int = TOP_STALLS) -> list:
        return sorted(self.stalls, key=lambda k: -self.stalls[k])[:n]

    def to_dict(self) -> dict:
        shares = self.shares()
        return {"entry": self.entry, "error": self.error,
                "values": {k: _r(v) for k, v in self.values.items()},
                "stalls": {k: {"per_issue": _r(v, 3), "share": _r(shares.get(k))}
                           for k, v in sorted(self.stalls.items(), key=lambda kv: -kv[1])},
                "duration_ms": _r(self.duration_ms, 4), "sm_mhz": _r(self.sm_mhz, 0),
                "metrics": self.metrics, "missing": self.missing, "command": self.command}


@dataclass
class SideRun:
    """One side on the GPU: how it was launched, its timed run and its profiled launch."""
    launcher: str = ""                  # "gemm.measure.once" or "gemm bench" (older trees)
    error: str = ""                     # why the side did not run at all
    time_ms: float | None = None        # median per launch, timed run
    machine: dict | None = None         # gemm.machine.nvml.summarise
    machine_why: str = ""               # why there is no machine (no NVML, no sample)
    counters: Counters | None = None

    def to_dict(self) -> dict:
        return {"launcher": self.launcher, "error": self.error, "time_ms": _r(self.time_ms, 4),
                "machine": self.machine, "machine_why": self.machine_why,
                "counters": self.counters.to_dict() if self.counters else None}


@dataclass
class GpuReport:
    """Both sides on the GPU, or why not (`why`: no GPU answered, ...)."""
    why: str = ""
    device: str = ""
    ncu: str = ""                       # its version; "" where not used
    counters_why: str = ""              # why no counters (no ncu on the PATH, --no-counters)
    tensor: bool = False                # the kernel has tensor instructions: show the pipe
    old: SideRun | None = None
    new: SideRun | None = None

    @property
    def ran(self) -> bool:
        return self.old is not None and self.new is not None

    def diff(self) -> dict:
        if not self.ran:
            return {}
        o, n = self.old, self.new
        out = {"time_ms": [_r(o.time_ms, 4), _r(n.time_ms, 4)], "counters": {}, "stalls": {},
               "machine": {}}
        if o.counters and n.counters:
            for k in dict.fromkeys([*o.counters.values, *n.counters.values]):
                out["counters"][k] = [_r(o.counters.values.get(k)), _r(n.counters.values.get(k))]
            so, sn = o.counters.shares(), n.counters.shares()
            for k in dict.fromkeys([*o.counters.top(), *n.counters.top()]):
                out["stalls"][k] = [_r(so.get(k)), _r(sn.get(k))]
        for k in ("sm_mhz", "power_w", "temp_c"):
            a, b = _median(o.machine, k), _median(n.machine, k)
            if a is not None or b is not None:
                out["machine"][k] = [a, b]
        return out

    def to_dict(self) -> dict:
        return {"why": self.why, "device": self.device, "ncu": self.ncu,
                "counters_why": self.counters_why,
                "old": self.old.to_dict() if self.old else None,
                "new": self.new.to_dict() if self.new else None, "diff": self.diff()}


def _r(v, digits: int = 2):
    return round(v, digits) if isinstance(v, (int, float)) else None


def _median(machine: dict | None, key: str):
    return ((machine or {}).get(key) or {}).get("median")


def pct(v) -> str:
    return "-" if v is None else f"{v:.0f} %"


def _counter_parts(g: GpuReport) -> list[str]:
    o, n = g.old.counters, g.new.counters
    moved = []
    for key, (a, b) in g.diff()["counters"].items():
        if key == "tensor_pipe" and not g.tensor:
            continue
        if a is not None and b is not None and abs(b - a) >= COUNTER_POINTS:
            moved.append((abs(b - a), f"{LABELS.get(key, key)} {pct(a)} -> {pct(b)}"))
    parts = [text for _, text in sorted(moved, key=lambda x: -x[0])[:3]]
    so, sn = o.shares(), n.shares()
    if sn:
        top = n.top(1)[0]
        mover = max(sn, key=lambda k: abs(sn[k] - so.get(k, 0.0)))
        if abs(sn[mover] - so.get(mover, 0.0)) >= STALL_POINTS:
            label = "top stall" if mover == top else "stall"
            parts.append(f"{label}: {mover} {pct(so.get(mover, 0.0))} -> {pct(sn[mover])}")
        elif so and o.top(1)[0] != top:
            parts.append(f"top stall: {o.top(1)[0]} -> {top}")
    return parts


MACHINE = (("sm_mhz", "SM clock", "MHz", clocks_differ),
           ("power_w", "power", "W", lambda a, b: abs(b - a) >= POWER_REL * max(a, b)),
           ("temp_c", "temperature", "C", lambda a, b: abs(b - a) >= TEMP_C))


def machine_moved(g: GpuReport) -> dict:
    """{key: [old median, new median]} of the machine's readings that differ enough."""
    m = g.diff().get("machine", {})
    out = {}
    for key, _, _, differs in MACHINE:
        a, b = m.get(key, [None, None])
        if a is not None and b is not None and differs(a, b):
            out[key] = [a, b]
    return out


def machine_part(g: GpuReport, identical: bool = False) -> str:
    """'machine: SM clock 1980 -> 1755 MHz, power 650 -> 610 W' where the medians differ;
    where they do not and the code is identical, that the machine was the same. Where the
    sides were launched differently (an older tree's gemm bench also runs cuBLAS, with gaps
    between launches) the readings are not alike: all the medians, said so."""
    m = g.diff().get("machine", {})
    if g.old.launcher != g.new.launcher:
        words = [f"{label} {m[key][0]:.0f} -> {m[key][1]:.0f} {unit}"
                 for key, label, unit, _ in MACHINE
                 if None not in m.get(key, [None, None])]
        return (f"machine: not alike, the old side ran through {g.old.launcher} and the new "
                f"through {g.new.launcher} (medians: {', '.join(words)})") if words else ""
    moved = machine_moved(g)
    words = [f"{label} {moved[key][0]:.0f} -> {moved[key][1]:.0f} {unit}"
             for key, label, unit, _ in MACHINE if key in moved]
    if words:
        return "machine: " + ", ".join(words) + " (medians while each side ran)"
    a = m.get("sm_mhz", [None, None])[1]
    if identical and a is not None:
        return f"machine: no difference in SM clock, power or temperature ({a:.0f} MHz)"
    return ""


def gpu_parts(g: GpuReport | None, identical: bool = False) -> list[str]:
    """The summary's words for the GPU's differences: time per launch, the counters that
    moved most, the stall that moved most, the machine."""
    if g is None or not g.ran:
        return []
    parts = []
    a, b = g.old.time_ms, g.new.time_ms
    if a and b:
        parts.append(f"timed here {a:.3f} -> {b:.3f} ms per launch ({100 * (b / a - 1):+.1f} %)")
    if g.old.counters and g.new.counters and not (g.old.counters.error or
                                                  g.new.counters.error):
        parts += _counter_parts(g)
    mp = machine_part(g, identical)
    if mp:
        parts.append(mp)
    return parts
