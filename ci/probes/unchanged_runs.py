"""Issue 24's false-alarm ledger (CPU only, git, results/ and verdicts/): every recorded commit
whose gate kept a whole judgement (a verdict summary), with its GPU, whether its measured code
(codeid.MEASURED_BY as the judged commit's own gate had it) changed since the recorded commit
before it, its verdict counts and how
many of its candidates of the large class (2048 and up) ended UNRESOLVED. The per-commit job's wall time is not
recorded in results/; docs/evidence.md has it per run.

    PYTHONPATH=. python3 ci/probes/unchanged_runs.py [results/h200] [verdicts] [--since SHA]
"""
import argparse
import ast
from pathlib import Path

from gemm.core import git
from gemm.core.problem import Problem, SizeClass
from gemm.record.sitedata import gpu_of
from gemm.store import verdicts
from gemm.store.history import load_runs
from gemm.track import codeid


def large(size: str) -> bool:
    return Problem.parse(size).size_class == SizeClass.LARGE


def measured_by(sha: str) -> tuple:
    """The MEASURED_BY of the gate that judged `sha` (its own codeid.py), else today's: a run
    counts as unchanged code under the rule it was judged with."""
    text = git.output(".", "show", f"{sha}:gemm/track/codeid.py") or ""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MEASURED_BY"
                                                for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return codeid.MEASURED_BY


def main(root: str = "results/h200", kept: str = "verdicts", since: str | None = None) -> None:
    machine = Path(root).name
    runs, _ = load_runs(Path(root).parent, machine)
    shas = list(dict.fromkeys(r.commit for r in runs))
    gpu = {r.commit: gpu_of(r.path) or "?" for r in runs}
    summaries = {d["commit"]: d["summary"] for d in verdicts.load_all(kept, machine)
                 if d.get("summary")}
    first = 0     # rows from `since` on; "same" is still against the recorded commit before
    if since:
        full = git.run(".", "rev-parse", since).strip()
        if full not in shas:
            raise SystemExit(f"unchanged_runs.py: {since} has no recorded run in {root}")
        first = shas.index(full)
    print("| commit | GPU | measured code | ok | noise | improved | UNRESOLVED | DROP | "
          "candidates >= 2048 | of them UNRESOLVED | exit |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    unchanged = []
    for i, (prev, sha) in enumerate(zip([None] + shas, shas)):
        summary = summaries.get(sha)
        if summary is None or i < first:
            continue
        same = prev is not None and git.returncode(
            ".", "diff", "--quiet", prev, sha, "--", *measured_by(sha)) == 0
        counts = summary.get("counts") or {}
        rows = [r for r in summary.get("rows") or [] if large(r["size"])]
        # the A/B's: a confirmed speed-up is "improved" with its effects (since abreport.DECIDED)
        cands = [r for r in rows if r.get("verdict") in ("noise", "UNRESOLVED", "DROP")
                 or r.get("verdict") == "improved" and r.get("effects")]
        open_ = [r for r in cands if r["verdict"] == "UNRESOLVED"]
        print(f"| {sha[:10]} | {gpu.get(sha)} | {'same' if same else 'changed'} | "
              + " | ".join(str(counts.get(v, 0)) for v in ("ok", "noise", "improved",
                                                           "UNRESOLVED", "DROP"))
              + f" | {len(cands)} | {len(open_)} | {summary.get('exit')} |")
        if same:
            unchanged.append((sha, gpu.get(sha), counts.get("DROP", 0), len(cands), len(open_)))
    gpus = {g for _, g, *_ in unchanged}
    drops = sum(d for _, _, d, _, _ in unchanged)
    cands = sum(c for *_, c, _ in unchanged)
    open_ = sum(o for *_, o in unchanged)
    print(f"\n{len(unchanged)} runs of unchanged measured code on {len(gpus)} GPUs: {drops} DROP; "
          f"{open_} of {cands} candidates at >= 2048 UNRESOLVED"
          + (f" ({100 * open_ / cands:.1f} %)" if cands else ""))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default="results/h200")
    ap.add_argument("kept", nargs="?", default="verdicts")
    ap.add_argument("--since", help="list from this recorded commit on")
    a = ap.parse_args()
    main(a.root, a.kept, a.since)
