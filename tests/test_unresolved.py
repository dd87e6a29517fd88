"""Why series are UNRESOLVED, typed: the A/B names each comparison it left open and why (a row's
`open`, gemm.track.abreport.left_open, by gemm.track.abrun.Stop), the kept verdict file keeps
it, and `gemm summary`, `gemm show` and `gemm regress` tell the UNRESOLVED series by reason, a
line each, with a short note per row (gemm.record.unresolved), never reading the note's words; a
report from before `open` shows its notes as it did.

tests/data/regress_5aca64f.json: 8 rows of the real gate report of the per-commit job at
5aca64f on the H200 (2026-12-01; machine figures and change points left out), which predates
`open`; theirs were filled in from the report's data, not its notes: a commit in `against`
with no effect was never measured, one with an UNRESOLVED effect for its rounds
(values.first); every stop the budget and after 2 rounds (its regress.log: "95 of 101
comparisons not measured: no room in the A/B time budget (94 s)", the A/A control moved once
in round 1); needs as abreport.rounds_needed computes it (a family of 101 comparisons,
calibration/h200.json), which gives the 3 and 7 rounds its notes say.
"""
import copy
import json
import math
from dataclasses import asdict
from pathlib import Path

from gemm.cli import main as cli_main
from gemm.cli import summary
from gemm.record import unresolved
from gemm.store import verdicts
from gemm.track import abreport, abtest, confirm
from gemm.track.abrun import Stop
from gemm.track.gate import GateConfig, Row, Verdict
from tests.test_plan import _cal, _fake, _rows

DATA = Path(__file__).parent / "data" / "regress_5aca64f.json"
A, B = "a" * 40, "b" * 40


# --- the A/B names why -------------------------------------------------------------------------

def _ab(monkeypatch, level, cfg, n=2, noise=0.0005, wrap=None):
    """n flagged rows against c1, on tests.test_plan's fake clock and measurements (`wrap`:
    a change to what the measurements report)."""
    _fake(monkeypatch, level, noise=noise)
    if wrap:
        monkeypatch.setattr(confirm.abtest, "measure", wrap(confirm.abtest.measure))
    rows = _rows(n)
    ab = confirm.ABRun([(r, "c1") for r in rows], cfg, "NEW",
                       abtest.in_trees({"c1": "c1", "NEW": "NEW"}), lambda s: None, _cal(noise))
    return rows, ab


