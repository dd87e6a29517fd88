"""The regression gate on synthetic histories: steps, noise, outliers, gaps, nulls, one point,
versions, malformed files, missing series, empty and narrowed runs."""
import json
import random

import pytest

from gemm.cli import main as cli_main
from gemm.core.problem import Problem
from gemm.track import gate as rule
from gemm.store.history import HistoryError, load_runs
from tests.asvfake import write_benchmarks, write_run

K = ["05_2d", "04_1d"]
S = ["4096", "512"]


def sha(i):
    return f"{i:02d}" + "ab" * 19


def history(tmp_path, series, kernels=K, sizes=S, noise=0.001, versions=None):
    """series: list of {(kernel, size): tflops} per commit, oldest first."""
    res = tmp_path / "results"
    write_benchmarks(res, kernels, sizes)
    for i, vals in enumerate(series):
        write_run(res, sha(i), 1_000_000 + i, vals, kernels, sizes, noise=noise,
                  version=(versions or {}).get(i, "v1"))
    return res


def gate(res, *extra):
    """The gate on this synthetic history only: no calibration, no anchor of the real repo."""
    return cli_main(["regress", "--results", str(res), "--machine", "h200", "--no-confirm",
                     "--calibration", str(res.parent / "calibration"), "--no-anchor", *extra])


def flat(v, k=K, s=S):
    return {(a, b): v for a in k for b in s}


def test_no_history_is_new_and_passes(tmp_path, capsys):
    res = history(tmp_path, [flat(30.0)])
    assert gate(res, "--all") == 0
    assert "new" in capsys.readouterr().out


def test_one_point_history(tmp_path):
    assert gate(history(tmp_path, [flat(30.0), flat(29.9)])) == 0
    assert gate(history(tmp_path, [flat(30.0), flat(28.5)])) == 1  # -5 %


def test_a_three_percent_step_is_caught_and_named(tmp_path, capsys):
    rng = random.Random(1)
    runs = [flat(30.0 * (1 + rng.gauss(0, 0.002))) for _ in range(8)]
    new = flat(30.0)
    new[("05_2d", "4096")] = 29.1  # -3 %
    assert gate(history(tmp_path, runs + [new])) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 05_2d at 4096: TFLOPS DROP" in out
    assert "REGRESSION: 05_2d at 4096: % of cuBLAS DROP" in out
    assert "04_1d" not in out.split("REGRESSION", 1)[1]


def test_noise_within_bounds_passes(tmp_path):
    rng = random.Random(2)
    runs = [flat(30.0 * (1 + rng.gauss(0, 0.004))) for _ in range(12)]
    assert gate(history(tmp_path, runs)) == 0


def test_a_history_that_wanders_does_not_hide_a_small_drop(tmp_path, capsys):
    # the history wanders 3 % (other GPUs); a 1 % drop at 4096 is still a candidate for the A/B
    rng = random.Random(3)
    runs = [flat(10.0 * (1 + rng.gauss(0, 0.03))) for _ in range(10)]
    centre = sorted(r[("05_2d", "4096")] for r in runs)
    new = {k: (centre[4] + centre[5]) / 2 for k in flat(0)}
    new[("05_2d", "4096")] *= 0.99
    assert gate(history(tmp_path, runs + [new])) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 05_2d at 4096: TFLOPS DROP" in out and "unconfirmed" in out
    assert "04_1d" not in out.split("REGRESSION", 1)[1]


def test_the_screen_is_per_size_class(tmp_path, capsys):
    runs = [flat(30.0)] * 4
    new = flat(30.0)
    new[("05_2d", "4096")] = 29.8   # -0.67 %: over the large screen (0.5 %)
    new[("05_2d", "512")] = 29.5    # -1.7 %: under the small one (3 %)
    assert gate(history(tmp_path, runs + [new], noise=0.0)) == 1
    out = capsys.readouterr().out.split("REGRESSION", 1)[1]
    assert "05_2d at 4096" in out and "05_2d at 512" not in out
    # the screen is half the minimum effect
    assert gate(history(tmp_path, runs + [new], noise=0.0), "--min-effect", "large=0.02") == 0
    assert gate(history(tmp_path, runs + [new], noise=0.0), "--min-effect", "small=0.02") == 1
    capsys.readouterr()
    assert gate(history(tmp_path, runs + [new], noise=0.0), "--min-effect", "huge=0.01") == 2
    assert "unknown size class 'huge'" in capsys.readouterr().err


def test_an_outlier_in_history_does_not_hide_a_drop(tmp_path):
    runs = [flat(30.0) for _ in range(6)]
    runs[2] = flat(90.0)  # one wild point
    assert gate(history(tmp_path, runs + [flat(28.0)])) == 1


