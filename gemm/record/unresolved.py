"""Why series are UNRESOLVED, told from a gate report's typed reasons: each row's `open`, the
comparisons the A/B left open and why (gemm.track.abrun.Stop, gemm.track.abreport.left_open;
docs/gate.md). A line per reason over the report's rows ("57 not measured: out of the 94-s A/B
budget (95 comparisons found no room in its 2 rounds)") and a short note per row ("not
measured (budget)", "2 rounds: -0.04 % [-0.74, +0.67], needs ~3"), for `gemm summary`,
`gemm show`, `gemm regress` and the site's gate.html. A row that names no reason (a report or kept verdict from
before `open`, or a row the A/B never compared: no reference, no GPU) keeps its note. The
note's words are never read here.
"""
from __future__ import annotations

import math

from ..track.abrun import Stop
from ..track.decision import signed_pct

# a row's reason: the first of its open comparisons' in this order (the GPU's instability
# outweighs the budget; a measured comparison outweighs one that waited)
KINDS = ((Stop.UNSTABLE, None), (Stop.BROKEN, None), (Stop.FAILED, None), (Stop.MISSING, None),
         (Stop.CAP, True), (Stop.BUDGET, True), (Stop.CAP, False), (Stop.BUDGET, False))
OTHER = (None, None)     # UNRESOLVED without a typed reason: its note says why


def _count(x) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) and x > 0 else 0


def reasons(row: dict) -> list[dict]:
    """The row's open comparisons of a reason this version knows, as {"against", "stop"
    (Stop), "rounds", "kept", "after", "needs"}; [] where it names none."""
    out = []
    for o in row.get("open") or [] if isinstance(row, dict) else []:
        try:
            stop = Stop(o.get("stop"))
        except (ValueError, AttributeError):
            continue
        out.append({"against": str(o.get("against") or ""), "stop": stop,
                    "rounds": _count(o.get("rounds")), "kept": _count(o.get("kept")),
                    "after": _count(o.get("after")), "needs": _count(o.get("needs")) or None})
    return out


def _kind(o: dict) -> tuple:
    if o["stop"] in (Stop.CAP, Stop.BUDGET):
        return o["stop"], o["rounds"] > o["kept"]
    return o["stop"], None


def kind(row: dict) -> tuple:
    """The row's reason: one of KINDS, or OTHER."""
    got = [_kind(o) for o in reasons(row)]
    return min(got, key=KINDS.index) if got else OTHER


def running(row: dict) -> int:
    """How many commits running a series has been UNRESOLVED (this one included)."""
    return len(row.get("carried") or []) + 1


def fails(row: dict, config: dict | None) -> bool:
    """Does this UNRESOLVED row fail the gate (gemm.track.gate.failed)? All under --strict,
    else those UNRESOLVED at carry_commits commits running."""
    cfg = config or {}
    carry = cfg.get("carry_commits")
    return row.get("verdict") == "UNRESOLVED" and bool(
        cfg.get("strict") or (carry is not None and running(row) >= carry))


def _rounds(n: int) -> str:
    return f"{n} round" + ("" if n == 1 else "s")


def _span(ns: list[int]) -> str:
    lo, hi = min(ns), max(ns)
    return _rounds(hi) if lo == hi else f"{lo}-{hi} rounds"


def _bound(x) -> str:
    return signed_pct(x) if isinstance(x, (int, float)) and x == x else "?"


def _one(o: dict, effect: dict | None) -> str:
    stop, rounds, kept = o["stop"], o["rounds"], o["kept"]
    if stop == Stop.UNSTABLE:
        return "GPU unstable (the A/A control moved)"
    if stop == Stop.BROKEN:
        return "the A/B broke off"
    if stop == Stop.FAILED:
        return "the reference failed"
    if stop == Stop.MISSING:
        return "no value measured"
    where = "budget" if stop == Stop.BUDGET else "round cap"
    if rounds <= kept:
        return f"not measured ({where})" + (f", {_rounds(kept)} kept" if kept else "")
    s = _rounds(rounds) + (f" ({kept} kept)" if kept else "")
    change = (effect or {}).get("change")
    if isinstance(change, (int, float)) and math.isfinite(change):
        s += (f": {100 * change:+.2f} % [{_bound(effect.get('lo'))}, "
              f"{_bound(effect.get('hi'))}]")
    if o["needs"]:
        s += f", needs ~{o['needs']}" if o["needs"] > rounds else ", on the decision margin"
    return s


