"""The candidates decided: by an A/B, a kept verdict, else unconfirmed (docs/gate.md 3-5)."""
from __future__ import annotations

import subprocess
import sys

from ..machine import nvml
from ..store import verdicts
from . import abreport, abtest, plan
from .abrun import ABRun, Stop, carried
from .codeid import same_code
from .gate import GateConfig, Row, Verdict, candidates_against, past_screen, screened_large


def unresolved_before(root, machine: str, earlier: list, key: tuple,
                      anchor: str | None = None) -> list[str]:
    """The commits before the judged one (newest first) UNRESOLVED for `key`, up to the anchor."""
    out = []
    for run in reversed(earlier):
        if anchor and run.commit == anchor:
            break
        if run.commit in out:      # a commit recorded twice is one commit
            continue
        kept = verdicts.load(root, machine, run.commit).get(key)
        if kept is None or kept.get("verdict") != Verdict.UNRESOLVED:
            break
        out.append(run.commit)
    return out


def carry(rows: list[Row], root, machine: str, earlier: list,
          anchor: str | None = None) -> list[Row]:
    """Make each large row UNRESOLVED just before (Row.carried) a candidate; returns them."""
    out = []
    for r in rows:
        if not screened_large(r):
            continue
        r.carried = unresolved_before(root, machine, earlier, r.key, anchor)
        if r.carried:
            r.verdict = Verdict.CANDIDATE
            r.add_note(f"UNRESOLVED at {len(r.carried)} commit(s) before "
                       f"({', '.join(c[:10] for c in r.carried)}): measured first")
            out.append(r)
    return out


def evidence(rows: list[Row], root, machine: str, repo, judged: str, same_build=None) -> int:
    """Give carried rows the rounds kept against the anchor, same code (Row.carried_rounds)."""
    n = 0
    for r in rows:
        if not r.carried or not r.anchor:
            continue
        older = r.carried[0]
        kept = verdicts.load(root, machine, older).get(r.key) or {}
        # only rounds the A/A control let stand ("carry"; files from before it said so: none)
        got = next((e.get("values") for e in kept.get("effects") or []
                    if e.get("against") == r.anchor and e.get("values")
                    and e.get("carry") is True), None)
        if carried(got)[0] and same_code(repo, older, judged, r.kernel, same_build):
            r.carried_rounds[r.anchor] = got
            n += 1
    return n


def gpu_present() -> tuple[bool, str]:
    """Can this machine measure? Asked of `gemm measure --probe`, without importing CUDA here."""
    out = subprocess.run([sys.executable, "-m", "gemm", "measure", "--probe"],
                         capture_output=True, text=True)
    return out.returncode == 0, (out.stderr.strip().splitlines() or ["no GPU"])[-1]


def decide(rows: list[Row], cfg: GateConfig, new_commit: str, repo=".", kept=None,
           log=print, probe=None, calibration=None, same_build=None) -> list[Row]:
    """Decide every "drop?" row in place (`kept` verdicts without a GPU); the rows measured."""
    cands = []
    for r in rows:
        if r.verdict != Verdict.CANDIDATE:
            continue
        against = candidates_against(r)
        r.identical = [c for c in against if same_code(repo, c, new_commit, r.kernel, same_build)]
        if r.identical and len(r.identical) == len(against):
            r.verdict, r.against = Verdict.NOISE, list(r.identical)
            r.note = f"not confirmed: {_identical_note(r)}"
        else:
            cands.append(r)
    if not cands:
        return []
    ok, why = (probe or gpu_present)() if cfg.confirm else (False, "confirmation disabled")
    # the rows given their kept verdict, whose note says it all already
    reused = {id(r) for r in cands if not ok and _use_kept(r, (kept or {}).get(r.key), why)}
    comparisons = [(r, c) for r in cands for c in _to_measure(r)] if ok else []
    for r in cands:
        if ok and not candidates_against(r):
            r.verdict, r.note = Verdict.UNRESOLVED, "no reference commit to compare with"
    if comparisons:
        refs = list(dict.fromkeys(c for _, c in comparisons))
        tree: dict = {}
        machine = nvml.ArmSamples()   # the GPU sampled while each arm's process runs
        clocks: dict = {}     # and the clocks each arm's own timer read, per target
        ab = ABRun(comparisons, cfg, new_commit, machine.sampling(abtest.in_trees(tree, clocks)),
                   lambda s: log(f"regress: {s}"), calibration, plan.speeds(rows))
        try:
            with abtest.trees(repo, refs + [new_commit]) as trees:
                tree.update(trees)
                ab.run()
        except abtest.ABError as exc:   # what the A/B had decided stands, the rest UNRESOLVED
            log(f"regress: the A/B against {', '.join(c[:10] for c in refs)} broke off: {exc}")
            ab.end(Stop.BROKEN, f"no A/B: {str(exc)[:160]}")
        abreport.finish(ab, machine, clocks)
    for r in cands:     # say which comparisons needed no A/B
        if r.identical and id(r) not in reused:
            r.against = list(dict.fromkeys([*r.against, *r.identical]))
            r.add_note(_identical_note(r))
    return cands if ok else []


def _to_measure(r: Row) -> list[str]:
    return [c for c in candidates_against(r) if c not in r.identical]


def _identical_note(r: Row) -> str:
    return (f"vs {', '.join(c[:10] for c in r.identical)}: the same measured code (git or "
            "nvcc), so no A/B: the machine, not the code")


def _use_kept(r: Row, old: dict | None, why: str) -> bool:
    """The kept verdict for this value and these commits (True), else UNRESOLVED or DROP."""
    if (old and set(_to_measure(r)) <= set(old.get("against") or [old.get("reference")])
            and old.get("new") == r.new
            and old.get("verdict") in (Verdict.DROP, Verdict.NOISE, Verdict.IMPROVED,
                                         Verdict.UNRESOLVED)):
        r.verdict = Verdict(old["verdict"])
        r.ab_reference, r.ab_new = old.get("ab_reference"), old.get("ab_new")
        r.effects, r.against = old.get("effects") or [], old.get("against") or []
        r.open = old.get("open") or []
        r.note = f"recorded {(old.get('date') or '?')[:10]}: {old.get('note', '')}"
        return True
    if (r.carried or r.code_changed) and not past_screen(r):
        r.verdict = Verdict.UNRESOLVED
        r.add_note(f"no A/B here: {why}")
    else:
        r.verdict, r.note, r.unconfirmed = Verdict.DROP, f"unconfirmed: {why}", True
    return False
