"""`gemm readme`: the README's results table written from results/, and held to it (CPU only)."""
import re
from pathlib import Path

import pytest

from gemm import cli
from gemm.cli import readme
from gemm.store.history import load_runs

from . import asvfake

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"


def table_of(text: str) -> str:
    return text[text.index(readme.BEGIN):text.index(readme.END) + len(readme.END)]


def blank(tmp_path, before="# title\n\nintro\n\n", after="\n\n## next\n\nmore\n") -> Path:
    f = tmp_path / "README.md"
    f.write_text(f"{before}{readme.BEGIN}\nold table\n{readme.END}{after}")
    return f


def test_committed_results_rendered_idempotent_and_checked(tmp_path, capsys):
    f = blank(tmp_path)
    assert cli.main(["readme", "--results", str(RESULTS), "--machine", "h200", "--file", str(f),
                     "--check"]) == 1                       # the stale table is found out
    assert "old table" in f.read_text()                     # --check writes nothing
    assert cli.main(["readme", "--results", str(RESULTS), "--machine", "h200",
                     "--file", str(f)]) == 0
    text = f.read_text()
    newest = load_runs(RESULTS, "h200")[0][-1]
    assert f"Commit {newest.commit[:7]}" in text and "`h200` (NVIDIA H200" in text
    assert text.startswith("# title\n\nintro\n\n") and text.endswith("\n\n## next\n\nmore\n")
    assert "old table" not in text
    rows = [line for line in table_of(text).splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| kernel | cuBLAS baseline | 512 | 1000 | 1024 | 2048 | 4096 | 8192")
    assert any(r.startswith("| 05_2d_blocktiling | cublas_fp32 | ") for r in rows)
    assert any(r.startswith("| cublas_fp32 (alone) |") for r in rows)
    # 13 measures 3001x2999x3003 (K % 4 != 0, padded staging) since b18d38c; a skipped point's
    # dash is tested below on a history made for it
    row13 = next(r for r in rows if r.startswith("| 13_tf32_wgmma_tma "))
    assert re.search(r"\| [\d.]+ \(\d+ %\) \|$", row13)
    capsys.readouterr()
    assert cli.main(["readme", "--results", str(RESULTS), "--file", str(f)]) == 0   # idempotent
    assert f.read_text() == text
    assert cli.main(["readme", "--results", str(RESULTS), "--file", str(f), "--check"]) == 0
    pct = re.search(r" \((\d+) %\)", table_of(text))      # any cell's % of cuBLAS, one point off
    f.write_text(text.replace(pct.group(0), f" ({int(pct.group(1)) + 1} %)", 1))
    assert cli.main(["readme", "--results", str(RESULTS), "--file", str(f), "--check"]) == 1
    assert "gemm readme" in capsys.readouterr().out


def test_the_repository_readme_is_the_newest_recorded_run(capsys):
    """README.md's table is what `gemm readme` writes from results/: after recording a run,
    `python3 -m gemm readme` rewrites it."""
    rc = cli.main(["readme", "--results", str(RESULTS), "--machine", "h200",
                   "--file", str(ROOT / "README.md"), "--check"])
    assert rc == 0, capsys.readouterr().out


def test_an_older_commit_by_prefix(tmp_path, capsys):
    """--commit renders that run (b570c37: 05 at 4096, 29.41 TFLOPS, 57 % of cuBLAS); a run
    recorded under another benchmark version (1ed380e, before the series restarted at
    b570c37) has nothing to show, and an unknown commit is a usage error."""
    f = blank(tmp_path)
    assert cli.main(["readme", "--results", str(RESULTS), "--commit", "b570c37",
                     "--file", str(f)]) == 0
    row = next(r for r in f.read_text().splitlines() if r.startswith("| 05_2d_blocktiling "))
    assert "| 29.4 (57 %) |" in row
    before = f.read_text()
    capsys.readouterr()
    assert cli.main(["readme", "--results", str(RESULTS), "--commit", "1ed380e",
                     "--file", str(f)]) == 2
    assert "no values of the current benchmark versions" in capsys.readouterr().err
    assert cli.main(["readme", "--results", str(RESULTS), "--commit", "0000000",
                     "--file", str(f)]) == 2
    assert f.read_text() == before


def test_failed_and_skipped_values_are_dashes_and_the_newest_run_wins(tmp_path):
    res = tmp_path / "results"
    kernels, sizes = ["05_2d_blocktiling", "13_tf32_wgmma_tma"], ["4096", "512", "3001x2999x3003"]
    asvfake.write_benchmarks(res, kernels, sizes)
    asvfake.write_run(res, "a" * 40, 1_000, {(k, s): 1.0 for k in kernels for s in sizes},
                      kernels, sizes)
    asvfake.write_run(res, "b" * 40, 2_000, {
        ("05_2d_blocktiling", "4096"): 29.42, ("05_2d_blocktiling", "512"): 6.0,
        ("05_2d_blocktiling", "3001x2999x3003"): None,                   # failed
        ("13_tf32_wgmma_tma", "4096"): 351.6, ("13_tf32_wgmma_tma", "512"): 20.48,
        ("13_tf32_wgmma_tma", "3001x2999x3003"): float("nan")},          # skipped
        kernels, sizes)
    f = blank(tmp_path)
    assert cli.main(["readme", "--results", str(res), "--file", str(f)]) == 0
    text = table_of(f.read_text())
    assert text.splitlines()[1].startswith("Commit bbbbbbb")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0] == "| kernel | cuBLAS baseline | 512 | 4096 | 3001x2999x3003 |"
    # asvfake records % of cuBLAS as twice the TFLOPS
    assert rows[1] == "| --- | --- | ---: | ---: | ---: |"
    assert rows[2] == "| 05_2d_blocktiling | cublas_fp32 | 6.00 (12 %) | 29.4 (59 %) | — |"
    assert rows[3] == "| 13_tf32_wgmma_tma | cublas_tf32_nk | 20.5 (41 %) | 352 (703 %) | — |"


@pytest.mark.parametrize("body, why", [
    ("no markers at all\n", "needs exactly one"),
    (f"{readme.END}\n{readme.BEGIN}\n", "needs exactly one"),
    (f"{readme.BEGIN}\n{readme.END}\n{readme.BEGIN}\n{readme.END}\n", "needs exactly one"),
])
def test_markers_are_required(tmp_path, capsys, body, why):
    f = tmp_path / "README.md"
    f.write_text(body)
    assert cli.main(["readme", "--results", str(RESULTS), "--file", str(f)]) == 2
    assert why in capsys.readouterr().err
    assert f.read_text() == body


def test_missing_results_are_a_usage_error(tmp_path, capsys):
    f = blank(tmp_path)
    assert cli.main(["readme", "--results", str(tmp_path / "none"), "--file", str(f)]) == 2
    assert "gemm readme:" in capsys.readouterr().err