def test_each_comparison_left_open_says_why_typed(monkeypatch):
    """Budget (never measured, and measured), the round cap, the A/A control, a measurement
    without the value, the A/B breaking off and the reference failing: each UNRESOLVED row's
    `open` names its Stop, its rounds and the A/B's, and what its noise needs."""
    flat = lambda tree, k, n: 30.0                                          # noqa: E731
    rows, ab = _ab(monkeypatch, flat, GateConfig(budget_s=145.0, overtime_s=60.0), n=6)
    ab.run()
    abreport.finish(ab)
    assert rows[5].open == [{"against": "c1", "stop": Stop.BUDGET, "rounds": 0, "kept": 0,
                             "after": 2, "needs": None}]
    assert [r.open for r in rows[:5]] == [[]] * 5                           # decided: noise

    half = lambda tree, k, n: 30.0 * (0.995 if tree == "NEW" else 1.0)     # noqa: E731
    rows, ab = _ab(monkeypatch, half, GateConfig(budget_s=1000.0, max_rounds=3), noise=0.004)
    ab.run()
    abreport.finish(ab)
    assert [r.verdict for r in rows] == ["UNRESOLVED"] * 2
    assert rows[0].open == [{"against": "c1", "stop": Stop.CAP, "rounds": 3, "kept": 0,
                             "after": 3, "needs": 19}]
    assert "about 19 rounds" in rows[0].note                  # the same figure, said

    rows, ab = _ab(monkeypatch, half, GateConfig(budget_s=1000.0), noise=0.004)
    monkeypatch.setattr(confirm.ABRun, "moved",
                        lambda self: [(c, "k1 moved") for c in self.undecided()
                                      if c.rounds > c.kept])
    ab.run()
    abreport.finish(ab)
    assert [(o["stop"], o["rounds"], o["after"]) for o in rows[0].open] == [(Stop.UNSTABLE, 1, 2)]

    rows, ab = _ab(monkeypatch, half, GateConfig(budget_s=1000.0), noise=0.004)
    ab.measure_round(1, ab.comps)
    ab.end(Stop.BROKEN, "no A/B: the reference would not build")
    abreport.finish(ab)
    assert [o["stop"] for r in rows for o in r.open] == [Stop.BROKEN] * 2

    def lacking(measure):   # the reference reports nothing for k2, and fails on k1
        def reported(tree, series, **kw):
            got = {k: v for k, v in measure(tree, series, **kw).items()
                   if not (tree == "c1" and k[0] == "k2")}
            return {k: None if tree == "c1" and k[0] == "k1" else v for k, v in got.items()}
        return reported
    rows, ab = _ab(monkeypatch, half, GateConfig(budget_s=1000.0), noise=0.004, wrap=lacking)
    ab.run()
    abreport.finish(ab)
    assert [r.verdict for r in rows] == ["UNRESOLVED"] * 2
    assert [o["stop"] for o in rows[0].open] == [Stop.FAILED]
    assert [o["stop"] for o in rows[1].open] == [Stop.MISSING]
    # a report keeps the values ("budget"), which read back as the same Stop
    doc = json.loads(json.dumps([asdict(r) for r in rows]))
    assert doc[1]["open"][0]["stop"] == "missing"
    assert unresolved.reasons(doc[1])[0]["stop"] is Stop.MISSING


# --- told by reason ----------------------------------------------------------------------------

def _row(kernel, verdict="UNRESOLVED", opened=(), effects=(), note="the whole note", **kw):
    return {"kernel": kernel, "size": "4096", "metric": "tflops", "verdict": verdict,
            "note": note, "change": -0.01, "anchor_change": None, "min_effect": 0.01,
            "open": [dict(o) for o in opened], "effects": [dict(e) for e in effects], **kw}


def _open(stop, rounds=0, kept=0, after=2, needs=None, against=A):
    return {"against": against, "stop": stop, "rounds": rounds, "kept": kept, "after": after,
            "needs": needs}


def _effect(change, lo, hi, against=A):
    return {"against": against, "verdict": "UNRESOLVED", "change": change, "lo": lo, "hi": hi}


REPORT = {"schema": "gemm.regress/1", "commit": "c" * 40, "machine": "h200", "exit": 1,
          "config": {"budget_s": 94.0, "carry_commits": 3, "strict": False},
          "counts": {"UNRESOLVED": 12, "DROP": 1}, "rows": [
              _row("01_unstable", opened=[_open("unstable", 1)]),
              _row("02_broken", opened=[_open("broken", after=1)]),
              _row("03_failed", opened=[_open("failed", 1)]),
              _row("04_missing", opened=[_open("missing")]),
              _row("05_cap", opened=[_open("cap", 8, after=8, needs=11)],
                   effects=[_effect(-0.003, -0.009, 0.004)]),
              _row("06_budget", opened=[_open("budget", 2, needs=3)],
                   effects=[_effect(-0.0004, -0.0074, 0.0067)]),
              _row("07_margin", opened=[_open("budget", 2, needs=2)],
                   effects=[_effect(-0.005, -0.008, -0.002)]),
              _row("08_capwait", opened=[_open("cap", after=8)]),
              _row("09_wait", opened=[_open("budget"), _open("budget", against=B)]),
              _row("10_kept", opened=[_open("budget", 3, kept=3)]),
              _row("11_noref", note="no reference commit to compare with"),
              _row("12_stuck", opened=[_open("budget")], carried=["p1", "p2"],
                   note="unresolved: the whole note of a series that fails"),
              _row("13_drop", verdict="DROP", note="confirmed: A/B vs aaaaaaaaaa here: -3 %")]}

