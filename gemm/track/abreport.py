"""A finished A/B (abrun.ABRun) as each row's verdict, note, effects and what it left open."""
from __future__ import annotations

from ..core import stats
from ..machine.nvml import clocks_differ
from . import decision
from .abrun import Comparison, State, Stop
from .gate import Row, Verdict

LEAD = {Verdict.DROP: "confirmed", Verdict.NOISE: "not confirmed",
        Verdict.IMPROVED: "faster", Verdict.UNRESOLVED: "unresolved",
        Verdict.FAILED: "failed"}
# a decided outcome as its row's verdict, else noise (FASTER may rest on one round: "improved")
DECIDED = {decision.DROP: Verdict.DROP, decision.FASTER: Verdict.IMPROVED}


def rounds_needed(ab, r: Row, e) -> int | None:
    """How many rounds this noise needs for a decision; None where the rounds give no noise."""
    if not e.sigma or e.sigma != e.sigma:
        return None
    prior = ab.prior(r)
    return decision.rounds_needed(e.sigma, r.min_effect, ab.cfg.alpha, ab.family,
                                  0 if prior is None else prior.dof_for(e.n_new // 2 - 1))


def power_note(ab, r: Row, e) -> str:
    """How many rounds this noise needs, said."""
    need = rounds_needed(ab, r, e)
    if need is None:
        return ""
    if need <= e.n_new // 2:   # the noise allowed a decision: the effect sits on the margin
        return (f"; the noise allows a decision, but the estimate lies on the decision "
                f"margin (-{100 * r.min_effect / 2:g} %), between no change and a drop "
                f"of {100 * r.min_effect:g} %, where either verdict is allowed")
    return (f"; at this noise a decision takes about {need} rounds"
            + (f" (--max-rounds {ab.cfg.max_rounds})" if need > ab.cfg.max_rounds else ""))


def left_open(ab, c: Comparison, e=None) -> dict:
    """A comparison left open (closed, or its reference failed), as a row's `open` has it."""
    closed = c.state is State.CLOSED
    return {"against": c.against, "stop": c.stop if closed else Stop.FAILED,
            "rounds": c.rounds, "kept": c.kept, "after": c.after if closed else ab.n,
            "needs": rounds_needed(ab, c.row, e) if e is not None else None}


def finish(ab, machine=None, clocks=None) -> None:
    """Each row's verdict, note and effects (with NVML figures and SM clocks) from an ABRun."""
    by_row: dict[int, list[Comparison]] = {}
    for c in ab.comps:
        by_row.setdefault(id(c.row), []).append(c)
    for comps in by_row.values():
        r = comps[0].row
        r.effects, r.open, r.against = [], [], [c.against for c in comps]
        most = max(comps, key=lambda c: c.rounds - c.kept)   # both arms' values, one set of rounds
        ref, new = ([x for p in arm[most.kept:] for x in p if x is not None]
                    for arm in (most.refs, most.news))
        if ref and new:
            r.ab_reference, r.ab_new = stats.median(ref), stats.median(new)
        verdicts, parts = zip(*(_comparison(ab, c, machine, clocks) for c in comps))
        r.verdict = next((v for v in (Verdict.FAILED, Verdict.DROP, Verdict.UNRESOLVED,
                                      Verdict.NOISE, Verdict.IMPROVED) if v in verdicts),
                         Verdict.NOISE)
        r.note = f"{LEAD[r.verdict]}: " + "; ".join(parts)


def target_clocks(clocks, arm: str, target: tuple) -> dict | None:
    """{"kernel": MHz, "baseline": MHz}, medians over an arm's processes; None where none."""
    got = ((clocks or {}).get(arm) or {}).get(target) or {}
    return {who: stats.median(v) for who, v in got.items() if v} or None


def _clock_note(ref: dict | None, new: dict | None) -> str:
    """The kernel's sample clocks in each arm, said where they differ (nvml.clocks_differ)."""
    a, b = (ref or {}).get("kernel"), (new or {}).get("kernel")
    if not clocks_differ(a, b):
        return ""
    return f" (the kernel's samples at {a:.0f} MHz in the reference, {b:.0f} MHz in the new code)"


def _comparison(ab, c: Comparison, machine, clocks=None) -> tuple[Verdict | None, str]:
    """c's verdict (None: moot) and its part of the note; its effect and `open` go to its row."""
    r, vs = c.row, f"vs {c.against[:10]}"
    e = ab.estimate(c)      # None without a complete round here or with a failed value
    if c.state is State.DECIDED:
        verdict = DECIDED.get(e.verdict, Verdict.NOISE)
        status = why = e.verdict
    elif c.state is State.MOOT:     # its row is a DROP by another comparison
        verdict, status, why = None, "MOOT", c.why
    else:
        verdict = Verdict.FAILED if c.new_failed else Verdict.UNRESOLVED
        status, why = "UNRESOLVED", c.why + (power_note(ab, r, e) if e is not None else "")
        if c.state in (State.CLOSED, State.FAILED) and not c.new_failed:
            r.open.append(left_open(ab, c, e))
    if e is None:
        return verdict, f"{vs}: {c.why}"
    note = f"A/B {vs} here: {e.describe()}: {why}"
    if not ab.judges_gpu(r):
        note += " (calibrated noise borrowed from other series at this or the bracketing sizes)"
    elif e.rule == "trimmed":
        note += " (trimmed means: the robust rule)"
    if e.rule == "welch":
        note += " (each arm's own spread, Welch: the rounds reject the calibrated noise)"
    if c.measured_overtime:
        note += " (overtime: measured past the time budget)"
    if c.kept:
        note += (f" (its first {c.kept} rounds kept at {r.carried[0][:10]}, the same code, "
                 "UNRESOLVED there)")
    mhz = {"reference": target_clocks(clocks, c.against, c.target),
           "new": target_clocks(clocks, ab.new, c.target)}
    note += _clock_note(mhz["reference"], mhz["new"])
    r.effects.append({
        "against": c.against, "verdict": status, "change": e.change,
        "lo": decision.change_of(e.lo), "hi": decision.change_of(e.hi),
        "sigma": e.sigma, "dof": e.dof, "n_ref": e.n_ref, "n_new": e.n_new, "rule": e.rule,
        "overtime": c.measured_overtime,
        # may the next commit carry these rounds (confirm.evidence)? Not where the A/A moved
        "carry": c.stop != Stop.UNSTABLE,
        "machine": machine.pair(c.against, ab.new) if machine else None,
        "clocks": mhz if any(mhz.values()) else None,
        # the per-process values it was decided on, in round order, for a later rule to try
        "values": {"first": [a for a, _ in c.refs], "last": [b for _, b in c.refs],
                   "new": [x for p in c.news for x in p], "k": list(c.ks)}})
    return verdict, note