def test_improvements_are_reported_and_pass(tmp_path, capsys):
    assert gate(history(tmp_path, [flat(30.0)] * 4 + [flat(33.0)])) == 0
    assert "improved" in capsys.readouterr().out


def test_failed_result_fails_the_gate(tmp_path, capsys):
    new = flat(30.0)
    new[("04_1d", "512")] = None
    assert gate(history(tmp_path, [flat(30.0)] * 3 + [new])) == 1
    assert "04_1d at 512: TFLOPS FAILED" in capsys.readouterr().out


def test_nulls_and_gaps_in_history_are_skipped(tmp_path):
    runs = [flat(30.0) for _ in range(5)]
    runs[1][("05_2d", "4096")] = None      # failed once
    runs[3] = {("05_2d", "512"): 30.0}     # a run that measured little
    assert gate(history(tmp_path, runs + [flat(30.0)])) == 0


def test_new_kernel_and_size_join_without_history(tmp_path, capsys):
    res = tmp_path / "results"
    write_benchmarks(res, K + ["06_new"], S + ["1000"])
    for i in range(3):
        write_run(res, sha(i), i, flat(30.0), K, S)
    write_run(res, sha(3), 3, flat(30.0, K + ["06_new"], S + ["1000"]), K + ["06_new"], S + ["1000"])
    assert gate(res, "--all") == 0
    out = capsys.readouterr().out
    assert "06_new" in out and "new" in out


def test_rows_of_another_benchmark_version_are_ignored(tmp_path):
    # the old version ran at 60 TFLOPS; only same-version rows (30) count
    res = history(tmp_path, [flat(60.0), flat(60.0), flat(30.0), flat(30.0)],
                  versions={0: "v0", 1: "v0"})
    assert gate(res) == 0
    runs, _ = load_runs(res, "h200")
    assert all(not r.points for r in runs[:2])


def test_judging_a_named_commit(tmp_path):
    res = history(tmp_path, [flat(30.0), flat(30.0), flat(20.0), flat(30.0)])
    assert gate(res, "--commit", sha(2)[:8]) == 1
    assert gate(res, "--commit", sha(3)[:8]) == 0


def test_malformed_and_missing_results(tmp_path, capsys):
    res = history(tmp_path, [flat(30.0)])
    bad = res / "h200" / "deadbeef-existing-py.json"
    bad.write_text("{not json")
    assert gate(res) == 2
    assert "not valid JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"version": 2}))
    assert gate(res) == 2
    assert "not an asv version-2 result file" in capsys.readouterr().err
    assert gate(tmp_path / "nothing") == 2
    assert cli_main(["regress", "--results", str(res), "--machine", "a100", "--no-confirm"]) == 2
    assert "no results for machine 'a100'" in capsys.readouterr().err
    with pytest.raises(HistoryError):
        load_runs(res, "h200")


def test_bad_gate_settings(tmp_path):
    res = history(tmp_path, [flat(30.0)])
    assert gate(res, "--min-effect", "large=1.5") == 2
    assert gate(res, "--min-effect", "large=x") == 2
    assert gate(res, "--window", "0") == 2
    assert gate(res, "--alpha", "0") == 2
    assert gate(res, "--min-rounds", "3", "--max-rounds", "2") == 2


def test_without_a_gpu_a_flagged_drop_fails_unconfirmed(tmp_path, monkeypatch, capsys):
    import gemm.track.confirm
    monkeypatch.setattr(gemm.track.confirm, "gpu_present", lambda: (False, "no GPU here"))
    res = history(tmp_path, [flat(30.0)] * 3 + [flat(27.0)])
    assert cli_main(["regress", "--results", str(res), "--machine", "h200", "--no-anchor",
                     "--calibration", str(tmp_path / "calibration"), "--verdicts", str(tmp_path / "v")]) == 1
    assert "unconfirmed: no GPU here" in capsys.readouterr().out


def test_judge_directly():
    from gemm.store.history import Point
    cfg = rule.GateConfig()
    s = cfg.effect_for("4096") / 2
    hist = [Point(30.0)] * 5
    assert rule.judge(hist, Point(30.0), s)[0] == "ok"
    assert rule.judge(hist, Point(29.8), s)[0] == "drop?"      # -0.67 %
    assert rule.judge(hist, Point(29.9), s)[0] == "ok"         # -0.33 %
    assert rule.judge(hist, Point(30.3), s)[0] == "improved"
    assert rule.judge(hist, Point(None), s)[0] == "FAILED"
    assert rule.judge([], Point(30.0), s)[0] == "new"
    assert [Problem.parse(x).size_class for x in ("512", "1000", "1024", "2048",
                                                   "4096x4096x1024", "3001x2999x3003")] == \
        ["small", "medium", "medium", "large", "large", "large"]


