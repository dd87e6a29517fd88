"""What changed between consecutive recorded commits (CPU only, git and results/): for each
pair on a machine's history, whether it changed the harness (gemm.track.codeid.HARNESS), and
whether only the launch planning (LAUNCH_PLANNING) or also the timing code and entry point.
How often per-series launch fingerprints would spare an A/B (docs/gate.md, Limits).

    PYTHONPATH=. python3 ci/probes/harness_changes.py [results/h200]
"""
import sys
from pathlib import Path

from gemm.core import git
from gemm.store.history import load_runs
from gemm.track import codeid

LAUNCH_PLANNING = tuple(f"gemm/core/{m}.py" for m in (
    "geometry", "tuning", "splitk", "staging", "tensormaps", "registry", "shapes")) + tuple(
    f"gemm/cuda/{m}.py" for m in ("launch", "loader", "tma", "staging", "targets"))


def main(root: str = "results/h200") -> None:
    runs, _ = load_runs(Path(root).parent, Path(root).name)   # in the history's own order
    shas = list(dict.fromkeys(r.commit for r in runs))
    pairs = harness = launch_only = 0
    for a, b in zip(shas, shas[1:]):
        if git.returncode(".", "merge-base", "--is-ancestor", a, b) != 0:
            continue
        pairs += 1
        files = git.run(".", "diff", "--name-only", a, b, "--", *codeid.HARNESS).split()
        if not files:
            continue
        harness += 1
        other = [f for f in files if f not in LAUNCH_PLANNING]
        launch_only += not other
        print(f"{a[:8]} -> {b[:8]}: " + ("launch planning only" if not other else
                                         "timing or entry point: " + " ".join(other)[:120]))
    print(f"{pairs} pairs of consecutive recorded commits; {harness} changed the harness, "
          f"{launch_only} of them the launch planning alone")


if __name__ == "__main__":
    main(*sys.argv[1:])
