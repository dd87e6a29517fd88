"""gemm plot (gemm.record.plot): a colour and marker of its own per kernel and per cuBLAS
configuration, a commit without values at a size gets no slot, a spike does not set the y
range, and the gate's DROP / UNRESOLVED verdicts are drawn."""
import json
from pathlib import Path

import pytest

from gemm.core.registry import baselines, registry
from gemm.record import plot
from gemm.record.sitedata import load_machine, robust_limits
from tests.asvfake import write_benchmarks, write_run

K, S = ["04_1d_blocktiling", "05_2d_blocktiling"], ["1024", "4096"]


def test_every_kernel_and_cublas_configuration_has_its_own_style():
    kernels = sorted(registry())
    styles = [plot.style(k, kernels, False) for k in kernels]
    assert len({s["color"] for s in styles}) == len(kernels)
    assert len({s["marker"] for s in styles}) == len(kernels)
    cublas = sorted(set(baselines()) | set(plot.CUBLAS))
    cs = [plot.style(b, kernels, True) for b in cublas]
    assert len({(s["color"], str(s["ls"]), s["marker"]) for s in cs}) == len(cublas)
    assert len({s["marker"] for s in cs}) == len(cublas)
    assert not {s["marker"] for s in cs} & {s["marker"] for s in styles}


def test_a_spike_does_not_set_the_range():
    ys = [0.1 * (i % 7 - 3) for i in range(200)] + [10.0]
    lo, hi = robust_limits(ys, band=1.0)
    assert -1.5 < lo < -1.0 and 1.0 < hi < 1.5


@pytest.fixture
def history(tmp_path):
    res = tmp_path / "results"
    write_benchmarks(res, K, S)
    shas = [f"{i:x}" * 40 for i in range(1, 6)]
    for i, sha in enumerate(shas):
        vals = {(k, s): 30.0 for k in K for s in S}
        if i == 2:   # this commit measured only 1024
            vals = {(k, "1024"): 30.0 for k in K}
        write_run(res, sha, 1_700_000_000_000 + i, vals, K, S)
    v = tmp_path / "verdicts" / "h200"
    v.mkdir(parents=True)
    rows = [{"kernel": "05_2d_blocktiling", "size": "4096", "metric": "tflops",
             "verdict": "DROP", "min_effect": 0.01}]
    (v / f"{shas[-1]}.json").write_text(json.dumps(
        {"format": 2, "commit": shas[-1], "rows": rows,
         "summary": {"counts": {"DROP": 1}, "exit": 1, "anchor": None, "rows": rows}}))
    return res, shas


def test_commits_without_values_get_no_slot(history):
    res, shas = history
    m = load_machine(res, res.parent / "verdicts", "h200")
    assert plot.at_size(m, "4096")[1] == [s for i, s in enumerate(shas) if i != 2]
    assert plot.at_size(m, "1024")[1] == shas
    assert m.verdict(shas[-1], "05_2d_blocktiling", "4096", "tflops") == "DROP"
    assert m.verdict(shas[-1], "04_1d_blocktiling", "4096", "tflops") == "ok"
    assert m.verdict(shas[0], "04_1d_blocktiling", "4096", "tflops") is None


def test_plots_with_verdicts(history, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.axes
    rings, scatter = [], matplotlib.axes.Axes.scatter

    def spy(self, x, y, **kw):
        if list(x):
            rings.append((list(x), kw.get("edgecolors")))
        return scatter(self, x, y, **kw)
    monkeypatch.setattr(matplotlib.axes.Axes, "scatter", spy)
    res, _ = history
    files = plot.make_plots(str(res), "h200", str(tmp_path / "png"))
    assert rings == [([3], plot.RINGS["DROP"][0])]      # the 4th slot at 4096: its newest
    assert sorted(f.name for f in files) == ["history_1024.png", "history_4096.png",
                                             "tflops_vs_size.png"]
    assert all(Path(f).read_bytes()[:4] == b"\x89PNG" for f in files)
