"""The layout-1 -> 2 history migration (gemm.record.migrate): every value, quartile and sample
lands in the same (kernel, size, metric) series; the two commits measured under older policies
get their own versions; it is idempotent; and the committed history is already migrated."""
import json
from pathlib import Path

from gemm.core import metrics
from gemm.core.policy import SUITE
from gemm.record import migrate
from gemm.store.history import load_runs
from tests.asvfake import write_benchmarks, write_legacy_run

ROOT = Path(__file__).resolve().parent.parent
K = ["04_1d", "05_2d"]
S = ["1024", "4096"]


def legacy_history(tmp_path, commits):
    res = tmp_path / "results"
    for i, c in enumerate(commits):
        write_legacy_run(res, c, i, {(k, s): 10.0 * (i + 1) + j for j, (k, s) in
                                     enumerate((k, s) for k in K for s in S)}, K, S)
    return res


def test_rows_are_split_per_kernel_with_values_intact(tmp_path):
    commits = ["ab" * 20, "cd" * 20]
    res = legacy_history(tmp_path, commits)
    before = {c: json.loads(next((res / "h200").glob(f"{c[:8]}*")).read_text()) for c in commits}
    write_benchmarks(res, K, S, version=metrics.version(metrics.TFLOPS, SUITE))
    bench = json.loads((res / "benchmarks.json").read_text())
    for key in ("pct_of_cublas", "seconds", "time_ratio"):   # each metric its own version
        for k in K:
            bench[f"bench_gemm.Kernel_{k}.track_{key}"]["version"] = \
                metrics.version(metrics.get(key), SUITE)
    changed = migrate.migrate(res, bench)
    assert len(changed) == 2
    runs, suite = load_runs(res, "h200")
    for run in runs:
        old = before[run.commit]["results"]["bench_gemm.Kernels.track_tflops"]
        new = json.loads(run.path.read_text())["results"]
        for j, (k, s) in enumerate((k, s) for k in K for s in S):
            assert run.points[metrics.Series(k, s, "tflops")].value == old[0][j]
            row = next(r for n, r in new.items() if n.endswith(f"_{k}.track_tflops"))
            assert [row[c][S.index(s)] for c in (0, 7, 8)] == [old[c][j] for c in (0, 7, 8)]
    data = json.loads(next((res / "h200").glob("cdcdcdcd*")).read_text())
    row = data["results"]["bench_gemm.Kernel_05_2d.track_seconds"]
    assert row[1] == [["'1024'", "'4096'"]] and row[11] == [[v, v] for v in row[0]]
    assert data["results"]["bench_gemm.Cublas.track_tflops"][2] == "gemm-suite-1"  # kept apart
    assert migrate.migrate(res, bench) == []          # idempotent


def test_commits_measured_under_older_policies_get_other_versions():
    v_now = metrics.version(metrics.TFLOPS, SUITE)
    assert metrics.version(metrics.TFLOPS, migrate.policy_of("f57c05c6aa")) != v_now
    assert metrics.version(metrics.TFLOPS, migrate.policy_of("1a14426aff")) != v_now
    assert migrate.policy_of("99a9bd61aa") == SUITE


def test_the_committed_history_is_in_todays_layout():
    bench = json.loads((ROOT / "results" / "benchmarks.json").read_text())
    assert not any(n.startswith(migrate.LEGACY_PREFIX) for n in bench)
    for path in (ROOT / "results").glob("*/*-*.json"):
        names = json.loads(path.read_text())["results"]
        assert not any(n.startswith(migrate.LEGACY_PREFIX) for n in names), path
    # 05 at 4096 as recorded at da12bba (README): 29.44 TFLOPS, 57 % of cuBLAS
    data = json.loads(next((ROOT / "results" / "h200").glob("da12bbac-*.json")).read_text())
    cols = data["result_columns"]
    row = data["results"][metrics.asv_name(metrics.kernel_class("05_2d_blocktiling"),
                                           metrics.TFLOPS)]
    sizes = row[cols.index("params")][0]
    assert round(row[cols.index("result")][sizes.index("'4096'")], 2) == 29.44
    # measured under the stop rule before b570c37's: another benchmark version, not compared
    runs, _ = load_runs(ROOT / "results", "h200")
    da12 = next(r for r in runs if r.commit.startswith("da12bba"))
    assert da12.other_versions > 0 and not da12.points
