"""The published site built from the committed results/ and verdicts/: the dashboard is the
first page, has a cell per series of the newest commit, colours a planted 1 % DROP as one,
links every cell to a series page with the minimum-effect band and the verdicts marked, says
why the planted DROP dropped (its attached explanation) on its series page, leaves asv's
Regressions page out, and, opened from disk in headless Chromium, loads without a console
error and switches metric and comparison (screenshots kept: the path is printed)."""
import html
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from gemm.record import dashboard, publish
from gemm.record.sitedata import load_machine

ROOT = Path(__file__).resolve().parent.parent
MACHINE = "h200"
NEWEST = load_machine(ROOT / "results", ROOT / "verdicts", MACHINE).commits[-1]
PLANT = ("05_2d_blocktiling", "4096", "tflops")
WHY = "registers 128 -> 168, blocks/SM 2 -> 1; +1 BAR.SYNC.DEFER_BLOCKING per K-loop iteration"
EXPLANATION = {"schema": "gemm.explain/1", "summary": WHY, "mode": "static", "against": "f" * 40,
               "new": NEWEST, "defines": {}, "resources": {"main": {"regs": [128, 168]}},
               "loop_mix": {"barrier": [2, 3]}, "launch": {}, "identical": False, "gpu": None}


def _build(tmp: Path, verdicts: Path) -> Path:
    if not shutil.which("asv"):
        pytest.skip("asv is not installed")
    return publish.publish(str(ROOT / "asv.conf.json"), verdicts_dir=str(verdicts),
                           html_dir=str(tmp / "html"))


def plant_drop(src: Path, dst: Path, commit: str, key=PLANT, change=-0.01,
               explanation: dict | None = None) -> Path:
    """A copy of the kept verdicts with a DROP of `change` for `key` at `commit` (with
    `explanation` attached, as gemm explain --attach does)."""
    shutil.copytree(src, dst)
    path = dst / MACHINE / f"{commit}.json"
    data = json.loads(path.read_text()) if path.exists() else \
        {"format": 2, "commit": commit, "machine": MACHINE, "rows": [], "summary": None}
    s = data.get("summary") or {"counts": {}, "anchor": None, "exit": 0, "rows": []}
    row = {"kernel": key[0], "size": key[1], "metric": key[2], "verdict": "DROP",
           "change": change, "anchor_change": change, "min_effect": 0.01,
           "note": "planted by the test", "effects": [
               {"against": "f" * 40, "verdict": "DROP", "change": change, "lo": change - 0.002,
                "hi": change + 0.002, "n_ref": 2, "n_new": 2,
                "values": {"ref": [10.0, 10.01], "new": [9.9, 9.91]}}]}
    if explanation:
        row["explanation"] = explanation
    s["rows"] = [r for r in s["rows"] if (r["kernel"], r["size"], r["metric"]) != key] + [row]
    # a kept file holds the rows twice (its top-level rows and its summary's): the same in both
    data["rows"] = [r for r in data.get("rows") or []
                    if (r["kernel"], r["size"], r["metric"]) != key] + [row]
    s["counts"]["DROP"] = s["counts"].get("DROP", 0) + 1
    s["exit"] = 1
    data["summary"] = s
    path.write_text(json.dumps(data))
    return dst


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("site"), ROOT / "verdicts")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("planted")
    return _build(tmp, plant_drop(ROOT / "verdicts", tmp / "verdicts", NEWEST,
                                  explanation=EXPLANATION))


def newest_series(metric="tflops", first=False) -> set:
    """The series the newest commit measured; first=True: only those it measured first (no
    earlier value: a dash, not a change), first=False: only those it can compare."""
    m = load_machine(ROOT / "results", ROOT / "verdicts", MACHINE)
    return {(k, s) for k, s in m.series(metric) if m.value(NEWEST, k, s, metric) is not None
            and (m.previous(NEWEST, k, s, metric) is None) == first}


def cells(html: str, metric: str, commit: str) -> dict:
    """{(kernel, size): td's class} of one metric's heat map at one commit."""
    table = re.search(rf"<table class='heat[^']*' data-metric='{metric}'.*?</table>", html, re.S)
    return {(k, s): cls for cls, c, k, s in re.findall(
        r"<td class='([^']*)' data-c='(\w+)' data-k='([^']+)' data-s='([^']+)'", table.group(0))
        if c == commit[:8]}


def test_the_dashboard_is_the_first_page_with_a_cell_per_series(site):
    html = (site / "index.html").read_text()
    assert "data-metric='tflops'" in html and "data-metric='pct_of_cublas'" in html
    for metric in ("tflops", "pct_of_cublas"):
        got = cells(html, metric, NEWEST)
        assert newest_series(metric) | newest_series(metric, first=True) <= {k for k, c in got.items() if "nodata" not in c}
    assert "src=" not in html.replace("<script>", "")          # no external script
    assert not re.search(r"(src|href)=['\"]https?://", html)   # nothing fetched from elsewhere


