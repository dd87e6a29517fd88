"""UNRESOLVED is never a silent pass: a large series the A/B left UNRESOLVED at the commits
just before this one is a candidate again, measured first (ABRun.priority), against the
newest earlier commit and the anchor (the anchor sees a drop that the step from the previous
commit no longer shows); and it fails the gate once it has been UNRESOLVED at
GateConfig.carry_commits commits running (gate.failed)."""
from __future__ import annotations

from . import verdicts
from .gate import Row, Verdict, size_class


def unresolved_before(root, machine: str, earlier: list, key: tuple) -> list[str]:
    """The commits, newest first, immediately before the judged one (`earlier`: its earlier
    runs, oldest first) whose kept verdict for `key` (kernel, size, metric) is UNRESOLVED,
    up to the first that is not."""
    out = []
    for run in reversed(earlier):
        kept = verdicts.load(root, machine, run.commit).get(key)
        if kept is None or kept.get("verdict") != Verdict.UNRESOLVED:
            break
        out.append(run.commit)
    return out


def carry(rows: list[Row], root, machine: str, earlier: list) -> list[Row]:
    """Mark each large row left UNRESOLVED just before (Row.carried) and make it a candidate
    where the screen passed it; returns the rows carried."""
    out = []
    for r in rows:
        if size_class(r.size) != "large" or r.verdict not in (
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
