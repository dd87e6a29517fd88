"""Publish the history: asv's HTML (asv publish) and, optionally, a copy that works offline.

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


def publish(conf: str = "asv.conf.json", offline: bool = False, vendor_dir: str = ".asv/vendor",
            verdicts_dir: str | None = None) -> Path:
    """asv publish, then the gate's verdict page (gemm.record.verdict_page) beside it."""
    from .verdict_page import write
    out = subprocess.run([sys.executable, "-m", "asv", "publish", "--config", conf], text=True)
    if out.returncode != 0:
        raise PublishError(f"asv publish failed (exit {out.returncode})")
    c = json.loads(Path(conf).read_text())
    root = Path(conf).parent
    html = root / c.get("html_dir", "html")
    results = root / c.get("results_dir", "results")
    machines = sorted(p.name for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    write(html, Path(verdicts_dir) if verdicts_dir else root / "verdicts", machines)
    if offline:
        localize(html, Path(vendor_dir))
    return html


def main(args) -> int:
    try:
        html = publish(args.config, args.offline, args.vendor, args.verdicts)
    except PublishError as exc:
        print(f"gemm publish: {exc}", file=sys.stderr)
        return 2
    print(f"published {html / 'index.html'}" + (" (offline copy)" if args.offline else ""))
    return 0