def cell(row: dict) -> str | None:
    """The row's short note from its typed reasons, one per compared commit where they
    differ; None where it names none."""
    effects = {str(e.get("against")): e for e in row.get("effects") or []
               if isinstance(e, dict)}
    said = [(o["against"], _one(o, effects.get(o["against"]))) for o in reasons(row)]
    texts = list(dict.fromkeys(t for _, t in said))
    if len(texts) <= 1:
        return texts[0] if texts else None
    return "; ".join(f"vs {c[:7]}: {t}" for c, t in said)


def note(row: dict, config: dict | None, full: bool = False) -> str:
    """What a table shows as the row's note: the short one for an UNRESOLVED row that names
    its reasons and does not fail the gate (unless `full`), else the note itself."""
    whole = str(row.get("note") or "")
    if full or row.get("verdict") != "UNRESOLVED" or fails(row, config):
        return whole
    return cell(row) or whole


def _line(k: tuple, rows: list[dict], every: list[dict], config: dict) -> str:
    n = len(rows)
    stop, measured = k
    budget = config.get("budget_s")
    budget = f"{budget:g}-s A/B budget" if isinstance(budget, (int, float)) else "A/B budget"
    mine = [o for r in rows for o in reasons(r) if _kind(o) == k]
    if stop == Stop.BUDGET and not measured:
        waited = [o for r in every for o in reasons(r) if _kind(o) == k]
        return (f"{n} not measured: out of the {budget} ({len(waited)} comparisons found no "
                f"room in its {_rounds(max(o['after'] for o in waited))})")
    if stop == Stop.CAP and not measured:
        return (f"{n} not measured: no room in the A/B's "
                f"{_rounds(max(o['after'] for o in mine))} (the round cap)")
    if measured:
        span = _span([o["rounds"] - o["kept"] for o in mine])
        return (f"{n} measured {span}, undecided at the "
                + (budget.replace("A/B ", "") if stop == Stop.BUDGET else "round cap"))
    return {Stop.UNSTABLE: f"{n} the GPU was unstable (the A/A control moved)",
            Stop.BROKEN: f"{n} the A/B broke off (a commit could not be checked out or "
                         "measured)",
            Stop.FAILED: f"{n} the reference's code failed when measured here",
            Stop.MISSING: f"{n} a measurement reported no value for them",
            None: f"{n} with no typed reason (each one's note says why)"}[stop]


def lines(rows: list[dict], config: dict | None = None) -> list[str]:
    """A line per reason over the UNRESOLVED rows, most telling first; [] where none names a
    reason (a report from before `open`: the notes say why)."""
    rows = [r for r in rows if isinstance(r, dict)]
    mine = [r for r in rows if r.get("verdict") == "UNRESOLVED"]
    if not any(reasons(r) for r in mine):
        return []
    by: dict = {}
    for r in mine:
        by.setdefault(kind(r), []).append(r)
    return [_line(k, by[k], rows, config or {}) for k in KINDS + (OTHER,) if k in by]


def notes(rows: list[dict]) -> list[tuple[list[dict], str]]:
    """The UNRESOLVED rows' whole notes, once each: [(the rows that have it, the note)]."""
    by: dict = {}
    for r in rows:
        if isinstance(r, dict) and r.get("verdict") == "UNRESOLVED":
            by.setdefault(str(r.get("note") or ""), []).append(r)
    return [(rs, n) for n, rs in by.items()]
