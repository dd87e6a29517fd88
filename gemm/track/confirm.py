"""Deciding the gate's flagged rows ("drop?"): DROP (confirmed) or noise.

A flagged drop may be the code or the machine (the history was recorded on other GPUs of the
same name). Where a GPU is present it is decided by an A/B (gemm.track.abtest): the new commit's
code against the code of the reference commit (the earlier run nearest the history median),
both measured here, alternately, `confirm_runs` times each; it is a DROP only if the new code is
slower than the reference code by more than the same bound. Where no A/B can be made (the
reference cannot be checked out or measured) the judged commit's own code is re-measured and
compared with the history. Without a GPU, a verdict kept by an earlier confirming run for this
exact value (gemm.track.verdicts) is used; otherwise the drop fails as unconfirmed.
"""
from __future__ import annotations

from ..core import stats
from . import abtest
from .gate import GateConfig, Row


def gpu_present() -> tuple[bool, str]:
    """Can this machine measure? Asked of the package without importing CUDA here."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "gemm", "measure", "--probe"],
                         capture_output=True, text=True)
    return out.returncode == 0, (out.stderr.strip().splitlines() or ["no GPU"])[-1]


def decide(rows: list[Row], cfg: GateConfig, new_commit: str, repo=".", kept=None,
           log=print, probe=None) -> list[Row]:
    """Decide every "drop?" row in place; returns the rows measured on a GPU here.

    `kept`: {(kernel, size, metric): row dict} from gemm.track.verdicts, used without a GPU.
    """
    cands = [r for r in rows if r.verdict == "drop?"]
    if not cands:
        return []
    ok, why = (probe or gpu_present)() if cfg.confirm else (False, "confirmation disabled")
    if not ok:
        for r in cands:
            _use_kept(r, (kept or {}).get((r.kernel, r.size, r.metric)), why)
        return []
    by_ref: dict[str, list[Row]] = {}
    for r in cands:
        by_ref.setdefault(r.reference, []).append(r)
    for ref, group in by_ref.items():
        try:
            got = abtest.run(repo, ref, new_commit, series(group), cfg.confirm_runs, log)
        except abtest.ABError as exc:
            log(f"regress: no A/B against {str(ref)[:10]}: {exc}; re-measuring "
                f"{new_commit[:10]} alone")
            _remeasure_alone(group, cfg, repo, new_commit, log, f"no A/B ({str(exc)[:80]})")
            continue
        for r in group:
            judge_ab(r, got.get((r.kernel, r.size, r.metric), {}))
    return cands


def _use_kept(r: Row, old: dict | None, why: str) -> None:
    if old and old.get("new") == r.new and old.get("verdict") in ("DROP", "noise"):
        r.verdict = old["verdict"]
        r.remeasured, r.ab_reference, r.ab_new = (old.get("remeasured"), old.get("ab_reference"),
                                                  old.get("ab_new"))
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


def judge_ab(r: Row, got: dict) -> None:
    new = [v for v in got.get("new", []) if v is not None]
    ref = [v for v in got.get("reference", []) if v is not None]
    if not new:
        r.verdict, r.note = "FAILED", "the new code failed when re-measured"
        return
    r.remeasured = r.ab_new = stats.median(new)
    if not ref:  # the reference code failed here: judge the new code against the history
        versus_history(r, r.ab_new, f"the reference {r.reference[:10]} failed in the A/B")
        return
    r.ab_reference = stats.median(ref)
    change = (r.ab_new - r.ab_reference) / r.ab_reference
    ab = f"A/B vs {r.reference[:10]} here: {r.ab_reference:.4g} -> {r.ab_new:.4g} ({100 * change:+.2f} %)"
    if -change > r.bound:
        r.verdict, r.note = "DROP", f"confirmed: {ab}"
    else:
        r.verdict, r.note = "noise", f"not confirmed: {ab}; the reference recorded {r.ref_value:.4g}"


def versus_history(r: Row, v: float, why: str) -> None:
    """Judge a re-measured value of the new code against the history's bound."""
    r.remeasured = v
    drop = r.centre - v > r.bound * abs(r.centre)
    r.verdict = "DROP" if drop else "noise"
    r.note = f"{'confirmed' if drop else 'not confirmed'}: re-measured {v:.4g}; {why}"


def _remeasure_alone(rows: list[Row], cfg: GateConfig, repo, commit: str, log, why: str) -> None:
    """Re-measure the judged commit's own code (its worktree) against the history."""
    try:
        got = abtest.run_alone(repo, commit, series(rows), cfg.confirm_runs, log)
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
