"""UNRESOLVED is never a silent pass: a large series the A/B left UNRESOLVED at the commits
just before this one is a candidate again, measured first (ABRun.priority), against the
anchor (which sees a drop that the step from the previous commit no longer shows; against the
previous commit too where the screen flags it now); and it fails the gate once it has been
UNRESOLVED at GateConfig.carry_commits commits running (gate.failed). Where no A/B can be
made, a row that is a candidate only because it was carried stays UNRESOLVED (the count goes
on), not an unconfirmed DROP.

The evidence comes with it: the rounds the newest of those commits kept against the anchor
(they hold the rounds it had carried in turn; never rounds its A/A control rejected) join
this commit's rounds against the anchor as earlier rounds, where the code they measured is
this commit's code (abtest.same_code). They are never decided on alone, nor judged by
this run's A/A control; with them the comparison is decided by means, round by round. So a series too
noisy to decide within one job's budget is decided over a few commits, one way or the other.
"""
from __future__ import annotations

from ..core.problem import Problem, SizeClass
from . import verdicts
from .abrun import carried
from .abtest import same_code
from .gate import Row, Verdict

def unresolved_before(root, machine: str, earlier: list, key: tuple) -> list[str]:
    """The commits, newest first, immediately before the judged one (`earlier`: its earlier
    runs, oldest first) whose kept verdict for `key` (kernel, size, metric) is UNRESOLVED,
    up to the first that is not."""
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
    """Mark each large row left UNRESOLVED just before (Row.carried) and make it a candidate
    where the screen passed it; returns the rows carried."""
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
    """Each carried row's kept rounds against its anchor (Row.carried_rounds), from the newest
    commit it was carried from, where that commit measured the same code; returns how many
    rows got some."""
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
