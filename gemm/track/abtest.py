"""The A/B's arms: each commit in a worktree, measured by its own `gemm measure` process."""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..core import git, stats

TIMEOUT_S = 900
METRICS = ("tflops", "pct_of_cublas")


class ABError(RuntimeError):
    """The A/B could not be made (no git, unknown commit, the other code would not run)."""


def _git(repo, *args) -> str:
    try:
        return git.run(repo, *args)
    except git.GitError as exc:
        raise ABError(str(exc)) from None


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


def _run(tree: Path, args: list[str], timeout: float, env: dict | None = None):
    """`python args...` in `tree`, its own gemm first on the path; `env`: extra variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GEMM_KERNELS_DIR", "GEMM_INJECT_DELAY")} | (env or {})
    env["PYTHONPATH"] = os.pathsep.join([str(tree)] + [p for p in env.get("PYTHONPATH", "")
                                                       .split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"
    try:
        return subprocess.run([sys.executable, *args], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ABError(f"measuring {tree.name} took over {timeout:.0f} s") from None


def _values(got: dict, tree: Path) -> dict:
    """{(kernel, size, metric): value or None (failed)}, measured by the tree's own gemm."""
    pkg = Path(got["package"]).resolve() if got.get("package") else None
    if pkg is not None and tree not in pkg.parents:
        raise ABError(f"the measurement imported gemm from {pkg}, not from {tree}")
    out = {}
    for v in got["values"]:
        got_metrics = (v.get("metrics") or {}) if v["status"] == "ok" else {}
        for key in METRICS:   # one that measured 0, NaN or infinity failed, as with no value
            x = got_metrics.get(key)
            out[(v["kernel"], v["size"], key)] = x if usable(x) else None
    return out


def usable(x, kind=(int, float)) -> bool:
    """A number the decision rule can take: positive and finite (a bool is not a number)."""
    return isinstance(x, kind) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _seconds(v) -> float:
    """A wall entry's seconds: a number, or a dict of them by phase (open_s); else 0."""
    if isinstance(v, dict):
        return sum(_seconds(x) for x in v.values())
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _walls(doc: dict, series: dict, took: float, walls: dict) -> None:
    """Add a process's seconds to `walls`: per asked-for target, the rest under None."""
    spent = 0.0
    for r in doc.get("records") or [] if isinstance(doc, dict) else []:
        if not (isinstance(r, dict) and isinstance(r.get("wall"), dict)
                and r.get("size") in series.get(r.get("kernel"), ())):
            continue
        key = (r["kernel"], r["size"])
        s = sum(_seconds(r["wall"].get(k)) for k in ("open_s", "check_s", "time_s"))
        walls[key] = walls.get(key, 0.0) + s
        spent += s
    walls[None] = walls.get(None, 0.0) + max(0.0, took - spent)


def clocks_of(doc: dict) -> dict:
    """{(kernel, size): {"kernel": MHz, "baseline": MHz}}: the median SM clock of its samples."""
    out = {}
    for r in doc.get("records") or []:
        if r.get("role") != "kernel":
            continue
        got = {who: stats.median(c) for who in ("kernel", "baseline")
               if (c := [x for x in (r.get(f"{who}_time") or {}).get("clocks_mhz") or [] if x])}
        if got:
            out[(r["kernel"], r["size"])] = got
    return out


def measure(tree: Path, series: dict[str, list[str]], env: dict | None = None,
            walls: dict | None = None, clocks: dict | None = None,
            docs: list | None = None) -> dict:
    """{(kernel, size, metric): value} of `series` measured by the code in `tree`, one process."""
    tree = Path(tree).resolve()
    pairs = [x for kernel, sizes in series.items() for size in sizes
             for x in ("--task", f"{kernel}@{size}")]
    what = ", ".join(series)
    with tempfile.TemporaryDirectory(prefix="gemm-ab-json-") as tmp:
        path = Path(tmp) / "measure.json"
        t0 = time.monotonic()
        out = _run(tree, ["-m", "gemm", "measure", *pairs, "--policy", "confirm",
                          "--json", str(path)], TIMEOUT_S, env)
        took = time.monotonic() - t0
        try:
            doc = json.loads(path.read_text())
            values = _values(doc, tree)
            if docs is not None:
                docs.append(doc)
            for key, got in (clocks_of(doc).items() if clocks is not None else ()):
                for who, mhz in got.items():   # per process, in order
                    clocks.setdefault(key, {}).setdefault(who, []).append(mhz)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ABError(f"measuring {what} with the code of {tree.name} failed "
                          f"(exit {out.returncode}, {type(exc).__name__}): "
                          f"{out.stderr.strip()[-400:]}") from None
    if walls is not None:
        _walls(doc, series, took, walls)
    for kernel in series:
        if not any(k[0] == kernel for k in values):
            raise ABError(f"the code of {tree.name} reported nothing for {kernel} "
                          f"(measuring {what}): {out.stderr.strip()[-300:]}")
    return values


@contextlib.contextmanager
def trees(repo, commits):
    """{commit: worktree} for each distinct commit, all removed afterwards."""
    with contextlib.ExitStack() as stack:
        yield {c: stack.enter_context(checkout(repo, c)) for c in dict.fromkeys(commits)}


def in_trees(tree: dict, clocks: dict | None = None):
    """Arms in git worktrees ({arm: tree}), one process a call; `clocks` gets {arm: clocks}."""
    def of_arm(arm: str, what: dict) -> tuple[dict, dict]:
        walls: dict = {}
        sink = None if clocks is None else clocks.setdefault(arm, {})
        return measure(tree[arm], what, walls=walls, clocks=sink), walls
    return of_arm