def test_every_cell_links_to_a_series_page_with_band_and_verdicts(site):
    html = (site / "index.html").read_text()
    links = set(re.findall(r"href='(series/[^'#]+)#", html))
    assert links and all((site / link).is_file() for link in links)
    page = (site / "series" / MACHINE / "02_coalesced__4096.html").read_text()
    assert "class=band" in page and "m-UNRESOLVED" in page      # the recorded UNRESOLVED
    assert "rounds: first:" in page                               # the A/B's rounds listed


def drop_cells(site_dir: Path) -> set:
    return {k for k, c in cells((site_dir / "index.html").read_text(), "tflops", NEWEST).items()
            if "v-DROP" in c}


def test_a_planted_one_percent_drop_is_a_drop_cell(site, planted):
    """The planted DROP is one cell more than the newest commit's own DROPs (if it has any)."""
    real = drop_cells(site)
    assert PLANT[:2] not in real
    assert drop_cells(planted) == real | {PLANT[:2]}
    page = (planted / "series" / MACHINE / f"{PLANT[0]}__{PLANT[1]}.html").read_text()
    assert "m-DROP" in page and "planted by the test" in page
    gate = (planted / "gate.html").read_text()
    assert "FAIL" in gate and f"g-{NEWEST[:8]}" in gate


def test_the_planted_drop_says_why(site, planted):
    """Its explanation's summary line on the series page (under the DROP's row, and in the
    marker's tooltip), on the gate page and in the dashboard's tooltips; nowhere else."""
    why = html.escape(f"{WHY} (static, vs {'f' * 10})")
    page = (planted / "series" / MACHINE / f"{PLANT[0]}__{PLANT[1]}.html").read_text()
    tflops = page.split("<section id='tflops'>")[1].split("</section>")[0]
    row = re.search(rf"<tr id='c-{NEWEST[:8]}'>.*?</tr>", tflops.split("<table")[1]).group(0)
    assert f"<div class=why><b>why:</b> {why}</div>" in row
    assert f"; why: {why}</title>" in tflops
    assert page.count("class=why>") == 1            # the TFLOPS series only: % of cuBLAS ok
    assert why in (planted / "gate.html").read_text()
    index = (planted / "index.html").read_text()
    real = (site / "index.html").read_text().count("why: ")    # the commit's own explained DROPs
    assert f"why: {why}" in index and index.count("why: ") == real + 2   # the cell and the chip
    other = (planted / "series" / MACHINE / "02_coalesced__4096.html").read_text()
    assert "class=why>" not in other


def test_asv_pages_are_under_asv_without_regressions_and_one_machine_identity(site):
    asv = site / "asv"
    index = (asv / "index.html").read_text()
    assert "#/regressions" not in index and 'href="../index.html"' in index
    assert not (asv / "regressions.json").exists()
    assert "min: 0" not in (asv / "summarygrid.js").read_text()   # thumbnails to scale
    params = json.loads((asv / "index.json").read_text())["params"]
    assert all(len(v) == 1 for k, v in params.items()), params   # no num_cpu / os / ram split
    assert not {"num_cpu", "os", "ram"} & set(params)


def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (.ci/run: pip install playwright)")
    return chromium, sync_playwright


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else tmp_path_factory.mktemp("shots")
    out.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {out}")
    return out


def _open(chromium, sync_playwright, url, shot, action=None):
    errors = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium,
                              args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = b.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("requestfailed", lambda r: errors.append(f"failed: {r.url}"))
            page.goto(url)
            page.wait_for_load_state("load")
            out = action(page) if action else None
            page.screenshot(path=str(shot))
            width = page.evaluate("document.documentElement.scrollWidth")
        finally:
            b.close()
    return errors, width, out


def test_dashboard_and_series_page_in_chromium_from_file(site, shots):
    chromium, pw = browser()

    def heat(page):
        rows = page.eval_on_selector_all(
            f"table.heat.on td[data-c='{NEWEST[:8]}'][data-k]",
            "tds => tds.map(td => [td.dataset.k, td.dataset.s, td.innerText.trim()])")
        page.select_option("#metric", "pct_of_cublas")
        page.check("input[name=cmp][value=anchor]")
        shown = page.eval_on_selector("table.heat.on", "t => t.dataset.metric")
        return rows, shown

    errors, width, (rows, shown) = _open(chromium, pw, (site / "index.html").as_uri(),
                                         shots / "dashboard.png", heat)
    assert not errors, errors
    assert width <= 1400, f"the dashboard overflows 1400 px ({width})"
    assert {(k, s) for k, s, text in rows if text.endswith("%")} >= newest_series()
    assert {(k, s) for k, s, text in rows if text == "\u2013"} >= newest_series(first=True)
    assert shown == "pct_of_cublas"
    page = site / "series" / MACHINE / "02_coalesced__4096.html"
    errors, width, _ = _open(chromium, pw, page.as_uri(), shots / "series.png")
    assert not errors, errors
    assert width <= 1400
    errors, width, _ = _open(chromium, pw, (site / "gate.html").as_uri(), shots / "gate.png")
    assert not errors and width <= 1400, (errors, width)


