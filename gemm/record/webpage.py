"""The published site's shared page shell: one stylesheet, the verdict colours, no external
file (every page works from file:// and from any static host)."""
from __future__ import annotations

import html

# verdict class -> (fill, text colour, legend words)
COLOURS = {
    "DROP": ("#d7191c", "#fff", "DROP: the A/B measured the code slower"),
    "FAILED": ("#7b3294", "#fff", "FAILED / MISSING: the kernel failed or was not measured"),
    "UNRESOLVED": ("#fdae61", "#000", "UNRESOLVED: the A/B could not decide"),
    "improved": ("#a6d96a", "#000", "improved"),
    "noise": ("#e6e6e6", "#555", "noise: flagged, the A/B found both codes alike"),
    "ok": ("#f2f2f2", "#555", "ok"),
    "new": ("#fff", "#555", "new: no history yet"),
    "none": ("#fff", "#999", "not judged by the gate"),
}

CSS = """
*{box-sizing:border-box}
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#222;background:#fff}
header{background:#263238;color:#eee;padding:8px 16px;display:flex;flex-wrap:wrap;gap:6px 18px;align-items:center}
header a{color:#9cd1ff}header b{font-size:16px}
main{padding:12px 16px;max-width:1380px}
a{color:#0b62a4}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.muted{color:#777}.small{font-size:12px}
.controls{display:flex;flex-wrap:wrap;gap:8px 20px;align-items:center;margin:6px 0 10px}
.controls label{white-space:nowrap}
.legend{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:12px;margin:4px 0 10px}
.legend span.sw{display:inline-block;width:28px;height:14px;border:1px solid #bbb;vertical-align:middle;margin-right:4px}
table{border-collapse:collapse}
table.heat{table-layout:fixed}
table.heat th,table.heat td{border:1px solid #fff;padding:0;height:20px;font-size:12px}
table.heat th{background:#fafafa;font-weight:600;text-align:left;padding:0 6px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
table.heat thead th{vertical-align:bottom;text-align:center;padding:2px;font-weight:normal;line-height:1.25;position:sticky;top:0;z-index:1;background:#fafafa;border-bottom:1px solid #cfd8dc}
table.heat td a{display:block;text-decoration:none;color:inherit;text-align:right;padding:0 5px;height:20px;line-height:20px;font-family:ui-monospace,Menlo,Consolas,monospace}
table.heat tr.k0 th.k{border-top:2px solid #90a4ae}
table.heat tr.k0 td,table.heat tr.k0 th{border-top:2px solid #90a4ae}
table.heat td.newest{border-left:2px solid #263238}
td.v-DROP a{font-weight:700;outline:2px solid #7f0000;outline-offset:-2px}
td.v-FAILED a{font-weight:700}
td.v-none a{color:#999}
td.nodata{background:#fff}
.pill{display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;line-height:16px}
.pass{background:#dff0d8;color:#2b662b}.fail{background:#d7191c;color:#fff}.nogate{background:#eee;color:#777}
table.list{width:100%;table-layout:fixed}
table.list th,table.list td{border:1px solid #ddd;padding:3px 6px;vertical-align:top;font-size:12px;overflow-wrap:anywhere}
table.list th{background:#f5f5f5;text-align:left}
details summary{cursor:pointer}
svg text{font:11px system-ui,sans-serif}
.why{margin:2px 0;padding:1px 5px;background:#fdecea;border-left:3px solid #d7191c}
.chip{display:inline-block;margin:1px 2px;padding:0 5px;border-radius:3px;font-size:12px;text-decoration:none}
"""

VERDICT_CSS = "".join(f"td.v-{k},.c-{k}{{background:{bg};color:{fg}}}"
                      for k, (bg, fg, _) in COLOURS.items())


def esc(s) -> str:
    return html.escape(str(s), quote=True)


def page(title: str, body: str, nav: str = "", script: str = "") -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>{esc(title)}</title><style>{CSS}{VERDICT_CSS}</style></head>"
            f"<body><header>{nav}</header><main>{body}</main>"
            + (f"<script>{script}</script>" if script else "") + "</body></html>")


def nav(root: str, here: str = "") -> str:
    """The site's links; `root` the way from the page to the site's top folder."""
    items = [("index.html", "Dashboard"), ("gate.html", "Gate verdicts"),
             ("asv/index.html", "asv's graphs")]
    links = " ".join(f"<b>{esc(t)}</b>" if h == here else f"<a href='{root}{h}'>{esc(t)}</a>"
                     for h, t in items)
    return f"<span>gemm benchmarks</span> {links}"


def legend(classes=("DROP", "FAILED", "UNRESOLVED", "improved", "noise", "ok", "new",
                    "none")) -> str:
    return "<div class=legend>" + "".join(
        f"<span><span class='sw c-{c}'></span>{esc(COLOURS[c][2])}</span>" for c in classes) + \
        "<span><span class='sw' style='border-style:dashed'></span>blank: no value</span></div>"
