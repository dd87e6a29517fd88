"""Publishing the history on a machine without a GPU: asv publish builds from recorded
results, its Regressions page lists slowdowns of the lower-is-better series but never rising
TFLOPS, the pages render graphs in headless Chromium (offline: asv's CDN scripts are served
locally), and gemm plot writes PNGs."""
import functools
import http.server
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from tests.asvfake import write_benchmarks, write_run
from tests.stubrepo import commits

ROOT = Path(__file__).resolve().parent.parent
K = ["04_1d_blocktiling", "05_2d_blocktiling"]
S = ["1024", "4096"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if not shutil.which("asv"):
        pytest.skip("asv is not installed")
    repo = tmp_path_factory.mktemp("site")
    shas = commits(repo, 4)
    res = repo / "results"
    write_benchmarks(res, K, S)
    # TFLOPS rise 20 % at the third commit; the fake writes the same numbers into the
    # seconds and time-ratio series, so those *rise* (a slowdown, in asv's direction)
    for i, sha in enumerate(shas):
        v = 30.0 if i < 2 else 36.0
        write_run(res, sha, 1_700_000_000_000 + i * 60_000, {(k, s): v for k in K for s in S}, K, S)
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    (repo / "asv.conf.json").write_text(json.dumps(conf))
    out = subprocess.run(["asv", "publish", "--config", "asv.conf.json"], cwd=repo,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return repo, repo / conf["html_dir"]


def test_publish_builds_graphs_for_every_series(site):
    _, html = site
    index = json.loads((html / "index.json").read_text())
    for k in K:
        for m in ("track_tflops", "track_pct_of_cublas", "track_seconds", "track_time_ratio"):
            assert f"bench_gemm.Kernel_{k}.{m}" in index["benchmarks"]
    assert list(html.glob("graphs/**/bench_gemm.Kernel_05_2d_blocktiling.track_tflops.json"))


def test_regressions_page_is_not_polluted_by_rising_tflops(site):
    _, html = site
    regs = json.loads((html / "regressions.json").read_text())["regressions"]
    names = {r[0].split("(")[0] for r in regs}
    assert "bench_gemm.Kernel_05_2d_blocktiling.track_seconds" in names   # a slowdown, to asv
    assert not any("track_tflops" in n or "track_pct_of_cublas" in n for n in names)


def test_pages_render_graphs_in_a_browser(site, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    from gemm.record.publish import PublishError, localize
    repo, html = site
    try:
        assert localize(html, repo / ".asv" / "vendor") >= 10
    except PublishError as exc:
        pytest.skip(f"asv's scripts could not be fetched for offline use: {exc}")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = (f"http://127.0.0.1:{server.server_address[1]}/index.html"
               "#bench_gemm.Kernel_05_2d_blocktiling.track_tflops")
        out = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=15000", "--dump-dom", url],
            capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
    dom = out.stdout
    assert "failed to load" not in dom, "asv's error page: a script did not load"
    assert 'class="flot-base"' in dom, "no graph canvas in the rendered page"
    assert "05_2d_blocktiling" in dom


def test_png_plots(site, tmp_path):
    pytest.importorskip("matplotlib")
    from gemm.cli import main
    repo, _ = site
    assert main(["plot", "--results", str(repo / "results"), "--machine", "h200",
                 "--out", str(tmp_path / "plots")]) == 0
    pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert pngs == ["history_1024.png", "history_4096.png", "tflops_vs_size.png"]
    assert all((tmp_path / "plots" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_gemm_publish_makes_the_dashboard_the_first_page(site, tmp_path, monkeypatch):
    from gemm.cli import main
    repo, _ = site
    copy = tmp_path / "repo"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".asv"))
    monkeypatch.chdir(copy)
    assert main(["publish"]) == 0
    html = copy / ".asv" / "html"
    index = (html / "index.html").read_text()
    assert "table class='heat on'" in index and "href='asv/index.html'" in index
    assert index.count("data-c=") >= len(K) * len(S)
    assert (html / "asv" / "index.html").is_file() and (html / "gate.html").is_file()
    assert not (html / "regressions.json").exists() and not (html / "asv" / "regressions.json").exists()
    assert list((html / "series" / "h200").glob("05_2d_blocktiling__4096.html"))
