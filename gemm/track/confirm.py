"""Deciding the gate's candidates ("drop?"): DROP, noise (dismissed) or UNRESOLVED.

A candidate may be the code or the machine (the history was recorded on other GPUs of the same
name). Where a GPU is present it is decided by an A/B (gemm.track.abtest): the new commit's
code against the code of each commit it was flagged against (the history's reference, the
newest earlier recorded commit; the anchor), all measured here in palindromic rounds (R N N R),
each arm in its own processes. After `min_rounds` rounds, and after each round up to
`max_rounds`, gemm.track.decision decides each comparison from the per-process values, with
this runner's calibrated noise (gemm.track.calibration) pooled in; series still ambiguous are
measured again, alone. The family-wise error rate `alpha` holds over every comparison of the
commit and every look (Bonferroni over both). An A/A control (each reference's first
processes against its last) guards the run: if the same code moved, the rounds are discarded
and measured once more; if it moves again, what is undecided is UNRESOLVED. So is what is
undecided when the A/B's time budget is spent (no new round starts past it; the per-commit
job stays bounded).

Where no A/B can be made (a reference cannot be checked out or measured) the judged commit's
own code is re-measured and compared with the history's screen. Without a GPU, a verdict kept
by an earlier confirming run for this exact value (gemm.track.verdicts) is used; otherwise the
candidate fails as unconfirmed.
"""
from __future__ import annotations

import math
import time

from ..core import stats
from . import abtest, decision
from .gate import GateConfig, Row, candidates_against


