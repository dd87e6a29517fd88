"""An explanation as a table for people: the two sides, resources per entry point, the SASS
mix (whole function and K loop per iteration), the launch, the GPU's runs (time, machine,
counters, stalls), the machine over the gate's A/B, the K loop's diff, the summary."""
from __future__ import annotations

from ..machine.nvml import clocks_differ
from . import resources as res
from . import sass
from .abmachine import ABMachine
from .build import Build
from .gpureport import (COUNTER_POINTS, STALL_POINTS, TIME_REL, GpuReport,
                        machine_moved, pct)
from .ncu import QUANTITIES
from .report import Explanation, _fmt, entry_facts, launch_facts


def side(b: Build) -> str:
    where = f"{b.rev} ({b.commit[:10]})" if b.commit else "working tree"
    return where


def _row(label: str, old, new, width: int = 26, differs: bool | None = None) -> str:
    """A row of the table; `*` where the two differ (as shown, unless `differs` says)."""
    mark = "   *" if (old != new if differs is None else differs) else ""
    return f"  {label:<{width}} {str(old):>14} {str(new):>14}{mark}"


def render(ex: Explanation) -> str:
    o, n = ex.old, ex.new
    mode = ("static (no GPU run)" if ex.gpu is None else
            f"static, and run on {ex.gpu.device}" if ex.gpu.ran else
            f"static only: {ex.gpu.why}")
    out = [f"gemm explain {ex.kernel} at {ex.size}: {o.arch}, occupancy for {ex.limits.name}, "
           f"{mode}",
           f"  old: {side(o)}, defines: {o.defines_source}",
           f"  new: {side(n)}, defines: {n.defines_source}"]
    if ex.defines:
        out.append("  defines changed: " + ", ".join(f"{k} {a} -> {b}"
                                                    for k, a, b in _triples(ex.defines)))
    else:
        out.append("  defines: " + " ".join(f"{k}={v}" for k, v in n.defines.items())
                   + " (same on both sides)")
    if ex.options:
        out.append(f"  nvcc flags: {' '.join(ex.options[0])} -> {' '.join(ex.options[1])}")
    out.append(f"  source: {'same' if o.source_sha256 == n.source_sha256 else 'differs'} "
               f"(the kernel's .cu and what it includes)")
    out.append("")
    out.append(f"  {'resources':<26} {'old':>14} {'new':>14}")
    for entry, d in ex.entries.items():
        out.append(f" {entry}")
        if not all(d.present):
            out.append(f"  {'only in the ' + ('new' if d.present[1] else 'old') + ' build'}")
            continue
        a, b = entry_facts(o, entry), entry_facts(n, entry)
        out.append(_row("registers", a["regs"], b["regs"]))
        out.append(_row("stack / spill st / ld", _trio(a), _trio(b)))
        out.append(_row("static smem", res.kib(a["static_smem"]), res.kib(b["static_smem"])))
        out.append(_row("dynamic smem", res.kib(a["dynamic_smem"]), res.kib(b["dynamic_smem"])))
        out.append(_row("blocks/SM", a["blocks_per_sm"], b["blocks_per_sm"]))
        out.append(_row("  limited by", a["limiter"], b["limiter"]))
    out.append("")
    out += _mix_table(ex)
    out.append("")
    a, b = launch_facts(o), launch_facts(n)
    out.append(f"  {'launch at ' + ex.size:<26} {'old':>14} {'new':>14}")
    for k in ("grid", "block", "dynamic_smem", "tiles", "blocks_per_sm", "waves"):
        out.append(_row(k.replace("_", " ") if k != "waves" else "waves (tiles/SMs/bl.)",
                        _fmt(k, a[k]), _fmt(k, b[k])))
    for label, ln in (("old", o.launch), ("new", n.launch)):
        if ln.refused:
            out.append(f"  {label}: refused: {ln.refused}")
    if ex.gpu is not None and ex.gpu.ran:
        out.append("")
        out += render_gpu(ex.gpu)
    if ex.ab_machine is not None:
        out.append("")
        out += render_ab_machine(ex.ab_machine)
    shown = next((e for e, d in ex.entries.items() if d.loop_diff), None)
    if shown:
        out.append("")
        out.append(f"  K loop of {shown}, registers normalised, runs of one opcode collapsed "
                   f"(unified diff):")
        out += ["    " + ln for ln in ex.entries[shown].loop_diff]
        more = [e for e, d in ex.entries.items() if d.loop_diff and e != shown]
        if more:
            out.append(f"  (the K loops of {', '.join(more)} differ too: --json has their diffs)")
    out.append("")
    out.append(f"summary: {ex.summary}")
    return "\n".join(out)


