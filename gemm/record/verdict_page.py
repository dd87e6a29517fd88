"""The gate's verdicts on the published site: gate.html beside asv's pages, linked from them.

asv's own Regressions page knows only the recorded values, and a drop there may be the GPU a
run happened to get. This page shows what `gemm regress` decided per commit, from the kept
verdict files (gemm.track.verdicts): confirmed drops (the A/B measured the code slower),
candidates dismissed as machine shifts (the A/B measured both codes alike), unresolved ones,
improvements, and the anchor each commit was also compared with.
"""
from __future__ import annotations

import html
from pathlib import Path

from ..core import metrics
from ..track import verdicts

LINK = '<a href="gate.html">Gate verdicts</a>'
STYLE = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;font-size:90%}"
         ".FAIL{background:#fdd}.pass{background:#dfd}.muted{color:#777}")


def _pct(x) -> str:
    return "" if x is None else f"{100 * x:+.2f} %"


def _item(r: dict) -> str:
    label = metrics.get(r["metric"]).label if r.get("metric") in metrics.BY_KEY else r.get("metric")
    ab = "".join(f" A/B vs {str(e.get('against') or '')[:8]} {_pct(e.get('change'))} "
                 f"[{_pct(e.get('lo'))}, {_pct(e.get('hi'))}]"
                 for e in (r.get("effects") or []) if e.get("change") is not None)
    hist = f" history {_pct(r.get('change'))}" if r.get("change") is not None else ""
    anchor = f" anchor {_pct(r.get('anchor_change'))}" if r.get("anchor_change") is not None else ""
    return html.escape(f"{r['kernel']} {r['size']} {label}:{hist}{anchor}{ab}")


def rows_html(files: list[dict]) -> str:
    out = []
    for f in sorted(files, key=lambda d: d.get("date") or "", reverse=True):
        s = f.get("summary") or {}
        rows = s.get("rows") or f.get("rows") or []
        by = {v: [r for r in rows if r.get("verdict") == v]
              for v in ("DROP", "noise", "UNRESOLVED", "improved", "FAILED", "MISSING")}
        failing = s.get("exit", 1 if by["DROP"] or by["FAILED"] or by["MISSING"] else 0)
        cls, word = ("FAIL", "FAIL") if failing else ("pass", "pass")
        cell = lambda v: "<br>".join(_item(r) for r in by[v]) or '<span class="muted">none</span>'  # noqa: E731
        counts = ", ".join(f"{n} {v}" for v, n in sorted((s.get("counts") or {}).items()))
        out.append(
            f'<tr><td><code>{html.escape(f["commit"][:10])}</code><br>'
            f'<span class="muted">{html.escape((f.get("date") or "")[:10])}</span></td>'
            f'<td class="{cls}">{word}<br><span class="muted">{html.escape(counts)}</span></td>'
            f"<td>{cell('DROP')}{'<br>' + cell('FAILED') if by['FAILED'] else ''}</td>"
            f"<td>{cell('noise')}</td><td>{cell('UNRESOLVED')}</td><td>{cell('improved')}</td>"
            f'<td><code>{html.escape((s.get("anchor") or "")[:10])}</code></td></tr>')
    return "\n".join(out)


def write(html_dir, verdicts_dir, machines: list[str]) -> Path:
    """Write gate.html and link it from asv's pages; returns its path."""
    html_dir = Path(html_dir)
    parts = [f"<!doctype html><meta charset=utf-8><title>Gate verdicts</title>"
             f"<style>{STYLE}</style><p><a href='index.html'>&larr; benchmark history</a></p>"
             "<h1>What the regression gate decided, per commit</h1>"
             "<p>Every candidate drop (a screen against the recent history and the anchor) is "
             "decided by an A/B of the commit's code against the reference code on one GPU. "
             "<b>Confirmed drops</b>: the code is slower. <b>Dismissed</b>: both codes measured "
             "alike here, so the recorded drop was the machine. Intervals are the A/B's, at the "
             "gate's family-wise level.</p>"]
    for m in machines:
        files = verdicts.load_all(verdicts_dir, m)
        parts.append(f"<h2>{html.escape(m)}</h2>")
        if not files:
            parts.append("<p class=muted>no verdicts kept for this machine yet</p>")
            continue
        parts.append("<table><tr><th>commit</th><th>gate</th><th>confirmed drops</th>"
                     "<th>dismissed (machine)</th><th>unresolved</th><th>improved</th>"
                     "<th>anchor</th></tr>" + rows_html(files) + "</table>")
    page = html_dir / "gate.html"
    page.write_text("\n".join(parts))
    index = html_dir / "index.html"
    if index.is_file():
        text = index.read_text()
        if LINK not in text:
            # asv's navbar: after its Regressions item; else at the top of the body
            nav = '<li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li>'
            if nav in text:
                text = text.replace(nav, nav + f'\n\t<li id="nav-li-gate">{LINK}</li>', 1)
            else:
                text = text.replace("<body>", f"<body><p>{LINK}</p>", 1)
            index.write_text(text)
    return page