def test_a_series_the_run_lacks_is_missing_and_fails(tmp_path, capsys):
    runs = [flat(30.0)] * 3 + [{k: v for k, v in flat(30.0).items() if k[0] != "04_1d"}]
    res = history(tmp_path, runs)
    assert gate(res, "--all") == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 04_1d at 4096: TFLOPS MISSING" in out and "4 MISSING" in out


def test_a_run_narrowed_on_purpose_is_judged_on_what_it_names(tmp_path, capsys):
    runs = [flat(30.0)] * 3 + [{k: v for k, v in flat(30.0).items() if k[0] == "05_2d"}]
    res = history(tmp_path, runs)
    assert gate(res, "--kernels", "05_2d") == 0
    out = capsys.readouterr().out
    assert "narrowed on purpose to kernels 05_2d" in out and "MISSING" not in out
    runs[-1] = {**runs[-1], ("05_2d", "4096"): 27.0}
    assert gate(history(tmp_path, runs), "--kernels", "05_2d", "--sizes", "4096") == 1


def test_a_retired_kernel_is_not_missing(tmp_path, capsys):
    """A kernel removed from the suite (benchmarks.json no longer lists it) is not MISSING."""
    res = tmp_path / "results"
    for i in range(3):
        write_run(res, sha(i), i, flat(30.0), K, S)
    write_run(res, sha(3), 3, flat(30.0, ["05_2d"]), K, S)
    write_benchmarks(res, ["05_2d"], S)
    assert gate(res) == 0


def test_an_empty_run_fails(tmp_path, capsys):
    res = history(tmp_path, [flat(30.0)] * 3 + [{}])
    assert gate(res) == 1
    assert "EMPTY" in capsys.readouterr().out
    assert gate(history(tmp_path, [flat(30.0)] * 3 + [flat(30.0, ["04_1d"])]),
                "--kernels", "05_2d") == 1


def test_the_json_report_is_the_ci_contract(tmp_path):
    runs = [flat(30.0)] * 3 + [{**flat(30.0), ("05_2d", "4096"): 27.0}]
    assert gate(history(tmp_path, runs), "--json", str(tmp_path / "r.json")) == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema"] == "gemm.regress/1" and doc["exit"] == 1
    assert doc["counts"]["DROP"] == 2
    assert {(r["kernel"], r["size"], r["metric"]) for r in doc["rows"] if r["verdict"] == "DROP"} \
        == {("05_2d", "4096", "tflops"), ("05_2d", "4096", "pct_of_cublas")}


def test_a_series_recorded_as_skipped_is_missing_too(tmp_path, capsys):
    """asv records NaN for what `-b` left out: with history behind it, that is MISSING."""
    new = {**flat(30.0), ("05_2d", "4096"): float("nan")}
    assert gate(history(tmp_path, [flat(30.0)] * 3 + [new])) == 1
    assert "05_2d at 4096: TFLOPS MISSING" in capsys.readouterr().out
    assert gate(history(tmp_path, [flat(30.0)] * 3 + [new]), "--sizes", "512") == 0


def test_kernels_are_named_by_prefix_when_narrowing(tmp_path, capsys):
    runs = [flat(30.0)] * 3 + [{k: v for k, v in flat(30.0).items() if k[0] == "05_2d"}]
    assert gate(history(tmp_path, runs), "--kernels", "05") == 0
    assert "narrowed on purpose to kernels 05_2d" in capsys.readouterr().out


def test_the_gates_workflow_is_a_function_that_returns_a_report(tmp_path, capsys):
    """gemm.track.judge: a Request in, a Report out, nothing printed; the command's --json is
    the report's document."""
    from gemm.track.judge import SCHEMA, BadRequest, Request, judge
    new = flat(30.0)
    new[("05_2d", "4096")] = 29.1     # -3 %
    res = history(tmp_path, [flat(30.0)] * 4 + [new])
    req = Request(str(res), "h200", config=rule.GateConfig(confirm=False), use_anchor=False,
                  calibration=str(tmp_path / "calibration"), verdicts=str(tmp_path / "v"))
    seen = []
    rep = judge(req, log=seen.append, on_screened=seen.append)
    assert capsys.readouterr() == ("", "")
    assert len(seen) == 1 and seen[0].rows is rep.rows and seen[0].counts == {}   # before the A/B
    assert (rep.commit, rep.machine, rep.exit, rep.empty) == (sha(4), "h200", 1, None)
    assert rep.counts == {"DROP": 2, "ok": 6} and rep.anchor is None
    assert [(r.kernel, r.size, r.unconfirmed) for r in rep.failing] == [("05_2d", "4096", True)] * 2
    assert rep.calibration is None and "no calibration at" in rep.calibration_note
    doc = rep.to_json()
    assert doc["schema"] == SCHEMA == "gemm.regress/1" and doc["exit"] == 1
    assert gate(res, "--json", str(tmp_path / "r.json")) == 1
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(json.dumps(doc))
    # a narrowed run that measured nothing: EMPTY, said in the report
    empty = judge(Request(str(res), "h200", sizes=("8192",), config=rule.GateConfig(confirm=False),
                          use_anchor=False, calibration=str(tmp_path / "calibration")))
    assert empty.exit == 1 and "measured nothing in sizes 8192" in empty.empty
    assert empty.to_json()["empty"] is True and empty.to_json()["rows"] == []
    # bad input: BadRequest, one sentence
    for bad in (Request(str(tmp_path / "nowhere"), "h200"),
                Request(str(res), "h200", kernels=("nope",)),
                Request(str(res), "h200", config=rule.GateConfig(window=0))):
        with pytest.raises(BadRequest):
            judge(bad)