LINES = ["1 the GPU was unstable (the A/A control moved)",
         "1 the A/B broke off (a commit could not be checked out or measured)",
         "1 the reference's code failed when measured here",
         "1 a measurement reported no value for them",
         "1 measured 8 rounds, undecided at the round cap",
         "2 measured 2 rounds, undecided at the 94-s budget",
         "1 not measured: no room in the A/B's 8 rounds (the round cap)",
         "3 not measured: out of the 94-s A/B budget (4 comparisons found no room in its 2 "
         "rounds)",
         "1 with no typed reason (each one's note says why)"]

CELLS = {"01_unstable": "GPU unstable (the A/A control moved)",
         "02_broken": "the A/B broke off",
         "03_failed": "the reference failed",
         "04_missing": "no value measured",
         "05_cap": "8 rounds: -0.30 % [-0.90, +0.40], needs ~11",
         "06_budget": "2 rounds: -0.04 % [-0.74, +0.67], needs ~3",
         "07_margin": "2 rounds: -0.50 % [-0.80, -0.20], on the decision margin",
         "08_capwait": "not measured (round cap)",
         "09_wait": "not measured (budget)",
         "10_kept": "not measured (budget), 3 rounds kept",
         "11_noref": "no reference commit to compare with",                 # its note
         "12_stuck": "unresolved: the whole note of a series that fails",   # fails: whole
         "13_drop": "confirmed: A/B vs aaaaaaaaaa here: -3 %"}


def test_every_reason_is_a_line_and_each_row_a_short_note():
    assert unresolved.lines(REPORT["rows"], REPORT["config"]) == LINES
    assert {r["kernel"]: unresolved.note(r, REPORT["config"]) for r in REPORT["rows"]} == CELLS
    # two commits that differ are each named; the whole note on demand
    two = _row("x", opened=[_open("budget", 2, needs=3), _open("budget", against=B)],
               effects=[_effect(-0.0004, -0.0074, 0.0067)])
    assert unresolved.note(two, {}) == ("vs aaaaaaa: 2 rounds: -0.04 % [-0.74, +0.67], needs "
                                        "~3; vs bbbbbbb: not measured (budget)")
    assert unresolved.note(two, {}, full=True) == "the whole note"
    wide = _row("y", opened=[_open("budget", 1)], effects=[_effect(0.0001, -1.0, math.inf)])
    assert unresolved.note(wide, {}) == "1 round: +0.01 % [< -90, > +900]"


def test_the_summary_groups_the_unresolved_and_keeps_the_whole_notes(tmp_path):
    path = tmp_path / "regress.json"
    path.write_text(json.dumps(REPORT))
    md = summary.render([], str(path))
    why = md.split("### Failing and UNRESOLVED series\n\n")[1].split("\n\n|")[0]
    assert why == "Why UNRESOLVED:\n\n" + "\n".join(f"- 🟡 {line}" for line in LINES)
    table = {line.split(" | ")[1]: line.split(" | ")[-1].rstrip(" |")
             for line in md.splitlines() if line.startswith("| ") and "UNRESOLVED" in line
             or "| **DROP** |" in line}
    assert table == {k: v if k != "12_stuck" else "3 commits running. " + v
                     for k, v in CELLS.items()}
    full = md.split("<summary>The UNRESOLVED series' notes in full</summary>")[1]
    full = full.split("</details>")[0]
    assert full.count("the whole note") == 2      # shared by ten series, said once; and 12's
    assert "- 01_unstable 4096 TFLOPS, 02_broken 4096 TFLOPS, " in full
    assert "no reference commit to compare with" in full


