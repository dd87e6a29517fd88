"""A confirmed DROP's explanation (gemm explain), attached to its rows and shown: the kept
verdict file and the gate report (gemm.store.verdicts.attach_*: only the DROP rows of that
kernel and size, atomic, nothing else touched), its compact part (gemm.explain.report.
attachment), `gemm explain --attach` (without builds: a stand-in explanation), `gemm show` and
`gemm summary`. The site's pages: tests/test_dashboard.py. ci/explain.sh: tests/test_explain.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gemm.explain.report import attachment
from gemm.store import verdicts

ROOT = Path(__file__).resolve().parent.parent
OLD, NEW, OTHER = "a" * 40, "b" * 40, "c" * 40
SUMMARY = "registers 128 -> 168, blocks/SM 2 -> 1; +1 BAR.SYNC.DEFER_BLOCKING per K-loop iteration"


def explanation(summary=SUMMARY, mode="static") -> dict:
    return {"schema": "gemm.explain/1", "summary": summary, "mode": mode, "against": OLD,
            "new": NEW, "defines": {}, "resources": {"main": {"regs": [128, 168]}},
            "loop_mix": {"barrier": [2, 3]}, "launch": {}, "identical": False, "gpu": None}


def row(kernel, size, metric, verdict, **kw) -> dict:
    return {"kernel": kernel, "size": size, "metric": metric, "verdict": verdict,
            "change": -0.03, "min_effect": 0.01, "note": f"{verdict} note", **kw}


def kept_file(root: Path, commit=NEW) -> Path:
    """A kept verdict file: the A/B's rows and the summary's (DROPs of 09 at 4096, both
    metrics; a DROP of 09 at 1024; a noise of 05 at 4096)."""
    ab = [row("09_cp_async_pipeline", "4096", "tflops", "DROP"),
          row("09_cp_async_pipeline", "4096", "pct_of_cublas", "DROP"),
          row("09_cp_async_pipeline", "1024", "tflops", "DROP"),
          row("05_2d_blocktiling", "4096", "tflops", "noise")]
    summary = {"counts": {"DROP": 3, "noise": 1, "ok": 10}, "anchor": OLD, "exit": 1,
               "rows": [dict(r) for r in ab]}
    return verdicts.save(root, "h200", commit, ab, "NVIDIA H200 GPU-x", summary=summary)


# --- attaching -------------------------------------------------------------------------------

def test_attach_sets_only_the_drop_rows_of_that_kernel_and_size(tmp_path):
    path = kept_file(tmp_path)
    other = kept_file(tmp_path, OTHER)
    other_bytes = other.read_bytes()
    n = verdicts.attach_explanation(tmp_path, "h200", NEW, "09_cp_async_pipeline",
                                    "4096x4096x4096", explanation())   # the same size, spelt out
    assert n == 4                                 # both metrics, in rows and in summary.rows
    data = json.loads(path.read_text())
    for rows in (data["rows"], data["summary"]["rows"]):
        got = {(r["kernel"], r["size"], r["metric"]): r.get("explanation") for r in rows}
        assert got[("09_cp_async_pipeline", "4096", "tflops")] == explanation()
        assert got[("09_cp_async_pipeline", "4096", "pct_of_cublas")] == explanation()
        assert got[("09_cp_async_pipeline", "1024", "tflops")] is None
        assert got[("05_2d_blocktiling", "4096", "tflops")] is None
    assert data["summary"]["counts"] == {"DROP": 3, "noise": 1, "ok": 10}
    assert data["device"] == "NVIDIA H200 GPU-x" and data["format"] == verdicts.FORMAT
    assert other.read_bytes() == other_bytes      # another commit's file untouched
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, other.name])
    # the gate still reads its kept verdicts, the explanation along
    kept = verdicts.load(tmp_path, "h200", NEW)
    assert kept[("09_cp_async_pipeline", "4096", "tflops")]["explanation"]["summary"] == SUMMARY


def test_attach_writes_nothing_where_there_is_no_file_or_drop_row(tmp_path):
    assert verdicts.attach_explanation(tmp_path, "h200", NEW, "09", "4096", explanation()) == 0
    assert not (tmp_path / "h200").exists()
    path = kept_file(tmp_path)
    before = path.read_bytes()
    assert verdicts.attach_explanation(tmp_path, "h200", NEW, "05_2d_blocktiling", "4096",
                                       explanation()) == 0      # a noise, not a DROP
    assert verdicts.attach_explanation(tmp_path, "h200", NEW, "09_cp_async_pipeline", "2048",
                                       explanation()) == 0
    assert path.read_bytes() == before


def test_attach_is_atomic(tmp_path, monkeypatch):
    """A write that fails midway leaves the file as it was (the new text goes to a temporary
    file, moved over it in one step)."""
    path = kept_file(tmp_path)
    before = path.read_bytes()

    def fail(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(verdicts.os, "replace", fail)
    with pytest.raises(OSError):
        verdicts.attach_explanation(tmp_path, "h200", NEW, "09_cp_async_pipeline", "4096",
                                    explanation())
    assert path.read_bytes() == before


def test_a_later_save_keeps_other_explanations_and_drops_a_remeasured_one(tmp_path):
    kept_file(tmp_path)
    verdicts.attach_explanation(tmp_path, "h200", NEW, "09_cp_async_pipeline", "4096",
                                explanation())
    verdicts.save(tmp_path, "h200", NEW, [row("09_cp_async_pipeline", "4096", "tflops",
                                              "noise")])     # a narrowed run re-measured it
    kept = verdicts.load(tmp_path, "h200", NEW)
    assert "explanation" not in kept[("09_cp_async_pipeline", "4096", "tflops")]
    assert kept[("09_cp_async_pipeline", "4096", "pct_of_cublas")]["explanation"] == explanation()


def test_attach_to_a_gate_report(tmp_path):
    report = tmp_path / "regress.json"
    rows = [row("09_cp_async_pipeline", "4096", "tflops", "DROP"),
            row("09_cp_async_pipeline", "4096", "pct_of_cublas", "UNRESOLVED")]
    report.write_text(json.dumps({"schema": "gemm.regress/1", "commit": NEW, "rows": rows}))
    assert verdicts.attach_to_report(report, "09_cp_async_pipeline", "4096", explanation()) == 1
    got = json.loads(report.read_text())["rows"]
    assert got[0]["explanation"] == explanation() and "explanation" not in got[1]
    assert verdicts.explanations(got) == {("09_cp_async_pipeline", "4096"): explanation()}
    assert verdicts.attach_to_report(tmp_path / "none.json", "09", "4096", explanation()) == 0
    assert verdicts.why(explanation()) == f"{SUMMARY} (static, vs {OLD[:10]})"
    assert verdicts.why(None) == verdicts.why({"summary": ""}) == ""


# --- what is kept of an explanation ------------------------------------------------------------

def explain_doc(gpu: bool = False) -> dict:
    """A gemm.explain/1 document, cut down to what attachment reads (and a SASS diff)."""
    entry = {"present": [True, True], "resources": {"regs": [128, 168]},
             "mix": {"barrier": [10, 12]}, "loop_mix": {"barrier": [2, 3]},
             "loop_opcodes": {"BAR.SYNC.DEFER_BLOCKING": [1, 2]},
             "loop_diff": ["--- old", "+++ new", "+BAR.SYNC.DEFER_BLOCKING"],
             "loop_instructions": [80, 81], "identical_sass": False}
    edge = {**entry, "resources": {}}
    diff = {"time_ms": [0.2, 0.21], "counters": {"sm_throughput": [83.0, 79.0]},
            "stalls": {"barrier": [12.0, 31.0]}, "machine": {"sm_mhz": [1600, 1605]}}
    return {"schema": "gemm.explain/1", "kernel": "09_cp_async_pipeline", "size": "4096",
            "mode": "gpu" if gpu else "static",
            "old": {"rev": OLD, "commit": OLD, "entries": {"main": {"sass_sha256": "x"}}},
            "new": {"rev": "HEAD", "commit": NEW},
            "diff": {"defines": {"STAGES": [3, 2]}, "nvcc_options": [],
                     "entries": {"main": entry, "edge": edge},
                     "launch": {"waves": [1.9, 2.1]}, "identical_sass": False,
                     "identical": False},
            "gpu": {"why": "", "device": "NVIDIA H200", "diff": diff} if gpu else None,
            "summary": SUMMARY}


def test_attachment_keeps_the_summary_and_the_compact_differences_only():
    got = attachment(explain_doc())
    assert got == {"schema": "gemm.explain/1", "summary": SUMMARY, "mode": "static",
                   "against": OLD, "new": NEW, "defines": {"STAGES": [3, 2]},
                   "resources": {"main": {"regs": [128, 168]}},
                   "loop_mix": {"barrier": [2, 3]}, "launch": {"waves": [1.9, 2.1]},
                   "identical": False, "gpu": None, "ab_machine": None}
    text = json.dumps(got)
    assert "+++ new" not in text and "sass_sha256" not in text    # no SASS, no diff of it
    g = attachment(explain_doc(gpu=True))
    assert g["mode"] == "gpu" and g["gpu"] == {
        "device": "NVIDIA H200", "time_ms": [0.2, 0.21],
        "counters": {"sm_throughput": [83.0, 79.0]}, "stalls": {"barrier": [12.0, 31.0]},
        "machine": {"sm_mhz": [1600, 1605]}}


def test_explain_attach_puts_it_on_the_rows_and_says_where_it_cannot(tmp_path, capsys):
    """gemm.cli.explain.attach with a stand-in for the builds' comparison."""
    from gemm.cli import explain as cli
    kept_file(tmp_path / "v")
    report = tmp_path / "regress.json"
    report.write_text(json.dumps({"rows": [row("09_cp_async_pipeline", "4096", "tflops",
                                               "DROP")]}))
    ex = SimpleNamespace(to_json=explain_doc, new=SimpleNamespace(kernel="09_cp_async_pipeline",
                                                                  commit=NEW))
    args = SimpleNamespace(attach=str(tmp_path / "v"), machine="h200", commit=None,
                           attach_report=str(report), size="4096")
    cli.attach(args, ex)
    err = capsys.readouterr().err
    assert err.count("attached to") == 2 and "attached to 4 DROP row(s)" in err
    assert verdicts.load(tmp_path / "v", "h200", NEW)[
        ("09_cp_async_pipeline", "4096", "tflops")]["explanation"] == attachment(explain_doc())
    assert json.loads(report.read_text())["rows"][0]["explanation"]["summary"] == SUMMARY
    cli.attach(SimpleNamespace(**{**vars(args), "commit": OTHER, "attach_report": None}), ex)
    assert "not attached:" in capsys.readouterr().err      # no file kept for that commit
    from gemm.cli.main import main
    assert main(["explain", "09", "--size", "4096", "--attach", str(tmp_path)]) == 2
    assert "--attach needs --machine" in capsys.readouterr().err


