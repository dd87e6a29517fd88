"""The gate's verdicts on the published site: gate.html, one row per judged commit.

asv's own Regressions page knows only the recorded values, and a drop there may be the GPU a
run happened to get; the site leaves it out (gemm.record.publish). This page shows what
`gemm regress` decided per commit, from the kept verdict files (gemm.store.verdicts): whether
the commit passed, how many series got each verdict, the anchor it was also compared with,
and, folded, every series that was not ok (confirmed drops and failures unfolded, a DROP with
why it dropped where gemm explain's explanation is attached), each linked to its page on the
site (gemm.record.series_page).
"""
from __future__ import annotations

import html
from pathlib import Path

from ..core import metrics
from ..store import verdicts
from ..track.decision import signed_pct
from ..track.gate import GateConfig
from . import series_page, unresolved
from .sitedata import CLASSES
from .webpage import esc, nav, page

LINK = '<a href="gate.html">Gate verdicts</a>'
ORDER = ("DROP", "FAILED", "MISSING", "UNRESOLVED", "noise", "improved", "new", "skipped")


def _pct(x) -> str:
    return "" if x is None else signed_pct(x) + " %"


def _item(r: dict) -> str:
    label = metrics.get(r["metric"]).label if r.get("metric") in metrics.BY_KEY else r.get("metric")
    ab = "".join(f" A/B vs {str(e.get('against') or '')[:8]} {_pct(e.get('change'))} "
                 f"[{_pct(e.get('lo'))}, {_pct(e.get('hi'))}]"
                 for e in (r.get("effects") or []) if e.get("change") is not None)
    hist = f" history {_pct(r.get('change'))}" if r.get("change") is not None else ""
    anchor = f" anchor {_pct(r.get('anchor_change'))}" if r.get("anchor_change") is not None else ""
    return html.escape(f"{r['kernel']} {r['size']} {label}:{hist}{anchor}{ab}")


def _counts(counts: dict) -> str:
    keys = sorted(counts, key=lambda v: (ORDER.index(v) if v in ORDER else len(ORDER), v))
    return " ".join(f"<span class='chip c-{CLASSES.get(v, 'none')}'>{n} {esc(v)}</span>"
                    for v in keys for n in [counts[v]])


def _why(r: dict) -> str:
    line = verdicts.why(r.get("explanation")) if r.get("verdict") == "DROP" else ""
    return f"<div class=why><b>why:</b> {esc(line)}</div>" if line else ""


def _fails_on(rows: list[dict], carry: int = GateConfig.carry_commits) -> str:
    """What failed the commit, counted: confirmed drops, failures, missing series, and the
    series UNRESOLVED at `carry` commits running (those never measured here said apart)."""
    parts = [f"{n} {v}" for v in ("DROP", "FAILED", "MISSING")
             if (n := sum(r.get("verdict") == v for r in rows))]
    stuck = [r for r in rows if unresolved.fails(r, {"carry_commits": carry})]
    if stuck:
        never = sum(unresolved.kind(r)[1] is False and not r.get("effects") for r in stuck)
        parts.append(f"{len(stuck)} UNRESOLVED at {carry} or more commits running"
                     + (f" ({never} not measured here: out of the A/B's time)" if never else ""))
    return f"<div class='small muted'>fails on {esc('; '.join(parts))}</div>" if parts else ""


def _group(machine: str, verdict: str, rows: list[dict]) -> str:
    items = "".join(
        f"<li><a href='{series_page.path_of(machine, r['kernel'], r['size'])}#{esc(r['metric'])}'>"
        f"{_item(r)}</a>{_why(r)}</li>" for r in rows)
    cls = CLASSES.get(verdict, "none")
    return (f"<details{' open' if cls in ('DROP', 'FAILED') else ''}><summary>"
            f"<span class='chip c-{cls}'>{len(rows)} {esc(verdict)}</span></summary>"
            f"<ul class=small>{items}</ul></details>")


def rows_html(files: list[dict], machine: str = "") -> str:
    out = []
    for f in sorted(files, key=lambda d: d.get("date") or "", reverse=True):
        s = f.get("summary") or {}
        rows = s.get("rows") or f.get("rows") or []
        by: dict = {}
        for r in rows:
            if r.get("verdict") and r.get("verdict") != "ok" and "kernel" in r:
                by.setdefault(r["verdict"], []).append(r)
        failing = s.get("exit", 1 if {"DROP", "FAILED", "MISSING"} & set(by) else 0)
        pill = "<span class='pill fail'>FAIL</span>" if failing else \
            "<span class='pill pass'>pass</span>"
        counts = s.get("counts") or {v: len(rs) for v, rs in by.items()}
        groups = "".join(_group(machine, v, by[v]) for v in
                         sorted(by, key=lambda v: ORDER.index(v) if v in ORDER else len(ORDER)))
        out.append(
            f"<tr id='g-{esc(f['commit'][:8])}'><td><code>{esc(f['commit'][:10])}</code><br>"
            f"<span class=muted>{esc((f.get('date') or '')[:16].replace('T', ' '))}</span></td>"
            f"<td>{pill}</td><td>{_counts(counts)}{_fails_on(rows) if failing else ''}</td>"
            f"<td><code>{esc((s.get('anchor') or '')[:10]) or '-'}</code></td>"
            f"<td>{groups or '<span class=muted>every series ok</span>'}</td></tr>")
    return "\n".join(out)


def write(html_dir, verdicts_dir, machines: list[str]) -> Path:
    """Write gate.html (and link it from index.html if that page lacks the link)."""
    html_dir = Path(html_dir)
    parts = ["<h1>What the regression gate decided, per commit</h1>"
             "<p class=small>Every candidate drop (a screen against the recent history and the "
             "anchor) is decided by an A/B of the commit's code against the reference code on "
             "one GPU. <b>DROP</b>: the code is slower. <b>noise</b>: both codes measured alike "
             "here, so the recorded drop was the machine. <b>UNRESOLVED</b>: the A/B's rounds "
             "could not decide within its budget. Intervals are the A/B's, at the gate's "
             "family-wise level. Click a series for its history and the A/B's rounds.</p>"]
    for m in machines:
        files = verdicts.load_all(verdicts_dir, m)
        parts.append(f"<h2>{esc(m)}</h2>")
        if not files:
            parts.append("<p class=muted>no verdicts kept for this machine yet</p>")
            continue
        parts.append("<table class=list><colgroup><col style='width:110px'>"
                     "<col style='width:60px'><col style='width:250px'><col style='width:100px'>"
                     "<col></colgroup><tr><th>commit</th><th>gate</th><th>verdicts</th>"
                     "<th>anchor</th><th>series that were not ok</th></tr>"
                     + rows_html(files, m) + "</table>")
    page_path = html_dir / "gate.html"
    page_path.write_text(page("Gate verdicts", "".join(parts), nav("", "gate.html")))
    index = html_dir / "index.html"
    if index.is_file():
        text = index.read_text()
        if 'href="gate.html"' not in text and "href='gate.html'" not in text:
            text = text.replace("<body>", f"<body><p>{LINK}</p>", 1)
            index.write_text(text)
    return page_path