def gpu_present() -> tuple[bool, str]:
    """Can this machine measure? Asked of the package without importing CUDA here."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "gemm", "measure", "--probe"],
                         capture_output=True, text=True)
    return out.returncode == 0, (out.stderr.strip().splitlines() or ["no GPU"])[-1]


def decide(rows: list[Row], cfg: GateConfig, new_commit: str, repo=".", kept=None,
           log=print, probe=None, calibration=None) -> list[Row]:
    """Decide every "drop?" row in place; returns the rows measured on a GPU here.

    `kept`: {(kernel, size, metric): row dict} from gemm.track.verdicts, used without a GPU.
    `calibration`: a gemm.track.calibration.Calibration (None: the rounds' own spread only).
    """
    cands = [r for r in rows if r.verdict == "drop?"]
    if not cands:
        return []
    ok, why = (probe or gpu_present)() if cfg.confirm else (False, "confirmation disabled")
    if not ok:
        for r in cands:
            _use_kept(r, (kept or {}).get((r.kernel, r.size, r.metric)), why)
        return []
    comparisons = [(r, c) for r in cands for c in candidates_against(r)]
    lonely = [r for r in cands if not candidates_against(r)]
    if lonely:
        _remeasure_alone(lonely, cfg, repo, new_commit, log, "no reference commit to compare with")
    if comparisons:
        refs = list(dict.fromkeys(c for _, c in comparisons))
        try:
            with abtest.trees(repo, refs + [new_commit]) as tree:
                ABRun(comparisons, cfg, new_commit, tree, log, calibration).run()
        except abtest.ABError as exc:
            log(f"regress: no A/B against {', '.join(c[:10] for c in refs)}: {exc}; "
                f"re-measuring {new_commit[:10]} alone")
            _remeasure_alone([r for r in cands if r not in lonely], cfg, repo, new_commit, log,
                             f"no A/B ({str(exc)[:80]})")
    return cands


class ABRun:
    """The rounds of one commit's A/B and the decisions they lead to."""

    def __init__(self, comparisons, cfg: GateConfig, new: str, tree: dict, log, calibration):
        self.comps = comparisons
        self.cfg, self.new, self.tree, self.log, self.cal = cfg, new, tree, log, calibration
        self.family = len(comparisons) * (cfg.max_rounds - cfg.min_rounds + 1)
        self.decided: dict[int, decision.Effect] = {}
        self.failed: dict[int, str] = {}
        self.values: dict = {}

    def prior(self, r: Row):
        return self.cal.prior(r.kernel, r.size, r.metric) if self.cal is not None else None

    def undecided(self) -> list[int]:
        return [i for i in range(len(self.comps)) if i not in self.decided and i not in self.failed]

    def measure_round(self, n: int) -> None:
        todo = self.undecided()
        plan: dict[str, list[Row]] = {}
        for i in todo:
            r, c = self.comps[i]
            plan.setdefault(c, []).append(r)
        refs = list(plan)
        union = series([self.comps[i][0] for i in todo])
        for sha, pos in abtest.palindrome(refs, self.new):
            what = union if pos == "new" else series(plan[sha])
            self.log(f"regress: A/B round {n}/{self.cfg.max_rounds}: "
                     f"{'new' if pos == 'new' else 'reference'} {sha[:10]}: "
                     + "; ".join(f"{k} at {', '.join(s)}" for k, s in what.items()))
            arm = "new" if pos == "new" else sha
            for key, v in abtest.measure(self.tree[sha], what).items():
                self.values.setdefault((arm, key), {"first": [], "last": [], "new": []})[pos].append(v)

    def arm(self, arm: str, r: Row) -> dict:
        return self.values.get((arm, (r.kernel, r.size, r.metric)), {"first": [], "last": [], "new": []})

    def unstable(self) -> str | None:
        """The first A/A control that moved, described; None if every one held."""
        for i in self.undecided():
            r, c = self.comps[i]
            v = self.arm(c, r)
            first, last = v["first"], v["last"]
            if None in first or None in last or not first or not last:
                continue
            ok, e = decision.aa_stable(first, last, r.min_effect, self.cfg.alpha, self.family,
                                       self.prior(r))
            if not ok:
                return f"{r.kernel} at {r.size} ({r.label}), A/A of {c[:10]}: {e.describe()}"
        return None

    def decide_round(self) -> None:
        for i in self.undecided():
            r, c = self.comps[i]
            ref = self.arm(c, r)["first"] + self.arm(c, r)["last"]
            new = self.arm("new", r)["new"]
            if not new or any(v is None for v in new):
                self.failed[i] = "the new code failed when measured here"
                continue
            if not ref or any(v is None for v in ref):
                self.failed[i] = f"the reference {c[:10]} failed when measured here"
                continue
            e = decision.effect(ref, new, r.min_effect, self.cfg.alpha, self.family, self.prior(r))
            if e.verdict != decision.AMBIGUOUS:
                self.decided[i] = e

    def run(self) -> None:
        restarts, n = 0, 0
        t0 = time.monotonic()
        while n < self.cfg.max_rounds and self.undecided():
            if n >= 1 and time.monotonic() - t0 > self.cfg.budget_s:
                self.finish(f"out of the A/B time budget ({self.cfg.budget_s:.0f} s) after "
                            f"{n} rounds")
                return
            n += 1
            self.measure_round(n)
            if n < self.cfg.min_rounds:
                continue
            moved = self.unstable()
            if moved:
                if restarts == 0:
                    self.log(f"regress: the A/A control moved ({moved}): the GPU changed "
                             "during the A/B; its rounds are discarded and measured again")
                    restarts, n, self.values = 1, 0, {}
                    continue
                self.finish(f"the GPU was unstable: the A/A control moved twice ({moved})")
                return
            self.decide_round()
        self.finish(f"still ambiguous after {n} rounds")

    def finish(self, why_unresolved: str) -> None:
        by_row: dict[int, list[int]] = {}
        for i, (r, _) in enumerate(self.comps):
            by_row.setdefault(id(r), []).append(i)
        for idxs in by_row.values():
            r = self.comps[idxs[0]][0]
            parts, verdicts = [], []
            r.effects, r.against = [], [self.comps[i][1] for i in idxs]
            for i in idxs:
                c = self.comps[i][1]
                v = self.arm(c, r)
                ref = [x for x in v["first"] + v["last"] if x is not None]
                new = [x for x in self.arm("new", r)["new"] if x is not None]
                if new:
                    r.remeasured = r.ab_new = stats.median(new)
                if ref and r.ab_reference is None:
                    r.ab_reference = stats.median(ref)
                if i in self.failed:
                    verdicts.append("FAILED" if "new code" in self.failed[i] else "UNRESOLVED")
                    parts.append(f"vs {c[:10]}: {self.failed[i]}")
                    continue
                e = self.decided.get(i)
                if e is None and ref and new:
                    e = decision.effect(ref, new, r.min_effect, self.cfg.alpha, self.family,
                                        self.prior(r))
                    verdicts.append("UNRESOLVED")
                    parts.append(f"A/B vs {c[:10]} here: {e.describe()}: {why_unresolved}")
                elif e is None:
                    verdicts.append("UNRESOLVED")
                    parts.append(f"vs {c[:10]}: {why_unresolved}")
                    continue
                else:
                    verdicts.append("DROP" if e.verdict == decision.DROP else "noise")
                    parts.append(f"A/B vs {c[:10]} here: {e.describe()}: {e.verdict}")
                if self.cal is not None and self.cal.borrowed(r.kernel, r.size, r.metric):
                    parts[-1] += " (calibrated noise borrowed from other kernels at this size)"
                r.effects.append({"against": c, "verdict": e.verdict if i in self.decided
                                  else "UNRESOLVED", "change": e.change,
                                  "lo": math.expm1(e.lo), "hi": math.expm1(e.hi),
                                  "sigma": e.sigma, "dof": e.dof, "n_ref": e.n_ref,
                                  "n_new": e.n_new})
            for v in ("FAILED", "DROP", "UNRESOLVED"):
                if v in verdicts:
                    r.verdict = v
                    break
            else:
                r.verdict = "noise"
            lead = {"DROP": "confirmed", "noise": "not confirmed", "UNRESOLVED": "unresolved",
                    "FAILED": "failed"}[r.verdict]
            r.note = f"{lead}: " + "; ".join(parts)


def _use_kept(r: Row, old: dict | None, why: str) -> None:
    if old and old.get("new") == r.new and old.get("verdict") in ("DROP", "noise", "UNRESOLVED"):
        r.verdict = old["verdict"]
        r.remeasured, r.ab_reference, r.ab_new = (old.get("remeasured"), old.get("ab_reference"),
                                                  old.get("ab_new"))
        r.effects, r.against = old.get("effects") or [], old.get("against") or []
        r.note = f"recorded {(old.get('date') or '?')[:10]}: {old.get('note', '')}"
    else:
        r.verdict, r.note = "DROP", f"unconfirmed: {why}"


def series(rows: list[Row]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r.kernel, [])
        if r.size not in out[r.kernel]:
            out[r.kernel].append(r.size)
    return out


def versus_history(r: Row, v: float, why: str) -> None:
    """Judge a re-measured value of the new code against the history's bound."""
    r.remeasured = v
    drop = r.centre - v > (r.bound or 0) * abs(r.centre)
    r.verdict = "DROP" if drop else "noise"
    r.note = f"{'confirmed' if drop else 'not confirmed'}: re-measured {v:.4g}; {why}"


def _remeasure_alone(rows: list[Row], cfg: GateConfig, repo, commit: str, log, why: str) -> None:
    """Re-measure the judged commit's own code (its worktree) against the history."""
    try:
        got = abtest.run_alone(repo, commit, series(rows), 2 * cfg.min_rounds, log)
    except abtest.ABError as exc:
        for r in rows:
            r.verdict, r.note = "DROP", f"unconfirmed: {why}; {commit[:10]} could not be measured: {str(exc)[:80]}"
        return
    for r in rows:
        vals = [v for v in got.get((r.kernel, r.size, r.metric), []) if v is not None]
        if vals:
            versus_history(r, stats.median(vals), why)
        else:
            r.verdict, r.note = "FAILED", "re-measurement failed"
