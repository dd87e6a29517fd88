"""History migration, layout 1 -> 2 (run once, 2026-11-30; kept for the record and its test).

Layout 1 recorded every kernel in one asv class, `bench_gemm.Kernels.track_<metric>` with params
[kernel, size], all versioned by a hand-kept string, "gemm-suite-1". Layout 2 has one class per
kernel, `bench_gemm.Kernel_<name>.track_<metric>` with params [size], so `asv run -b <kernel>`
measures one kernel, and versions that fingerprint the measuring policy (gemm.core.metrics).

Each layout-1 kernel row is split into one row per kernel, values, quartiles and samples
unchanged. Its version becomes the fingerprint of the policy that commit actually measured with:
the suite's current policy for the commits from graph-replayed batches on (the same Policy
fields and timing seed as now), and the older policies for the two commits before them
(HISTORIC_POLICIES), which timed direct launches (a version bump had missed them), so they no
longer count against later commits. Layout-1 `Cublas` rows keep their old version: that baseline was pooled over the
kernels' interleaved samples, and layout 2 measures it alone, a new series by construction.
results/benchmarks.json is rewritten from asv's own discovery of the current suite.

Machine identity (run 2026-12-01, `python -m gemm.record.migrate identity`): the lent H200
hosts differ in num_cpu, os and ram, which asv took for different machines, splitting every
series in two or three graphs. `unify` reduces every result file's params to the GPU model's
identity (gemm.record.machine.IDENTITY), moving the host's facts to "gemm_host" in the same
file; values, samples and versions are untouched, and machine.json holds the identity.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..core import metrics
from ..core.policy import SUITE, Policy

LEGACY_PREFIX = f"{metrics.SUITE_MODULE}.Kernels.track_"
PER_PARAM = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75",
             "stats_number", "stats_repeat", "samples", "profile")
# commits measured under other policies than the suite's current one (by their own code)
HISTORIC_POLICIES = {
    "f57c05c": Policy(max_time_s=4.0, max_samples=400, batching="direct", timing_seed=0),
    "1a14426": Policy(batching="direct"),
}


def policy_of(commit: str) -> Policy:
    return next((p for c, p in HISTORIC_POLICIES.items() if commit.startswith(c)), SUITE)


def _unrepr(s: str) -> str:
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"" else s


def split_rows(data: dict) -> dict:
    """A layout-1 result file's `results` with each Kernels row split per kernel."""
    cols = data["result_columns"]
    policy = policy_of(data["commit_hash"])
    out = {}
    for name, row in data["results"].items():
        if not name.startswith(LEGACY_PREFIX):
            out[name] = row
            continue
        metric = metrics.get(name[len(LEGACY_PREFIX):])
        kernels, sizes = row[cols.index("params")]
        n = len(sizes)
        for ki, k in enumerate(kernels):
            new = list(row)
            new[cols.index("params")] = [list(sizes)]
            new[cols.index("version")] = metrics.version(metric, policy)
            for c in PER_PARAM:
                i = cols.index(c) if c in cols else len(row)
                if i < len(row) and isinstance(row[i], list):
                    new[i] = row[i][ki * n:(ki + 1) * n]
            out[metrics.asv_name(metrics.kernel_class(_unrepr(k)), metric)] = new
    return out


def discovered_benchmarks(benchmark_dir: Path) -> dict:
    """benchmarks.json as asv would write it for the current suite (asv_runner's discovery)."""
    import io

    from asv_runner.discovery import list_benchmarks
    root = str(Path(benchmark_dir).resolve())
    buf = io.StringIO()
    list_benchmarks(root, buf)
    return {"version": 2, **{b["name"]: b for b in json.loads(buf.getvalue())}}


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1 if path.name == "benchmarks.json" else None))
    os.replace(tmp, path)


def migrate(results: Path, benchmarks: dict) -> list[str]:
    """Rewrite every result file under `results` in place (idempotent); returns what changed."""
    changed = []
    for path in sorted(Path(results).glob("*/*.json")):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        if not any(n.startswith(LEGACY_PREFIX) for n in data["results"]):
            continue
        data["results"] = split_rows(data)
        _write(path, data)
        changed.append(str(path))
    _write(Path(results) / "benchmarks.json", benchmarks)
    return changed


def unify(results: Path) -> list[str]:
    """Every result file's params reduced to its machine's identity, machine.json too
    (idempotent); returns the files changed."""
    from .machine import identity, unify_params
    changed = []
    for mdir in sorted(p for p in Path(results).iterdir() if p.is_dir()):
        mfile = mdir / "machine.json"
        if mfile.is_file():
            m = json.loads(mfile.read_text())
            ident = {**identity(m), "version": m.get("version", 1)}
            if ident != m:
                mfile.write_text(json.dumps(ident, indent=4, sort_keys=True))
                changed.append(str(mfile))
        for path in sorted(mdir.glob("*.json")):
            if path.name == "machine.json":
                continue
            data = json.loads(path.read_text())
            if unify_params(data):
                _write(path, data)
                changed.append(str(path))
    return changed


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["identity"]:
        for p in unify(Path(argv[1] if len(argv) > 1 else "results")):
            print(f"unified {p}")
        return 0
    results = Path(argv[0] if argv else "results")
    bench_dir = Path(argv[1] if len(argv) > 1 else "benchmarks")
    for p in migrate(results, discovered_benchmarks(bench_dir)):
        print(f"migrated {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