def _triples(pairs: dict):
    return [(k, v[0], v[1]) for k, v in pairs.items()]


def _trio(f: dict) -> str:
    return f"{f['stack']}/{f['spill_stores']}/{f['spill_loads']}"


def _mix_table(ex: Explanation) -> list[str]:
    out = []
    for entry, d in ex.entries.items():
        if not all(d.present):
            continue
        a, b = ex.old.entries[entry], ex.new.entries[entry]
        if d.identical_sass:
            out.append(f" {entry}: identical SASS ({sum(a.mix.values())} instructions)")
            continue
        if out:   # entries after the first: one line of what changed
            loop = ", ".join(f"{k} {x or 0} -> {y or 0}" for k, (x, y) in d.loop_mix.items())
            out.append(f" {entry}: SASS " + (", ".join(f"{k} {x} -> {y}" for k, (x, y)
                                                      in d.mix.items()) or "same mix")
                       + (f"; K loop per iteration: {loop}" if loop else ""))
            continue
        la, lb = a.loop, b.loop
        loops = (f"K loop {_span(la)} -> {_span(lb)}")
        out.append(f" {entry}: SASS by class, whole function and {loops}{_steps(d)}")
        out.append(f"  {'class':<10} {'old':>7} {'new':>7} {'diff':>6}   "
                   f"{'loop old':>8} {'new':>6} {'diff':>6}")
        for c in sass.InstrClass:
            fo, fn = a.mix[c.value], b.mix[c.value]
            lo = la.mix[c.value] if la else 0
            ln = lb.mix[c.value] if lb else 0
            out.append(f"  {c.value:<10} {fo:>7} {fn:>7} {_d(fo, fn):>6}   {lo:>8} {ln:>6} "
                       f"{_d(lo, ln):>6}")
        out.append(f"  {'total':<10} {len(a.listing):>7} {len(b.listing):>7} "
                   f"{_d(len(a.listing), len(b.listing)):>6}   "
                   f"{la.instructions if la else 0:>8} {lb.instructions if lb else 0:>6} "
                   f"{_d(la.instructions if la else 0, lb.instructions if lb else 0):>6}")
        if d.loop_opcodes:
            ops = sorted(d.loop_opcodes.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))[:8]
            out.append("  K loop opcodes: " + ", ".join(f"{op} {x} -> {y}"
                                                        for op, (x, y) in ops))
    return out


def _steps(d) -> str:
    """", K steps per iteration 2 -> 1" where known (gemm.explain.kstep)."""
    sa, sb = d.basis.steps
    if not sa and not sb:
        return ""
    return f", K steps per iteration {sa or '?'} -> {sb or '?'}"


def _span(lp) -> str:
    return f"[{lp.start:#x}, {lp.end:#x}]" if lp else "(none)"


def _d(a: int, b: int) -> str:
    return "" if a == b else f"{b - a:+d}"


def _trio3(stat: dict | None) -> str:
    if not stat:
        return "-"
    return "/".join(f"{stat[k]:.0f}" for k in ("min", "median", "max"))


def _rel(a, b) -> float:
    """|b - a| / max(a, b); 0 where either is missing."""
    return abs(b - a) / max(a, b) if a and b else 0.0


def _ms(v) -> str:
    return "-" if v is None else f"{v:.4f} ms"


