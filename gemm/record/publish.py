"""Publish the history: the dashboard and series pages (gemm.record.dashboard), the gate's
verdicts (gemm.record.verdict_page), and asv's HTML under asv/ (asv publish), optionally with
asv's scripts copied beside it.

The site's own pages are static files with their data inside: they work from file:// and any
static host. asv's pages fetch their JSON at run time, so they need a web server (GitHub
Pages, `asv preview`, `python3 -m http.server`); opened from disk they fail.

asv's pages load jQuery, flot and bootstrap from public CDNs. A runner or browser without
internet access (a locked-down GPU runner, this project's CI) shows asv's "external
dependencies failed to load" page instead of graphs. `localize` copies pinned versions of
those files (from the npm registry) next to the pages and points the pages at them.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

# CDN address in asv 0.6.6's pages -> (npm package@version, file inside the package)
VENDORED = {
    "https://code.jquery.com/jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.selection.min.js": ("flot@0.8.3", "jquery.flot.selection.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3/jquery.flot.categories.min.js": ("flot@0.8.3", "jquery.flot.categories.js"),
    "https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": ("flot-orderbars@1.0.0", "js/jquery.flot.orderBars.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js": ("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js": ("bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    "https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css": ("bootstrap@3.1.1", "dist/css/bootstrap.min.css"),
}


class PublishError(RuntimeError):
    pass


def fetch_vendor(vendor_dir: Path) -> Path:
    """npm-install the pinned packages into vendor_dir (once; reused afterwards)."""
    vendor_dir = Path(vendor_dir)
    mods = vendor_dir / "node_modules"
    missing = [p for p, f in set(VENDORED.values())
               if not (mods / p.rsplit("@", 1)[0] / f).exists()]
    if missing:
        if not shutil.which("npm"):
            raise PublishError("npm is needed to fetch asv's JavaScript libraries for offline pages")
        vendor_dir.mkdir(parents=True, exist_ok=True)
        pkgs = sorted({p for p, _ in VENDORED.values()})
        out = subprocess.run(["npm", "install", "--no-save", "--no-audit", "--no-fund",
                              "--prefix", str(vendor_dir), *pkgs], capture_output=True, text=True)
        if out.returncode != 0:
            raise PublishError(f"npm install failed: {out.stderr.strip()[-500:]}")
    return mods


def localize(html_dir: Path, vendor_dir: Path) -> int:
    """Point asv's pages at local copies of their CDN files; returns how many were replaced."""
    html_dir = Path(html_dir)
    mods = fetch_vendor(vendor_dir)
    dest = html_dir / "vendor"
    dest.mkdir(exist_ok=True)
    local = {}
    for url, (pkg, path) in VENDORED.items():
        src = mods / pkg.rsplit("@", 1)[0] / path
        name = url.rsplit("/", 1)[1]
        shutil.copy2(src, dest / name)
        local[url] = f"vendor/{name}"
    n = 0
    for page in html_dir.glob("*.html"):
        text = page.read_text()

        def swap(m):  # the tag that loads a CDN file: local path, no CDN integrity hash
            nonlocal n
            tag = m.group(0)
            for url, rel in local.items():
                if url in tag:
                    n += 1
                    return re.sub(r'\s+integrity="[^"]*"', "", tag.replace(url, rel))
            return tag

        page.write_text(re.sub(r"<(?:script|link)\b[^>]*>", swap, text))
    return n


ASV_DIR = "asv"   # asv's own pages, under the site's top folder
REGRESSIONS_NAV = '<li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li>'
SITE_NAV = ('<li id="nav-li-dashboard"><a href="../index.html">Dashboard</a></li>'
            '<li id="nav-li-gate"><a href="../gate.html">Gate verdicts</a></li>')


def without_regressions(asv_html: Path) -> None:
    """asv's Regressions page judges each series by asv's own step detection on the recorded
    values, which here are one lent GPU's: it listed machine shifts the gate's A/B had
    dismissed. Its navigation item gives way to links back to the site (the dashboard and
    the gate's verdicts), and its data files are removed, so no page shows those lists."""
    index = asv_html / "index.html"
    text = index.read_text()
    text = text.replace(REGRESSIONS_NAV, SITE_NAV, 1)
    text = re.sub(r'\s*<link rel="alternate" type="application/atom\+xml"[^>]*regressions\.xml"/>',
                  "", text)
    index.write_text(text)
    for name in ("regressions.json", "regressions.xml"):
        (asv_html / name).unlink(missing_ok=True)


def thumbnails_to_scale(asv_html: Path) -> bool:
    """asv's grid draws each thumbnail from y = 0, so a series at 30 TFLOPS moving 1 % is a
    flat line at the top edge; drawn on its own range (flot's default) the move shows. True
    if asv's script had the line (asv 0.6)."""
    js = asv_html / "summarygrid.js"
    text = js.read_text() if js.is_file() else ""
    new = re.sub(r"(ticks: \[\]),\s*min: 0", r"\1", text, count=1)
    if new != text:
        js.write_text(new)
    return new != text


def _clear(html: Path, root: Path) -> None:
    """asv publish empties its output folder too; never one that holds the project."""
    html, root = html.resolve(), root.resolve()
    if html == root or html in root.parents:
        raise PublishError(f"html_dir {html} would hold the project; name a folder of its own")
    if html.exists():
        shutil.rmtree(html)


def site_anchor(root: Path) -> str | None:
    from ..track.anchor import resolve
    try:
        return resolve(root)[0]
    except ValueError:
        return None


def publish(conf: str = "asv.conf.json", offline: bool = False, vendor_dir: str = ".asv/vendor",
            verdicts_dir: str | None = None, newest: int = 10, html_dir: str | None = None) -> Path:
    """The site: the dashboard (gemm.record.dashboard) as index.html, a page per series, the
    gate's verdict page, and asv's pages under asv/ (asv publish), without their Regressions
    page; returns the site's folder."""
    from .dashboard import write_site
    from .verdict_page import write
    c = json.loads(Path(conf).read_text())
    root = Path(conf).parent
    html = Path(html_dir) if html_dir else root / c.get("html_dir", "html")
    results = root / c.get("results_dir", "results")
    _clear(html, root)
    # asv reads the config's paths from where it runs: from the config's folder, as we do
    out = subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(Path(conf).resolve()),
                          "--html-dir", str((html / ASV_DIR).resolve())], cwd=root, text=True)
    if out.returncode != 0:
        raise PublishError(f"asv publish failed (exit {out.returncode})")
    without_regressions(html / ASV_DIR)
    thumbnails_to_scale(html / ASV_DIR)
    machines = sorted(p.name for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    vdir = Path(verdicts_dir) if verdicts_dir else root / "verdicts"
    write_site(html, results, vdir, machines, site_anchor(root), newest)
    write(html, vdir, machines)
    if offline:
        localize(html / ASV_DIR, Path(vendor_dir))
    return html


def main(args) -> int:
    try:
        html = publish(args.config, args.offline, args.vendor, args.verdicts,
                       getattr(args, "newest", 10))
    except PublishError as exc:
        print(f"gemm publish: {exc}", file=sys.stderr)
        return 2
    print(f"published {html / 'index.html'}" + (" (offline copy)" if args.offline else ""))
    return 0