def test_the_planted_drop_stands_out_in_chromium(planted, shots):
    chromium, pw = browser()
    sel = f"table.heat.on td[data-c='{NEWEST[:8]}'][data-k='{PLANT[0]}'][data-s='{PLANT[1]}']"

    def colour(page):
        page.locator(sel).scroll_into_view_if_needed()
        return page.eval_on_selector(sel, "td => [td.className, getComputedStyle(td)"
                                          ".backgroundColor, td.innerText.trim()]")

    errors, _, (cls, bg, text) = _open(chromium, pw, (planted / "index.html").as_uri(),
                                       shots / "dashboard_drop.png", colour)
    assert not errors, errors
    assert "v-DROP" in cls and bg == "rgb(215, 25, 28)" and text.endswith("%")
    series = planted / "series" / MACHINE / f"{PLANT[0]}__{PLANT[1]}.html"
    row = f"#tflops tr#c-{NEWEST[:8]}"

    def why(page):
        page.locator(f"{row} .why").scroll_into_view_if_needed()
        return (page.inner_text(f"{row} .why"), page.locator(f"{row} .why").is_visible(),
                page.locator("#pct_of_cublas .why").count())

    errors, width, (text, visible, others) = _open(chromium, pw, series.as_uri(),
                                                   shots / "series_drop_why.png", why)
    assert not errors and width <= 1400, (errors, width)
    assert visible and text == f"why: {WHY} (static, vs {'f' * 10})" and others == 0


def test_newest_commits_are_the_columns():
    m = load_machine(ROOT / "results", ROOT / "verdicts", MACHINE)
    html = dashboard.render([m], newest=3)
    heads = re.findall(r"href='gate.html#g-(\w+)'", html.split("</thead>")[0])
    assert heads == [c[:8] for c in reversed(m.commits[-3:])]


def test_a_machine_selector_where_results_hold_several(tmp_path):
    from tests.asvfake import write_benchmarks, write_run
    res = tmp_path / "results"
    write_benchmarks(res, ["05_2d_blocktiling"], ["1024"])
    for machine in ("a100", "h200"):
        for i in range(3):
            write_run(res, f"{i + 1:x}" * 40, 1_700_000_000_000 + i,
                      {("05_2d_blocktiling", "1024"): 30.0 + i}, ["05_2d_blocktiling"], ["1024"],
                      machine=machine)
    index = dashboard.write_site(tmp_path / "html", res, tmp_path / "none", ["a100", "h200"])
    html = index.read_text()
    assert "<select id=machine><option value='a100'>a100</option><option value='h200'>" in html
    assert "<section class='machine on' data-machine='a100'>" in html
    assert "<section class='machine' data-machine='h200'>" in html
    assert (tmp_path / "html" / "series" / "h200" / "05_2d_blocktiling__1024.html").is_file()
    assert "class='v-none" in html and "class='v-ok" not in html   # nothing judged: no verdicts


def test_a_series_page_shades_the_minimum_effect_the_gate_will_use(tmp_path):
    """The band on a series page is the gate's own minimum effect for that series, from the
    committed calibration (GateConfig.effect_for with its prior), not its size class's floor:
    a power-bound TFLOPS series the gate can only judge at several % says so. Without a usable
    calibration file it falls back to the floor."""
    from gemm.record import series_page
    from gemm.track import calibration
    from gemm.track.gate import GateConfig
    cal, why = calibration.load(ROOT / "calibration", MACHINE)
    assert cal is not None, why
    m = load_machine(ROOT / "results", ROOT / "verdicts", MACHINE)
    wider = [(k, s, metric) for k, s in m.series("tflops") for metric in ("tflops",)
             if GateConfig().effect_for(s, cal.prior(k, s, metric)) > GateConfig().effect_for(s)]
    assert wider, "the committed calibration widens some series past their floor"
    k, s, metric = wider[0]
    want = GateConfig().effect_for(s, cal.prior(k, s, metric))
    assert m.min_effect(k, s, metric) == want
    assert f"&plusmn;{100 * want:g} %" in series_page.render(m, k, s)
    bare = load_machine(ROOT / "results", ROOT / "verdicts", MACHINE, calibration_dir=tmp_path)
    assert bare.calibration is None
    assert bare.min_effect(k, s, metric) in (GateConfig().effect_for(s),) + tuple(
        r.get("min_effect") for c in bare.commits
        if (r := bare.row(c, k, s, metric)) and r.get("min_effect"))
