"""`gemm record`: run asv for one commit so that an interrupted or GPU-less run never touches
the committed history. asv writes into a staging copy of results/, and only a complete, valid
result file with real numbers is moved into results/<machine>/.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .machine import host_facts, identity, unify_params


class RecordError(RuntimeError):
    pass


def _result_files(d: Path) -> set[Path]:
    return {p for p in d.glob("*.json") if p.name not in ("machine.json", "benchmarks.json")}


def validate_result_file(path: Path) -> dict:
    """A result file must parse, be asv's version 2, and hold at least one real number."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RecordError(f"{path}: not readable JSON ({exc})") from None
    if data.get("version") != 2 or "results" not in data or "commit_hash" not in data:
        raise RecordError(f"{path}: not an asv version-2 result file")
    cols = data.get("result_columns", [])
    if "result" not in cols:
        raise RecordError(f"{path}: no result column")
    ri = cols.index("result")
    real = 0
    for row in data["results"].values():
        vals = row[ri] if len(row) > ri else None
        for v in (vals or []):
            if isinstance(v, (int, float)) and v == v:
                real += 1
    if real == 0:
        raise RecordError(f"{path}: every benchmark failed or was skipped; nothing recorded")
    return data


def _normalize(data: dict, path: Path) -> bool:
    """A commit measured with its own, older suite (a backfill) wrote layout-1 rows: split
    them into today's layout (gemm.record.migrate). True if it did."""
    from .migrate import LEGACY_PREFIX, split_rows
    if not any(n.startswith(LEGACY_PREFIX) for n in data["results"]):
        return False
    data["results"] = split_rows(data)
    path.write_text(json.dumps(data))
    return True


def rev_parse(path, rev: str = "HEAD") -> str | None:
    """The full hash git gives `rev` in the checkout at `path`, or None."""
    try:
        return subprocess.check_output(["git", "rev-parse", "--verify", "--quiet",
                                        f"{rev}^{{commit}}"], cwd=path, text=True,
                                       stderr=subprocess.DEVNULL).strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def _update_suite(src: Path, dst: Path, replace: bool) -> None:
    """benchmarks.json: the measured suite replaces it when the code recorded is today's (its
    own history, or the commit checked out where the command runs); a backfill (an older
    commit's code from a worktree) only adds what is missing, so an older suite never
    replaces today's definitions."""
    if not src.exists():
        return
    import fcntl
    # lanes of one host (ci/backfill.sh under ci/device-lanes.sh) record into one results/:
    # the read-merge-write is under a lock, so no lane's additions are lost to another's
    with open(dst.with_name(dst.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(src.read_text())
        if not replace and dst.exists():
            data = {**data, **json.loads(dst.read_text())}
        tmp = dst.with_name(f"{dst.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, dst)


def record(repo: Path, machine: str, commit: str, extra_args=(), results: Path | None = None) -> Path:
    """asv run for `commit` into a staging copy of results/, then move the result in.

    `repo` is the checkout whose package, kernels and benchmarks are measured (a worktree
    of an older commit when backfilling); `results` where the history lives (default:
    the checkout's own results directory).
    """
    repo = Path(repo).resolve()
    conf = json.loads((repo / "asv.conf.json").read_text())
    own = repo / conf.get("results_dir", "results")
    results = Path(results).resolve() if results else own
    stage_root = repo / ".asv" / "staging"
    if stage_root.exists():
        shutil.rmtree(stage_root)
    stage = stage_root / "results"
    stage.mkdir(parents=True)
    if (results / machine).exists():
        shutil.copytree(results / machine, stage / machine)
    before = {p: p.stat().st_mtime_ns for p in _result_files(stage / machine)} \
        if (stage / machine).exists() else {}
    conf.update(results_dir=str(stage), repo=str(repo),
                benchmark_dir=str(repo / conf.get("benchmark_dir", "benchmarks")),
                html_dir=str(stage_root / "html"), env_dir=str(stage_root / "env"))
    conf_path = stage_root / "asv.conf.json"
    conf_path.write_text(json.dumps(conf, indent=2))
    cmd = ["asv", "run", "--config", str(conf_path), "-E", f"existing:{sys.executable}",
           "--set-commit-hash", commit, "--machine", machine, "--record-samples",
           "--show-stderr", "--durations", "all", *extra_args]
    print("+ " + " ".join(cmd), flush=True)
    # asv drops PYTHONPATH in its benchmark processes but honours ASV_PYTHONPATH: pass the
    # package under test (this checkout) and whatever else is on the path
    env = dict(os.environ)
    paths = [str(repo)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["ASV_PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if not any(a in ("-b", "--bench") for a in extra_args):
        # the whole suite: one sweep of every target in one worker, shared by the classes
        # (gemm.record.suite.sweep); a run of chosen classes sweeps only theirs
        env["GEMM_SHARED_SWEEP"] = str(stage_root / "shared-sweep.json")
    else:
        env.pop("GEMM_SHARED_SWEEP", None)
    rc = subprocess.call(cmd, cwd=repo, env=env)
    new = [p for p in _result_files(stage / machine)
           if p not in before or p.stat().st_mtime_ns != before[p]] if (stage / machine).exists() else []
    if not new:
        raise RecordError(f"asv run (exit {rc}) wrote no result file; history left as it was")
    legacy = False
    facts = host_facts(machine)
    for p in new:
        data = validate_result_file(p)
        legacy |= _normalize(data, p)
        if unify_params(data, facts):   # one asv identity per GPU model (gemm.record.machine)
            p.write_text(json.dumps(data))
    mfile = stage / machine / "machine.json"
    if mfile.is_file():
        m = json.loads(mfile.read_text())
        mfile.write_text(json.dumps({**identity(m), "version": m.get("version", 1)}, indent=4,
                                    sort_keys=True))
    (results / machine).mkdir(parents=True, exist_ok=True)
    _update_suite(stage / "benchmarks.json", results / "benchmarks.json",
                  replace=not legacy and (results == own or commit == rev_parse(Path.cwd())))
    for p in new + [stage / machine / "machine.json"]:
        if p.exists():
            tmp = results / machine / (p.name + ".tmp")
            shutil.copy2(p, tmp)
            os.replace(tmp, results / machine / p.name)
    print(f"recorded {', '.join(p.name for p in new)} (asv exit {rc})", flush=True)
    return results / machine / new[0].name