def test_the_real_report_at_5aca64f(tmp_path, capsys):
    """The H200 job at 5aca64f: 60 UNRESOLVED there, of which this keeps six, each note ~400
    characters; now a line per reason and a short note each."""
    doc = json.loads(DATA.read_text())
    lines = ["3 measured 1 round, undecided at the 94-s budget",
             "3 not measured: out of the 94-s A/B budget (5 comparisons found no room in its 2 "
             "rounds)"]
    assert unresolved.lines(doc["rows"], doc["config"]) == lines
    notes = {(r["kernel"], r["size"], r["metric"]): unresolved.note(r, doc["config"])
             for r in doc["rows"] if r["verdict"] == "UNRESOLVED"}
    assert notes == {
        ("02_coalesced", "4096", "pct_of_cublas"): "not measured (budget)",
        ("02_coalesced", "4096", "tflops"): "not measured (budget)",
        ("03_smem_tiling", "4096", "tflops"): "not measured (budget)",
        ("11_tf32_wmma", "4096", "pct_of_cublas"):
            "vs b67fee6: 1 round: -0.04 % [-0.74, +0.67], needs ~3; "
            "vs 7fa00a2: 1 round: -0.08 % [-0.78, +0.62], needs ~3",
        ("11_tf32_wmma", "4096", "tflops"):
            "vs b67fee6: 1 round: -0.19 % [-1.32, +0.96], needs ~7; "
            "vs 7fa00a2: 1 round: -0.27 % [-1.40, +0.88], needs ~7",
        ("11_tf32_wmma", "8192x1024x4096", "pct_of_cublas"):
            "vs b67fee6: 1 round: +0.01 % [< -90, > +900]; "
            "vs 7fa00a2: 1 round: -0.11 % [< -90, > +900]"}
    assert cli_main(["show", str(DATA)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:4] == ["  UNRESOLVED, why (--full: each one's whole note):",
                        *(f"    {line}" for line in lines)]
    assert "  02_coalesced 4096 tflops (min effect 1.0 %): UNRESOLVED not measured (budget)" in out
    assert cli_main(["show", "--full", str(DATA)]) == 0
    out = capsys.readouterr().out
    assert "UNRESOLVED unresolved: vs b67fee6830: not measured: out of the A/B time budget" in out


def test_a_report_from_before_open_shows_its_notes(tmp_path, capsys):
    doc = json.loads(DATA.read_text())
    for r in doc["rows"]:
        r.pop("open", None)
    path = tmp_path / "regress.json"
    path.write_text(json.dumps(doc))
    assert unresolved.lines(doc["rows"], doc["config"]) == []
    md = summary.render([], str(path))
    assert "Why UNRESOLVED" not in md and "notes in full" not in md
    row = next(line for line in md.splitlines() if "| 02_coalesced | 4096 | TFLOPS |" in line)
    assert row.endswith("| unresolved: vs b67fee6830: not measured: out of the A/B time budget "
                        "(94 s); 95 comparisons found no room in its 2 rounds (the most "
                        "suspicious go first); vs 7fa00a2176: not measured: out of the A/B time "
                        "budget (94 s); 95 comparisons found no room in its 2 rounds (the most "
                        "suspicious go first) |")
    assert cli_main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "UNRESOLVED, why" not in out
    assert "02_coalesced 4096 tflops (min effect 1.0 %): UNRESOLVED unresolved: vs b67fee6830" in out
    # the kept verdict file of 5aca64f in this repository predates `open` too
    kept = Path(__file__).parent.parent / "verdicts" / "h200"
    kept = sorted(kept.glob("5aca64f0*.json"))
    assert kept and cli_main(["show", str(kept[0])]) == 0
    assert "UNRESOLVED, why" not in capsys.readouterr().out


def test_the_reasons_go_through_the_kept_verdict_file(tmp_path, capsys):
    """Kept with the verdict (--record-verdicts), read back where no GPU is (the row's kept
    verdict, confirm._use_kept), and shown from the kept file."""
    doc = json.loads(DATA.read_text())
    old = next(r for r in doc["rows"] if r["kernel"] == "11_tf32_wmma" and r["size"] == "4096"
               and r["metric"] == "tflops")
    row = Row(**{**old, "open": [{**o, "stop": Stop(o["stop"])} for o in old["open"]]})
    verdicts.save(tmp_path, "h200", doc["commit"], [asdict(row)],
                  summary={"counts": {"UNRESOLVED": 1}, "anchor": row.anchor, "exit": 0,
                           "rows": [asdict(row)]})
    back = verdicts.load(tmp_path, "h200", doc["commit"])[(row.kernel, row.size, row.metric)]
    assert back["open"] == old["open"] and back["open"][0]["stop"] == "budget"
    again = copy.deepcopy(row)
    again.open, again.verdict, again.note = [], Verdict.CANDIDATE, ""
    confirm._use_kept(again, back, "no GPU here")
    assert again.verdict == Verdict.UNRESOLVED and again.open == old["open"]
    assert unresolved.note(asdict(again), {}) == unresolved.note(old, {}) != ""
    assert cli_main(["show", str(verdicts.path_for(tmp_path, "h200", doc["commit"]))]) == 0
    out = capsys.readouterr().out
    assert "    1 measured 1 round, undecided at the budget" in out   # (no settings kept)
    assert "UNRESOLVED vs b67fee6: 1 round: -0.19 % [-1.32, +0.96], needs ~7;" in out


def test_a_failed_series_says_what_its_record_said(tmp_path):
    """At 7e7a377 the H200 record had no value for 14 at 4096 and 8192 (every sample under the
    clock floor of the time) and the job's summary listed them FAILED with an empty note. The
    gate's row says it has no value and where to look; the summary, which has the record's
    sweep, says why."""
    from gemm.store.history import load_runs
    from gemm.track.gate import NO_VALUE, evaluate
    from tests.asvfake import write_benchmarks, write_run
    k, sizes = "14_bf16_wgmma_tma", ["2048", "4096", "8192"]
    res = tmp_path / "results"
    write_benchmarks(res, [k], sizes)
    write_run(res, "ab" * 20, 1, {(k, s): 600.0 for s in sizes}, [k], sizes)
    write_run(res, "7e7a377" + "0" * 33, 2, {(k, "2048"): 600.0, (k, "4096"): None,
                                            (k, "8192"): None}, [k], sizes)
    runs, suite = load_runs(res, "h200")
    new = next(r for r in runs if r.commit.startswith("7e7a377"))
    rows, _ = evaluate(runs, suite, GateConfig(), commit=new.commit)
    failed = [r for r in rows if r.verdict == Verdict.FAILED]
    assert {(r.kernel, r.size) for r in failed} == {("14_bf16_wgmma_tma", "4096"),
                                                     ("14_bf16_wgmma_tma", "8192")}
    assert all(r.note == NO_VALUE for r in failed)
    report = {"commit": new.commit, "machine": "h200", "exit": 1, "counts": {"FAILED": 2},
              "rows": [asdict(r) for r in failed]}
    (tmp_path / "regress.json").write_text(json.dumps(report))
    rec = {"kernel": "14_bf16_wgmma_tma", "role": "kernel", "size": "4096", "M": 4096,
           "N": 4096, "K": 4096, "status": "throttled",
           "error": "every sample ran under the clock floor"}
    (tmp_path / "sweep.json").write_text(json.dumps({"records": [rec]}))
    md = summary.render([str(tmp_path / "sweep.json")], str(tmp_path / "regress.json"))
    lines = {ln.split(" | ")[2]: ln for ln in md.splitlines() if "**FAILED**" in ln}
    assert "the record: throttled: every sample ran under the clock floor" in lines["4096"]
    assert NO_VALUE[:40] in lines["8192"]          # no record of it here: the gate's note
