"""Deciding the gate's candidates ("drop?"): DROP, noise or UNRESOLVED, by an A/B of the new
code against each commit it was flagged against (gemm.track.abrun), none where git shows the
same measured code; without a GPU by a kept verdict, else an unconfirmed DROP (docs/gate.md).
The GPU's SM clock, power and temperature are sampled (gemm.machine.nvml) while each arm's
process runs, and each comparison's effect keeps both arms' figures.
"""
from __future__ import annotations

from ..machine import nvml
from . import abreport, abtest, plan
from .abrun import ABRun, Stop, in_trees
from .gate import GateConfig, Row, Verdict, candidates_against, past_screen


def gpu_present() -> tuple[bool, str]:
    """Can this machine measure? Asked of the package without importing CUDA here."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "gemm", "measure", "--probe"],
                         capture_output=True, text=True)
    return out.returncode == 0, (out.stderr.strip().splitlines() or ["no GPU"])[-1]


def decide(rows: list[Row], cfg: GateConfig, new_commit: str, repo=".", kept=None,
           log=print, probe=None, calibration=None) -> list[Row]:
    """Decide every "drop?" row in place; returns the rows measured on a GPU here. `kept`:
    gemm.store.verdicts.load's rows, used without a GPU."""
    cands = [r for r in rows if r.verdict == Verdict.CANDIDATE]
    for r in cands:
        r.identical = [c for c in candidates_against(r)
                       if abtest.same_code(repo, c, new_commit, r.kernel)]
        if r.identical and len(r.identical) == len(candidates_against(r)):
            r.verdict, r.against = Verdict.NOISE, list(r.identical)
            r.note = f"not confirmed: {_identical_note(r)}"
    cands = [r for r in cands if r.verdict == Verdict.CANDIDATE]
    if not cands:
        return []
    ok, why = (probe or gpu_present)() if cfg.confirm else (False, "confirmation disabled")
    if not ok:
        for r in cands:
            _use_kept(r, (kept or {}).get((r.kernel, r.size, r.metric)), why)
            _add_identical(r)
        return []
    comparisons = [(r, c) for r in cands for c in _to_measure(r)]
    for r in cands:
        if not candidates_against(r):
            r.verdict, r.note = Verdict.UNRESOLVED, "no reference commit to compare with"
    if comparisons:
        refs = list(dict.fromkeys(c for _, c in comparisons))
        tree: dict = {}
        machine = nvml.ArmSamples()   # the GPU sampled while each arm's process runs
        ab = ABRun(comparisons, cfg, new_commit, machine.sampling(in_trees(tree)),
                   lambda s: log(f"regress: {s}"), calibration, plan.speeds(rows))
        try:
            with abtest.trees(repo, refs + [new_commit]) as trees:
                tree.update(trees)
                ab.run()
        except abtest.ABError as exc:
            # what the A/B had decided stands, the rest is UNRESOLVED
            log(f"regress: the A/B against {', '.join(c[:10] for c in refs)} broke off: {exc}")
            ab.end(Stop.BROKEN, f"no A/B: {str(exc)[:160]}")
        abreport.finish(ab, machine)
    for r in cands:
        _add_identical(r)
    return cands


def _to_measure(r: Row) -> list[str]:
    """The commits it was flagged against, less those of the same measured code."""
    return [c for c in candidates_against(r) if c not in r.identical]


def _identical_note(r: Row) -> str:
    return (f"vs {', '.join(c[:10] for c in r.identical)}: the same measured code (git: no "
            f"change to {', '.join(abtest.MEASURED_BY)}), so no A/B: the machine, not the code")


def _add_identical(r: Row) -> None:
    """Say which comparisons needed no A/B."""
    if r.identical:
        r.against = list(dict.fromkeys([*r.against, *r.identical]))
        r.note = f"{r.note}; {_identical_note(r)}" if r.note else _identical_note(r)


def _use_kept(r: Row, old: dict | None, why: str) -> None:
    """A verdict kept for this very value against every commit flagged now; else a DROP,
    unconfirmed, but UNRESOLVED for a row only carried or of a changed kernel."""
    covers = old is not None and set(_to_measure(r)) <= set(old.get("against") or
                                                             [old.get("reference")])
    if (old and covers and old.get("new") == r.new
            and old.get("verdict") in (Verdict.DROP, Verdict.NOISE, Verdict.UNRESOLVED)):
        r.verdict = Verdict(old["verdict"])
        r.ab_reference, r.ab_new = old.get("ab_reference"), old.get("ab_new")
        r.effects, r.against = old.get("effects") or [], old.get("against") or []
        r.open = old.get("open") or []
        r.note = f"recorded {(old.get('date') or '?')[:10]}: {old.get('note', '')}"
    elif (r.carried or r.code_changed) and not past_screen(r):
        r.verdict, r.note = Verdict.UNRESOLVED, f"{r.note}; no A/B here: {why}"
    else:
        r.verdict, r.note, r.unconfirmed = Verdict.DROP, f"unconfirmed: {why}", True