# --- gemm show and gemm summary ------------------------------------------------------------------

def _gemm(*argv):
    return subprocess.run([sys.executable, "-m", "gemm", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_show_prints_why_under_an_explained_drop(tmp_path):
    path = kept_file(tmp_path)
    verdicts.attach_explanation(tmp_path, "h200", NEW, "09_cp_async_pipeline", "4096",
                                explanation())
    out = _gemm("show", str(path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"verdicts kept on h200: commit {NEW[:10]}, exit 1: 3 DROP")
    why = [i for i, ln in enumerate(lines) if ln.startswith("    why: ")]
    assert len(why) == 1, out.stdout                 # once for the kernel and size
    assert lines[why[0]] == f"    why: {SUMMARY} (static, vs {OLD[:10]})"
    assert lines[why[0] - 1].startswith("  09_cp_async_pipeline 4096 ")
    report = tmp_path / "regress.json"
    report.write_text(json.dumps({"schema": "gemm.regress/1", "commit": NEW, "machine": "h200",
                                  "exit": 1, "counts": {"DROP": 1},
                                  "rows": [row("09_cp_async_pipeline", "4096", "tflops",
                                               "DROP", explanation=explanation("fewer stages"))]}))
    out = _gemm("show", str(report))
    assert out.returncode == 0, out.stderr
    assert f"    why: fewer stages (static, vs {OLD[:10]})" in out.stdout.splitlines()
    assert out.stdout.startswith("gate on h200: commit ")


def test_show_prints_the_ab_of_an_improved_series_not_the_screens(tmp_path):
    """An "improved" row the A/B decided (it has effects) is shown with its note, as noise
    is; one the screen alone called improved is not."""
    report = tmp_path / "regress.json"
    report.write_text(json.dumps({"schema": "gemm.regress/1", "commit": NEW, "machine": "h200",
                                  "exit": 0, "counts": {"improved": 2}, "rows": [
                                      row("07_bank_conflict_free", "4096", "tflops", "improved",
                                          effects=[{"verdict": "FASTER"}]),
                                      row("05_2d_blocktiling", "4096", "tflops", "improved")]}))
    out = _gemm("show", str(report))
    assert out.returncode == 0, out.stderr
    assert "  07_bank_conflict_free 4096 tflops (min effect 1.0 %): improved" in out.stdout
    assert "05_2d_blocktiling 4096" not in out.stdout


def test_summary_says_why_under_the_failing_series(tmp_path):
    rows = [row("09_cp_async_pipeline", "4096", "tflops", "DROP",
                explanation=explanation("x | <y>", mode="gpu")),
            row("09_cp_async_pipeline", "4096", "pct_of_cublas", "DROP",
                explanation=explanation("x | <y>", mode="gpu")),
            row("09_cp_async_pipeline", "1024", "tflops", "DROP"),
            row("05_2d_blocktiling", "4096", "tflops", "noise")]
    report = tmp_path / "regress.json"
    report.write_text(json.dumps({"schema": "gemm.regress/1", "commit": NEW, "machine": "h200",
                                  "rows": rows, "exit": 1,
                                  "counts": {"DROP": 3, "noise": 1}}))
    out = _gemm("summary", "--regress", str(report))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    head = lines.index("**Why** (`gemm explain`: what changed in the code since the commit the "
                       "drop was confirmed against)")
    drops = [i for i, ln in enumerate(lines) if "**DROP**" in ln]
    assert max(drops) < head < next(i for i, ln in enumerate(lines) if "<details>" in ln)
    whys = [ln for ln in lines if ln.startswith("- 🔴 ")]
    assert whys == [f"- 🔴 09_cp_async_pipeline at 4096: x \\| &lt;y&gt; (gpu, vs {OLD[:10]})"]
    short = _gemm("summary", "--regress", str(report), "--max-chars", "1200")
    assert short.returncode == 0 and len(short.stdout) <= 1200


def test_no_why_without_an_explanation(tmp_path):
    report = tmp_path / "regress.json"
    report.write_text(json.dumps({"rows": [row("09_cp_async_pipeline", "4096", "tflops",
                                               "DROP")], "exit": 1, "counts": {"DROP": 1}}))
    assert "**Why**" not in _gemm("summary", "--regress", str(report)).stdout
    assert "why:" not in _gemm("show", str(report)).stdout
    assert os.path.exists(report)