def test_a_kernel_whose_code_changed_goes_to_the_ab_past_the_screen_or_not(tmp_path):
    """21c7ce0 changed 12's registry entry, not 05's: at the same recorded speed, 12's large
    series are candidates against the commit before (their kernel's build changed), 05's and
    12's small one are not; without a GPU they stay UNRESOLVED, not unconfirmed DROPs."""
    import subprocess
    from gemm.track import codeid
    from gemm.track.judge import Request, judge
    old, new = (subprocess.run(["git", "rev-parse", rev], capture_output=True, text=True,
                               check=True).stdout.strip() for rev in ("21c7ce0~1", "21c7ce0"))
    assert codeid.kernel_changed(".", old, new, "12_tf32_mma_sync")
    assert not codeid.kernel_changed(".", old, new, "05_2d_blocktiling")
    ks, sizes = ["05_2d_blocktiling", "12_tf32_mma_sync"], ["4096", "512"]
    res = tmp_path / "results"
    write_benchmarks(res, ks, sizes)
    for i, c in enumerate((old, new)):
        write_run(res, c, 1_000_000 + i, flat(30.0, ks, sizes), ks, sizes)
    rep = judge(Request(str(res), "h200", config=rule.GateConfig(confirm=False),
                        use_anchor=False, calibration=str(tmp_path / "cal"),
                        verdicts=str(tmp_path / "v")))
    rows = {(r.kernel, r.size): r for r in rep.rows}
    changed = [r for r in rep.rows if r.code_changed]
    assert rep.code_changed == 2 and {(r.kernel, r.size) for r in changed} == {
        ("12_tf32_mma_sync", "4096")}
    assert all(r.verdict == rule.Verdict.UNRESOLVED and rule.candidates_against(r) == [old]
               and "code or build changed" in r.note for r in changed)
    assert rows[("05_2d_blocktiling", "4096")].verdict == rule.Verdict.OK
    assert rows[("12_tf32_mma_sync", "512")].verdict == rule.Verdict.OK
    assert rep.exit == 0


def test_a_flood_of_unresolved_series_is_counted_per_kernel(monkeypatch, capsys):
    """Past FLOOD failing UNRESOLVED series, gemm regress counts them per kernel in one
    REGRESSION line pointing at docs/ci.md (each is in the table), instead of a line each;
    a DROP keeps its own line; a few UNRESOLVED are still named one by one."""
    from gemm.cli import regress
    from gemm.track.judge import Report

    def row(kernel, verdict, carried=("c" * 40, "d" * 40)):
        return rule.Row(kernel, "4096", "tflops", 5, 30.0, 29.9, -0.003, 0.005,
                        rule.Verdict(verdict), note="unresolved: vs c: not measured",
                        reference="c" * 40, min_effect=0.01, carried=list(carried))

    def report(rows):
        return Report("a" * 40, "h200", rule.GateConfig(), rule.Narrowing(), None, "", None,
                      "", rows=rows, counts={}, exit=1)
    flood = [row(f"k{i % 3}", "UNRESOLVED") for i in range(15)] + [row("k9", "DROP", ())]
    monkeypatch.setattr(regress, "judge", lambda *a, **k: report(flood))
    assert cli_main(["regress"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: k9 at 4096: TFLOPS DROP" in out
    assert out.count("REGRESSION:") == 2
    assert ("REGRESSION: 15 series UNRESOLVED at 3 or more commits running (k0 5, k1 5, k2 5; "
            "each in the table above, and why under UNRESOLVED)") in out and "docs/ci.md" in out
    assert "first): k0 5, k1 5, k2 5 (each in the table above)" in out
    monkeypatch.setattr(regress, "judge", lambda *a, **k: report(flood[:2]))
    assert cli_main(["regress"]) == 1
    out = capsys.readouterr().out
    assert out.count("REGRESSION: k") == 2 and "k0 at 4096 (TFLOPS, 3 commits running)" in out
