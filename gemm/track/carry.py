"""UNRESOLVED is never a silent pass: a large series UNRESOLVED at the commits just before is
a candidate again, measured first, against the anchor, with the rounds the newest of them kept
against it where it measured the same code; it fails at carry_commits running (gate.failed).
docs/gate.md section 4.
"""
from __future__ import annotations

from ..core.problem import Problem, SizeClass
from ..store import verdicts
from .abrun import carried
from .abtest import same_code
from .gate import Row, Verdict

def unresolved_before(root, machine: str, earlier: list, key: tuple) -> list[str]:
    """The commits just before the judged one (newest first) whose kept verdict for `key` is
    UNRESOLVED, up to the first that is not."""
    out = []
    for run in reversed(earlier):
        if run.commit in out:      # a commit recorded twice is one commit
            continue
        kept = verdicts.load(root, machine, run.commit).get(key)
        if kept is None or kept.get("verdict") != Verdict.UNRESOLVED:
            break
        out.append(run.commit)
    return out


def carry(rows: list[Row], root, machine: str, earlier: list) -> list[Row]:
    """Mark each large row UNRESOLVED just before (Row.carried) a candidate; returns them."""
    out = []
    for r in rows:
        if Problem.parse(r.size).size_class != SizeClass.LARGE or r.verdict not in (
                Verdict.OK, Verdict.IMPROVED, Verdict.CANDIDATE):
            continue
        r.carried = unresolved_before(root, machine, earlier, (r.kernel, r.size, r.metric))
        if not r.carried:
            continue
        out.append(r)
        note = (f"UNRESOLVED at {len(r.carried)} commit(s) before "
                f"({', '.join(c[:10] for c in r.carried)}): measured first")
        if r.verdict != Verdict.CANDIDATE:
            r.verdict = Verdict.CANDIDATE
        r.note = f"{r.note}; {note}" if r.note else note
    return out


def evidence(rows: list[Row], root, machine: str, repo, judged: str) -> int:
    """Each carried row's rounds kept against its anchor at the newest commit it was carried
    from, where that measured the same code (Row.carried_rounds); returns how many got some."""
    n = 0
    for r in rows:
        if not r.carried or not r.anchor:
            continue
        older = r.carried[0]
        kept = verdicts.load(root, machine, older).get((r.kernel, r.size, r.metric)) or {}
        # only rounds the A/A control let stand ("carry"; files from before it said so: none)
        got = next((e.get("values") for e in kept.get("effects") or []
                    if e.get("against") == r.anchor and e.get("values")
                    and e.get("carry") is True), None)
        if not carried(got)[0] or not same_code(repo, older, judged, r.kernel):
            continue
        r.carried_rounds[r.anchor] = got
        n += 1
    return n
