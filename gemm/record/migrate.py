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

The floor rule (run 2026-12-02, `python -m gemm.record.migrate floor`): until then a sample taken
under 75 % of the maximum SM clock was dropped; since, only one taken under a thermal or
hardware slowdown (gemm.core.policy). On the H200 the old rule dropped samples of 13, 14 and 15
and of the cuBLAS TF32 and BF16 calls timed beside them or alone, in each of the seven recorded
sweeps that kept their counts (2026-12-01), and never a sample of another kernel's record
(docs/probes/h200-floor-drops.txt). The other kernels' rows are taken to have measured the same
samples under either rule (inferred for the 18 earlier runs, which kept no counts: see
docs/measurement.md) and take the new versions; FLOOR_RESTARTS and the `Cublas` class (one
row for every configuration) restart. calibration/<machine>.json takes the new CONFIRM
fingerprint less those kernels' rows.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from ..core import ltchoice, metrics, registry
from ..core.policy import CONFIRM, SUITE, Policy

LEGACY_PREFIX = f"{metrics.SUITE_MODULE}.Kernels.track_"
PER_PARAM = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75",
             "stats_number", "stats_repeat", "samples", "profile")
# the suite's policy until the floor rule changed (2026-12-02)
CLOCK_FLOOR_SUITE = replace(SUITE, floor="clock")
# layout-1 commits measured under other policies than that one (by their own code)
HISTORIC_POLICIES = {
    "f57c05c": Policy(max_time_s=4.0, max_samples=400, batching="direct", timing_seed=0,
                      floor="clock"),
    "1a14426": Policy(batching="direct", floor="clock"),
}
# the kernels whose records the clock floor dropped samples of (docs/probes/h200-floor-drops.txt)
FLOOR_RESTARTS = frozenset({"13_tf32_wgmma_tma", "14_bf16_wgmma_tma", "15_bf16_pingpong"})


def policy_of(commit: str) -> Policy:
    return next((p for c, p in HISTORIC_POLICIES.items() if commit.startswith(c)),
                CLOCK_FLOOR_SUITE)


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
    asv = path.name == "benchmarks.json"      # as asv writes it
    tmp.write_text(json.dumps(data, indent=1 if asv else None, sort_keys=asv))
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


def floor_versions() -> dict[str, str]:
    """Old version -> new, per kernel row the floor rule leaves as it was measured."""
    out = {}
    for spec in registry.registry().values():
        if spec.name in FLOOR_RESTARTS:
            continue
        call = ltchoice.fingerprint(spec.baseline)
        for m in metrics.KERNEL_METRICS:
            name = metrics.asv_name(metrics.kernel_class(spec.name), m)
            out[name] = (metrics.version(m, CLOCK_FLOOR_SUITE, baseline_call=call),
                         metrics.version(m, SUITE, baseline_call=call))
    return out


def floor(results: Path, calibration: Path, benchmarks: dict | None = None) -> list[str]:
    """Re-version the rows the floor rule did not change, and the calibration (idempotent);
    results/benchmarks.json becomes `benchmarks` (the current suite's) where given. Returns
    the files changed."""
    moves, changed = floor_versions(), []
    if benchmarks is not None:
        bench = Path(results) / "benchmarks.json"
        if not bench.is_file() or json.loads(bench.read_text()) != benchmarks:
            _write(bench, benchmarks)
            changed.append(str(bench))
    for path in sorted(Path(results).glob("*/*.json")):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        vi, n = data["result_columns"].index("version"), 0
        for name, row in data["results"].items():
            old, new = moves.get(name, (None, None))
            if old is not None and row[vi] == old:
                row[vi], n = new, n + 1
        if n:
            _write(path, data)
            changed.append(str(path))
    from ..store.calibration import policy_fingerprint, save
    old_fp = policy_fingerprint(replace(CONFIRM, floor="clock"))
    for path in sorted(Path(calibration).glob("*.json")):
        doc = json.loads(path.read_text())
        if doc.get("policy") != old_fp:
            continue
        for key in ("noise", "detection", "summary"):
            doc[key] = [r for r in doc.get(key) or [] if r.get("kernel") not in FLOOR_RESTARTS]
        doc["policy"] = policy_fingerprint(CONFIRM)
        doc["migrated"] = (f"floor rule, 2026-12-02: made under {old_fp} (the clock floor); the "
                           f"rows of {', '.join(sorted(FLOOR_RESTARTS))} left out "
                           "(gemm.record.migrate)")
        changed.append(str(save(path.parent, path.stem, doc)))
    return changed


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["floor"]:
        for p in floor(Path(argv[1] if len(argv) > 1 else "results"),
                       Path(argv[2] if len(argv) > 2 else "calibration"),
                       discovered_benchmarks(Path(argv[3] if len(argv) > 3 else "benchmarks"))):
            print(f"migrated {p}")
        return 0
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