def render_gpu(g: GpuReport) -> list[str]:
    """The GPU's part of the table: the timed runs and the machine, the counters of one
    profiled launch, the top stall reasons, and what was not reported."""
    o, n = g.old, g.new
    out = [f"  {'on the GPU (' + g.device + ')':<26} {'old':>14} {'new':>14}"]
    for label, run in (("old", o), ("new", n)):
        if run.error:
            out.append(f"  {label}: not run: {run.error}")
    out.append(_row("run with", o.launcher or "-", n.launcher or "-"))
    out.append(_row("time per launch (timed)", _ms(o.time_ms), _ms(n.time_ms),
                    differs=_rel(o.time_ms, n.time_ms) >= TIME_REL))
    moved = machine_moved(g)
    for key, label in (("sm_mhz", "SM clock MHz min/med/max"), ("power_w", "power W min/med/max"),
                       ("temp_c", "temp. C min/med/max")):
        out.append(_row(label, _trio3((o.machine or {}).get(key)),
                        _trio3((n.machine or {}).get(key)), differs=key in moved))
    for label, run in (("old", o), ("new", n)):
        if run.machine_why and not run.error:
            out.append(f"  {label}: machine not sampled: {run.machine_why}")
    if not g.ncu:
        out.append(f"  counters: not measured: {g.counters_why or 'ncu did not run'}")
        return out
    co, cn = o.counters, n.counters
    entry = (cn or co).entry if (cn or co) else "?"
    out.append(f"  counters of one launch of {entry} (ncu {g.ncu}, --clock-control none)")
    for label, c in (("old", co), ("new", cn)):
        if c is not None and c.error:
            out.append(f"  {label}: not measured: {c.error}")
    vo = co.values if co and not co.error else {}
    vn = cn.values if cn and not cn.error else {}
    for key, label, _ in QUANTITIES:
        if key == "tensor_pipe" and not g.tensor:
            continue
        a, b = vo.get(key), vn.get(key)
        out.append(_row(label, pct(a), pct(b), differs=a is not None and b is not None
                        and abs(b - a) >= COUNTER_POINTS))
    ca, cb = (co.sm_mhz if co else None), (cn.sm_mhz if cn else None)
    out.append(_row("SM clock (ncu)", _mhz(co), _mhz(cn), differs=clocks_differ(ca, cb)))
    da, db = (co.duration_ms if co else None), (cn.duration_ms if cn else None)
    out.append(_row("duration (ncu)", _ms(da), _ms(db), differs=_rel(da, db) >= TIME_REL))
    out += _stalls(co, cn)
    for label, c in (("old", co), ("new", cn)):
        if c is not None and c.missing and not c.error:
            out.append(f"  {label}: not reported by this ncu: {', '.join(c.missing)}")
    return out


def render_ab_machine(m: ABMachine) -> list[str]:
    """The machine over the gate's A/B: each arm's NVML figures over all its processes."""
    diff = m.differences()
    out = [f"  {'the A/B vs ' + m.against[:10]:<26} {'reference':>14} {'new':>14}"]
    for label, key in (("processes / samples", None), ("SM clock MHz median", "sm_mhz_median"),
                       ("power W median", "power_w_median"), ("temp. C max", "temp_c_max"),
                       ("at the power cap", "power_capped_pct")):
        out.append(_row(label, _arm(m.reference, key), _arm(m.new, key), differs=key in diff))
    verdict = ("one arm not sampled" if m.alike is None else "alike" if m.alike
               else "differ: " + "; ".join(diff.values()))
    return out + [f"  the arms: {verdict}"]


def _arm(arm, key) -> str:
    if arm is None:
        return "-"
    if key is None:
        return f"{arm.processes} / {arm.samples}"
    v = getattr(arm, key)
    return "-" if v is None else f"{v:.0f} %" if key == "power_capped_pct" else f"{v:.0f}"


def _mhz(c) -> str:
    return "-" if c is None or c.sm_mhz is None else f"{c.sm_mhz:.0f} MHz"


def _stalls(co, cn) -> list[str]:
    """The top stall reasons of either side: cycles per issued instruction (share)."""
    so = co.shares() if co and not co.error else {}
    sn = cn.shares() if cn and not cn.error else {}
    reasons = list(dict.fromkeys([*(cn.top() if sn else []), *(co.top() if so else [])]))
    if not reasons:
        return []
    out = ["  warp stalls: cycles per issued instruction (share of all stall cycles)"]
    for r in reasons[:6]:
        a = f"{co.stalls[r]:.2f} ({so[r]:.0f} %)" if r in so else "-"
        b = f"{cn.stalls[r]:.2f} ({sn[r]:.0f} %)" if r in sn else "-"
        out.append(_row(r, a, b, differs=abs(sn.get(r, 0.0) - so.get(r, 0.0)) >= STALL_POINTS))
    return out
