"""asv's results (benchmarks.json, <machine>/*.json version 2) read back as Series -> points
over commits, without asv; rows of another benchmark version are left out, as asv does. Runs
are ordered by git's topological order where git knows them, else by date."""
from __future__ import annotations

import itertools
import json
import math
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..core.metrics import parse_asv


class HistoryError(RuntimeError):
    """The results directory is missing or malformed; the message says which file and why."""


@dataclass
class Point:
    value: float | None        # None: the benchmark failed in that run; NaN: skipped


@dataclass
class Run:
    commit: str
    date: int
    started: int
    path: Path
    points: dict = field(default_factory=dict)   # Series -> Point
    other_versions: int = 0                       # rows skipped: another benchmark version


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise HistoryError(f"{path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise HistoryError(f"{path} is not valid JSON ({exc})") from None


def _unrepr(s):
    """asv stores params as repr strings: "'05_2d_blocktiling'" -> 05_2d_blocktiling."""
    if isinstance(s, str) and len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return s


@dataclass
class Suite:
    """What the current suite defines (results/benchmarks.json, rewritten by every asv run)."""
    benchmarks: dict
    series: set = field(default_factory=set)    # every Series it would record


def _suite(benchmarks: dict) -> Suite:
    out = Suite(benchmarks)
    for name, b in benchmarks.items():
        if not isinstance(b, dict):
            continue
        params = [[_unrepr(p) for p in ps] for ps in (b.get("params") or [])]
        for combo in itertools.product(*params):
            key = parse_asv(name, combo)
            if key:
                out.series.add(key)
    return out


def load_runs(results_dir: str | Path, machine: str) -> tuple[list[Run], Suite]:
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise HistoryError(f"no results directory at {results_dir}")
    benchmarks = _load(results_dir / "benchmarks.json")
    mdir = results_dir / machine
    if not mdir.is_dir():
        known = sorted(p.name for p in results_dir.iterdir() if p.is_dir())
        raise HistoryError(f"no results for machine {machine!r} in {results_dir} "
                           f"(machines there: {', '.join(known) or 'none'})")
    if not isinstance(benchmarks, dict):
        raise HistoryError(f"{results_dir / 'benchmarks.json'} is not asv's benchmark list "
                           f"(a JSON object of benchmark names)")
    runs = [read_run(path, benchmarks) for path in sorted(mdir.glob("*.json"))
            if path.name != "machine.json"]
    return _order(runs, results_dir), _suite(benchmarks)


def read_run(path: Path, benchmarks: dict | None = None) -> Run:
    """One asv version-2 result file as a Run (with `benchmarks`, rows of another version are
    counted in other_versions and left out). Raises HistoryError, naming the file."""
    path = Path(path)
    data = _load(path)
    if not isinstance(data, dict):
        raise HistoryError(f"{path} is not an asv version-2 result file (it holds a JSON "
                           f"{_json_type(data)}, not an object)")
    if "results" not in data:
        raise HistoryError(f"{path} is not an asv version-2 result file (it has no 'results')")
    if not isinstance(data["results"], dict):
        raise HistoryError(f"{path} is not an asv version-2 result file (its 'results' is a "
                           f"JSON {_json_type(data.get('results'))}, not an object)")
    try:
        cols = data["result_columns"]
        ri, vi = cols.index("result"), cols.index("version")
        run = Run(commit=data["commit_hash"], date=int(data.get("date") or 0),
                  started=0, path=path)
        for name, row in data["results"].items():
            bench = None if benchmarks is None else benchmarks.get(name)
            if benchmarks is not None and (not isinstance(bench, dict) or len(row) <= vi
                                           or row[vi] != bench.get("version")):
                run.other_versions += 1
                continue  # asv ignores rows of another benchmark version; so do we
            params = [[_unrepr(p) for p in ps] for ps in (row[cols.index("params")] or [])]
            combos = list(itertools.product(*params)) if params else [()]
            vals = row[ri]
            if not isinstance(vals, list):
                vals = [vals]
            started = _col(row, cols, "started_at", 1)[0]
            if started is not None:
                run.started = max(run.started, int(started))
            for i, combo in enumerate(combos):
                key = parse_asv(name, tuple(combo))
                if key is None:
                    continue
                v = vals[i] if i < len(vals) else None
                run.points[key] = Point(None if v is None else float(v))
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
        raise HistoryError(f"{path} is not an asv version-2 result file ({exc!r})") from None
    return run


def _json_type(v) -> str:
    """What JSON calls the type of a parsed value."""
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
            type(None): "null"}.get(type(v), "object")


def gpu_arch(results_dir: str | Path, machine: str) -> str | None:
    """The machine's GPU architecture (sm_XY) as its machine.json records it; None where it
    does not say."""
    try:
        return json.loads((Path(results_dir) / machine / "machine.json").read_text()).get(
            "gpu_arch")
    except (OSError, ValueError, AttributeError):
        return None


def resolve_machine(results_dir: str | Path, machine: str | None) -> str:
    """The machine named, or the only one the results directory holds."""
    if machine:
        return machine
    if not Path(results_dir).is_dir():
        raise HistoryError(f"no results directory {results_dir} (record a run with `gemm "
                           f"record`, or point --results at one)")
    dirs = sorted(p.name for p in Path(results_dir).glob("*") if p.is_dir())
    if not dirs:
        raise HistoryError(f"{results_dir} holds no machine's results yet (`gemm record`)")
    if len(dirs) != 1:
        raise HistoryError(f"name a --machine: {results_dir} holds {', '.join(dirs)}")
    return dirs[0]


def _col(row, cols, name, n):
    if name not in cols or len(row) <= cols.index(name) or row[cols.index(name)] is None:
        return [None] * n
    v = row[cols.index(name)]
    v = v if isinstance(v, list) else [v]
    return [(None if x is None else float(x)) for x in v] + [None] * (n - len(v))


def _order(runs: list[Run], results_dir: Path) -> list[Run]:
    topo = {}
    try:
        out = subprocess.run(["git", "rev-list", "--topo-order", "--reverse", "--all"],
                             cwd=results_dir, capture_output=True, text=True, timeout=30)
        if out.returncode == 0:
            topo = {sha: i for i, sha in enumerate(out.stdout.split())}
    except (OSError, subprocess.SubprocessError):
        pass
    if runs and all(r.commit in topo for r in runs):
        return sorted(runs, key=lambda r: (topo[r.commit], r.started))
    return sorted(runs, key=lambda r: (r.date, r.started))


def finite(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))
