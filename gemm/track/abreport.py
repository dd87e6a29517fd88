"""A finished A/B (gemm.track.abrun.ABRun) as each row's verdict, note, effects and the
comparisons it left open (`open`: why each, typed by abrun.Stop)."""
from __future__ import annotations

import math

from ..core import stats
from . import decision
from .abrun import Stop
from .gate import Row, Verdict


def rounds_needed(ab, r: Row, e) -> int | None:
    """How many rounds this noise needs for a decision (decision.rounds_needed); None where
    the rounds give no noise."""
    if not e.sigma or e.sigma != e.sigma:
        return None
    prior = ab.prior(r)
    rounds = e.n_new // 2
    return decision.rounds_needed(e.sigma, r.min_effect, ab.cfg.alpha, ab.family,
                                  prior_dof=0 if prior is None else
                                  rounds - 1 if prior.borrowed else prior.dof)


def power_note(ab, r: Row, e) -> str:
    """How many rounds this noise needs, said."""
    need = rounds_needed(ab, r, e)
    if need is None:
        return ""
    rounds = e.n_new // 2
    if need <= rounds:   # the noise allowed a decision: the effect sits on the margin
        return (f"; the noise allows a decision, but the estimate lies on the decision "
                f"margin (-{100 * r.min_effect / 2:g} %), between no change and a drop "
                f"of {100 * r.min_effect:g} %, where either verdict is allowed")
    return (f"; at this noise a decision takes about {need} rounds"
            + (f" (--max-rounds {ab.cfg.max_rounds})" if need > ab.cfg.max_rounds else ""))


def left_open(ab, i: int, stop: Stop, e=None) -> dict:
    """Comparison i left open, typed (a row's `open`, docs/gate.md): against which commit,
    why (Stop), its complete rounds (`kept` of them from an earlier commit; rounds == kept:
    not measured here), the A/B's rounds by then, and the rounds its noise needs (None: not
    known)."""
    r, c = ab.comps[i]
    closed = ab.closed.get(i)
    return {"against": c, "stop": stop, "rounds": len(ab.paired(i)[0]), "kept": ab.kept(i),
            "after": closed.after if closed else ab.total,
            "needs": rounds_needed(ab, r, e) if e is not None else None}


def finish(ab, machine=None) -> None:
    """Each row's verdict, note and effects from its comparisons in a finished ABRun; with
    `machine` (gemm.machine.nvml.ArmSamples), each effect keeps its two arms' NVML figures."""
    by_row: dict[int, list[int]] = {}
    for i, (r, _) in enumerate(ab.comps):
        by_row.setdefault(id(r), []).append(i)
    for idxs in by_row.values():
        r = ab.comps[idxs[0]][0]
        parts, verdicts = [], []
        r.effects, r.open, r.against = [], [], [ab.comps[i][1] for i in idxs]
        for i in idxs:
            c = ab.comps[i][1]
            refs, news, ks = ab.paired(i)
            kept = ab.kept(i)
            ref = [x for p in refs[kept:] for x in p if x is not None]
            new = [x for x in ab.new_values(r) if x is not None]
            if new:
                r.ab_new = stats.median(new)
            if ref and r.ab_reference is None:
                r.ab_reference = stats.median(ref)
            if i in ab.failed:
                new_failed, why_failed = ab.failed[i]
                verdicts.append(Verdict.FAILED if new_failed else Verdict.UNRESOLVED)
                parts.append(f"vs {c[:10]}: {why_failed}")
                if not new_failed:
                    r.open.append(left_open(ab, i, Stop.FAILED))
                continue
            e = ab.estimate(i)
            why = ab.closed[i].why if i in ab.closed else ""
            if e is None:
                verdicts.append(Verdict.UNRESOLVED if i not in ab.moot else Verdict.DROP)
                parts.append(f"vs {c[:10]}: {ab.moot.get(i, why)}")
                if i in ab.closed and i not in ab.moot:
                    r.open.append(left_open(ab, i, ab.closed[i].stop))
                continue
            if i in ab.moot:
                parts.append(f"A/B vs {c[:10]} here: {e.describe()}: {ab.moot[i]}")
            elif i not in ab.decided:
                verdicts.append(Verdict.UNRESOLVED)
                parts.append(f"A/B vs {c[:10]} here: {e.describe()}: {why}"
                             + power_note(ab, r, e))
                if i in ab.closed:
                    r.open.append(left_open(ab, i, ab.closed[i].stop, e))
            else:
                verdicts.append(Verdict.DROP if e.verdict == decision.DROP else Verdict.NOISE)
                parts.append(f"A/B vs {c[:10]} here: {e.describe()}: {e.verdict}")
            if ab.cal is not None and ab.cal.borrowed(r.kernel, r.size, r.metric):
                parts[-1] += " (calibrated noise borrowed from other series at this or the bracketing sizes)"
            elif e.rule == "trimmed":
                parts[-1] += " (trimmed means: the robust rule)"
            if i in ab.over_measured:
                parts[-1] += " (overtime: measured past the time budget)"
            if kept:
                parts[-1] += (f" (its first {kept} rounds kept at {r.carried[0][:10]}, "
                              "the same code, UNRESOLVED there)")
            r.effects.append({"against": c, "verdict": e.verdict if i in ab.decided
                              else "MOOT" if i in ab.moot else "UNRESOLVED",
                              "change": e.change,
                              "lo": math.expm1(e.lo), "hi": math.expm1(e.hi),
                              "sigma": e.sigma, "dof": e.dof, "n_ref": e.n_ref,
                              "n_new": e.n_new,
                              "rule": e.rule,
                              "overtime": i in ab.over_measured,
                              # may the next commit carry these rounds (gemm.track.carry)?
                              "carry": i not in ab.untrusted,
                              "machine": machine.pair(c, ab.new) if machine else None,
                              # the per-process values it was decided on, in round
                              # order, so a later rule can be tried on this evidence
                              "values": {"first": [a for a, _ in refs],
                                         "last": [b for _, b in refs],
                                         "new": [x for p in news for x in p],
                                         "k": ks}})
        r.verdict = next((v for v in (Verdict.FAILED, Verdict.DROP, Verdict.UNRESOLVED)
                          if v in verdicts), Verdict.NOISE)
        lead = {Verdict.DROP: "confirmed", Verdict.NOISE: "not confirmed",
                Verdict.UNRESOLVED: "unresolved", Verdict.FAILED: "failed"}[r.verdict]
        r.note = f"{lead}: " + "; ".join(parts)
