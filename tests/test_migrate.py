"""The layout-1 -> 2 history migration (gemm.record.migrate): every value, quartile and sample
lands in the same (kernel, size, metric) series; the two commits measured under older policies
get their own versions; it is idempotent; and the committed history is already migrated."""
import json
from pathlib import Path

from gemm.core import metrics
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
    write_benchmarks(res, K, S, version=metrics.version(metrics.TFLOPS, migrate.CLOCK_FLOOR_SUITE))
    bench = json.loads((res / "benchmarks.json").read_text())
    for key in ("pct_of_cublas", "seconds", "time_ratio"):   # each metric its own version
        for k in K:
            bench[f"bench_gemm.Kernel_{k}.track_{key}"]["version"] = \
                metrics.version(metrics.get(key), migrate.CLOCK_FLOOR_SUITE)
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
    v_now = metrics.version(metrics.TFLOPS, migrate.CLOCK_FLOOR_SUITE)
    assert metrics.version(metrics.TFLOPS, migrate.policy_of("f57c05c6aa")) != v_now
    assert metrics.version(metrics.TFLOPS, migrate.policy_of("1a14426aff")) != v_now
    assert migrate.policy_of("99a9bd61aa") == migrate.CLOCK_FLOOR_SUITE


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


def _old_version(kernel, key):
    from gemm.core import ltchoice, registry
    call = ltchoice.fingerprint(registry.get(kernel).baseline)
    return metrics.version(metrics.get(key), migrate.CLOCK_FLOOR_SUITE, baseline_call=call)


def test_the_floor_migration_keeps_the_history_only_where_the_clock_floor_dropped_nothing(
        tmp_path):
    """The floor rule changed SUITE and CONFIRM (2026-12-02): the kernels whose records the
    clock floor never dropped a sample of keep their history under the new versions, values
    untouched; 13-15 and the Cublas class restart; the calibration takes the new CONFIRM
    fingerprint less 13-15's rows; a second run changes nothing."""
    from dataclasses import replace

    from gemm.core.policy import CONFIRM
    from gemm.record.suite import kernel_class
    from gemm.store import calibration
    from tests.asvfake import write_run
    res, cal = tmp_path / "results", tmp_path / "calibration"
    kernels, sizes = ["05_2d_blocktiling", "14_bf16_wgmma_tma"], ["2048", "4096"]
    write_run(res, "ab" * 20, 1, {(k, s): 10.0 + i for i, (k, s) in
                                  enumerate((k, s) for k in kernels for s in sizes)},
              kernels, sizes)
    path = next((res / "h200").glob("abababab*"))
    data = json.loads(path.read_text())
    for n, row in data["results"].items():
        k, key = n.split(".")[1][len("Kernel_"):], n.split(".track_")[1]
        row[2] = _old_version(k, key)
    cublas_old = metrics.version(metrics.TFLOPS, migrate.CLOCK_FLOOR_SUITE, baseline=True)
    data["results"]["bench_gemm.Cublas.track_tflops"] = [[50.0], [["'cublas_fp32'"], ["'2048'"]],
                                                         cublas_old]
    path.write_text(json.dumps(data))
    cal.mkdir()
    rows = [{"kernel": k, "size": "4096", "metric": "tflops", "sigma": 0.001, "dof": 5,
             "values": [1.0] * 6} for k in kernels]
    old_fp = calibration.policy_fingerprint(replace(CONFIRM, floor="clock"))
    (cal / "h200.json").write_text(json.dumps({"machine": "h200", "date": "2026-11-30T00:00:00Z",
                                               "policy": old_fp, "noise": rows}))
    (cal / "other.json").write_text(json.dumps({"machine": "other", "policy": "tflops-x",
                                                "noise": rows}))
    changed = migrate.floor(res, cal)
    assert sorted(Path(p).name for p in changed) == sorted([path.name, "h200.json"])
    new = json.loads(path.read_text())["results"]
    now = {m.key: getattr(kernel_class("bench_gemm", k), f"track_{m.key}").version
           for k in kernels[:1] for m in metrics.KERNEL_METRICS}
    for key in now:
        row = new[f"bench_gemm.Kernel_05_2d_blocktiling.track_{key}"]
        assert row[2] == now[key] != _old_version(kernels[0], key)
        assert row[0] == data["results"][f"bench_gemm.Kernel_05_2d_blocktiling.track_{key}"][0]
        assert new[f"bench_gemm.Kernel_14_bf16_wgmma_tma.track_{key}"][2] == \
            _old_version(kernels[1], key)
    assert new["bench_gemm.Cublas.track_tflops"][2] == cublas_old     # restarts: not moved
    doc = json.loads((cal / "h200.json").read_text())
    assert doc["policy"] == calibration.policy_fingerprint() != old_fp
    assert [r["kernel"] for r in doc["noise"]] == ["05_2d_blocktiling"]
    assert doc["date"] == "2026-11-30T00:00:00Z" and "floor rule" in doc["migrated"]
    assert calibration.read(cal, "h200")[0] is not None
    assert json.loads((cal / "other.json").read_text())["noise"] == rows
    assert migrate.floor(res, cal) == []              # idempotent


def test_the_committed_history_and_calibration_are_floor_migrated():
    """Every recorded run's rows of a kernel the floor left alone are of today's versions,
    13-15's of the clock floor's; the committed calibration is of today's CONFIRM."""
    from gemm.store import calibration
    moves = migrate.floor_versions()
    for path in (ROOT / "results" / "h200").glob("*-*.json"):
        data = json.loads(path.read_text())
        vi = data["result_columns"].index("version")
        for n, row in data["results"].items():
            assert n not in moves or row[vi] != moves[n][0], (path.name, n)
    doc = json.loads((ROOT / "calibration" / "h200.json").read_text())
    assert doc["policy"] == calibration.policy_fingerprint()
    restarted = [r for r in doc["noise"] if r["kernel"] in migrate.FLOOR_RESTARTS]
    assert restarted                                  # 13-15 calibrated again since
    since = [s for s in doc["sources"] if s["date"] >= "2026-12-02"]
    assert all(len(r["values"]) <= sum(s["processes"] for s in since) for r in restarted)
    for r in restarted:                               # each from a source of the new rule
        srcs = [r.get("source")] if r.get("source") else [p.get("source") or p for p in
                                                           r.get("parts") or []]
        assert srcs and all(s["date"] >= "2026-12-02" for s in srcs), r["kernel"]
