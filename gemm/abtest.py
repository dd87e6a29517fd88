"""A/B on this machine: the new commit's code against a reference commit's, alternately.

Recorded history mixes machines: two lent H200s of the same name and asv machine can differ by
~2 % on one kernel. Re-measuring only the new code then confirms a machine shift as if it were a
regression. So the gate measures both sides here and now: each commit is checked out into its
own git worktree (its package, kernels and measurement policy), and the two are run in turns,
A B A B ..., so that drift in clocks or temperature falls on both. What is compared is code
against code on one GPU.

The measuring step runs in the other tree's Python (`python -c MEASURE`), using only names that
every recorded commit has (gemm.sweep.sweep/derived/problems_from_sizes, gemm.track.POLICY).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TAG = "@@AB "
TIMEOUT_S = 900

MEASURE = r"""
import json, sys
import gemm
from gemm.sweep import derived, problems_from_sizes, sweep
from gemm.track import POLICY
job = json.loads(sys.argv[1])
out = {"package": gemm.__file__, "values": []}
for kernel, sizes in job["series"].items():
    res = sweep([kernel], problems_from_sizes(sizes), POLICY)
    for rec in res["records"]:
        d = derived(rec)
        out["values"].append({"kernel": kernel, "size": rec["size"], "status": rec.get("status"),
                              "tflops": d["tflops"], "pct": d["pct"],
                              "error": (rec.get("error") or "")[-300:]})
print("@@AB " + json.dumps(out), flush=True)
"""

METRICS = {"TFLOPS": "tflops", "% of cuBLAS": "pct"}


class ABError(RuntimeError):
    """The A/B could not be made (no git, unknown commit, the other code would not run)."""


def _git(repo, *args) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ABError(f"git {args[0]}: {exc}") from None
    if out.returncode != 0:
        raise ABError(f"git {' '.join(args)}: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


@contextlib.contextmanager
def checkout(repo, commit: str):
    """A temporary worktree of `commit`, removed afterwards."""
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    parent = Path(tempfile.mkdtemp(prefix="gemm-ab-"))
    tree = parent / sha[:10]
    _git(repo, "worktree", "add", "--detach", "--force", str(tree), sha)
    try:
        yield tree
    finally:
        with contextlib.suppress(ABError):
            _git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(parent, ignore_errors=True)
        with contextlib.suppress(ABError):
            _git(repo, "worktree", "prune")


def measure(tree: Path, series: dict[str, list[str]], timeout: float = TIMEOUT_S) -> dict:
    """Run `series` ({kernel: [sizes]}) with the code in `tree`; {(kernel, size, metric): value}."""
    tree = Path(tree).resolve()
    env = {k: v for k, v in os.environ.items() if k != "GEMM_KERNELS_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(tree)] + [p for p in env.get("PYTHONPATH", "")
                                                       .split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"
    try:
        out = subprocess.run([sys.executable, "-c", MEASURE, json.dumps({"series": series})],
                             cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ABError(f"measuring {tree.name} took over {timeout:.0f} s") from None
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(TAG)]
    if out.returncode != 0 or not lines:
        raise ABError(f"measuring with the code of {tree.name} failed (exit {out.returncode}): "
                      f"{out.stderr.strip()[-400:]}")
    got = json.loads(lines[-1][len(TAG):])
    pkg = Path(got["package"]).resolve()
    if tree not in pkg.parents:
        raise ABError(f"the measurement imported gemm from {pkg}, not from {tree}")
    values = {}
    for v in got["values"]:
        for metric, key in METRICS.items():
            values[(v["kernel"], v["size"], metric)] = v[key] if v["status"] == "ok" else None
    return values


def run(repo, reference: str, new: str, series: dict[str, list[str]], rounds: int = 2,
        log=print) -> dict:
    """Measure `series` with both commits' code, alternately, `rounds` times each.

    Returns {(kernel, size, metric): {"reference": [values], "new": [values]}} (None where a
    measurement failed). Raises ABError if either commit cannot be checked out or measured.
    """
    got: dict = {}
    with checkout(repo, reference) as ref_tree, checkout(repo, new) as new_tree:
        what = "; ".join(f"{k} at {', '.join(s)}" for k, s in series.items())
        for i in range(rounds):
            order = [("reference", ref_tree), ("new", new_tree)]
            if i % 2:
                order.reverse()  # A B, B A: neither side always goes first
            for side, tree in order:
                sha = reference if side == "reference" else new
                log(f"regress: A/B round {i + 1}/{rounds}: {side} {sha[:10]}: {what}")
                for key, v in measure(tree, series).items():
                    got.setdefault(key, {"reference": [], "new": []})[side].append(v)
    return got
