"""One page per series (kernel or cuBLAS configuration, size): for each gated metric, its
history as the % change against the anchor (the series' median where the anchor has no value),
the minimum effect as a band around 0, the gate's verdicts marked, and a table of the commits
with the A/B's rounds where one ran and, under a DROP, why it dropped (gemm explain's summary
line, where attached). Inline SVG, no script."""
from __future__ import annotations

import math
import time

from ..core import metrics
from .sitedata import CLASSES, Machine, pct, robust_limits
from .webpage import COLOURS, esc, nav, page

W, H, L, R, T, B = 1000, 270, 56, 16, 14, 60


def path_of(machine: str, target: str, size: str) -> str:
    """The page's path under the site's top folder."""
    return f"series/{machine}/{target}__{size}.html"


def _ticks(lo: float, hi: float) -> list[float]:
    span = max(hi - lo, 1e-9)
    step = next((s for s in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200)
                 if span / s <= 8), 500)
    return [i * step for i in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


def _marker(cls: str, x: float, y: float, tip: str) -> str:
    bg = COLOURS[cls][0]
    t = f"<title>{esc(tip)}</title>"
    if cls == "DROP":
        return (f"<path class='m-DROP' d='M{x - 8:.1f},{y - 6:.1f}L{x + 8:.1f},{y - 6:.1f}"
                f"L{x:.1f},{y + 8:.1f}Z' fill='{bg}' stroke='#7f0000' stroke-width=1.5>{t}</path>")
    if cls == "UNRESOLVED":
        return (f"<path class='m-UNRESOLVED' d='M{x:.1f},{y - 7:.1f}L{x + 7:.1f},{y:.1f}"
                f"L{x:.1f},{y + 7:.1f}L{x - 7:.1f},{y:.1f}Z' fill='{bg}' stroke='#a65e00'>"
                f"{t}</path>")
    if cls == "FAILED":
        return (f"<path class='m-FAILED' d='M{x - 6:.1f},{y - 6:.1f}L{x + 6:.1f},{y + 6:.1f}"
                f"M{x - 6:.1f},{y + 6:.1f}L{x + 6:.1f},{y - 6:.1f}' stroke='{bg}' "
                f"stroke-width=3>{t}</path>")
    if cls == "improved":
        return (f"<path class='m-improved' d='M{x - 6:.1f},{y + 5:.1f}L{x + 6:.1f},{y + 5:.1f}"
                f"L{x:.1f},{y - 7:.1f}Z' fill='#1a9641'>{t}</path>")
    fill = "#fff" if cls in ("noise", "none", "new") else "#37474f"
    return (f"<circle cx='{x:.1f}' cy='{y:.1f}' r=3.5 fill='{fill}' stroke='#37474f'>"
            f"{t}</circle>")


def chart(m: Machine, target: str, size: str, metric: str, baseline: bool) -> str:
    pts = m.points(target, size, metric, baseline)
    ref, ref_label = m.reference(target, size, metric, baseline)
    if not pts or not ref:
        return "<p class=muted>no values recorded</p>"
    band = 100 * (m.min_effect(target, size, metric) or 0) if not baseline else 0.0
    ys = [100 * (v / ref - 1) for _, v in pts]
    lo, hi = robust_limits(ys, band)
    n = len(pts)
    xs = [L + (W - L - R) * (i + 0.5) / n for i in range(n)]
    sy = lambda y: T + (H - T - B) * (hi - y) / (hi - lo)   # noqa: E731
    out = [f"<svg class=chart viewBox='0 0 {W} {H}' width='100%' role=img "
           f"xmlns='http://www.w3.org/2000/svg'>"]
    if band:
        out.append(f"<rect class=band x={L} y='{sy(band):.1f}' width={W - L - R} "
                   f"height='{sy(-band) - sy(band):.1f}' fill='#e3f2fd'><title>the minimum "
                   f"effect: +-{band:g} %</title></rect>")
    for t in _ticks(lo, hi):
        out.append(f"<line x1={L} x2={W - R} y1='{sy(t):.1f}' y2='{sy(t):.1f}' "
                   f"stroke='{'#90a4ae' if t == 0 else '#eceff1'}'/><text x={L - 4} "
                   f"y='{sy(t) + 4:.1f}' text-anchor=end>{f'{t:+g}' if t else '0'}</text>")
    out.append(f"<text x=12 y={T + (H - T - B) / 2:.0f} transform='rotate(-90 12 "
               f"{T + (H - T - B) / 2:.0f})' text-anchor=middle>% vs {esc(ref_label)}</text>")
    if m.anchor in dict(pts):
        i = [c for c, _ in pts].index(m.anchor)
        out.append(f"<line x1='{xs[i]:.1f}' x2='{xs[i]:.1f}' y1={T} y2={H - B} stroke='#546e7a' "
                   f"stroke-dasharray='4 3'/><text x='{xs[i] + 3:.1f}' y={T + 10}>anchor</text>")
    clamp = [min(max(y, lo), hi) for y in ys]
    out.append("<polyline fill=none stroke='#78909c' stroke-width=1.2 points='"
               + " ".join(f"{x:.1f},{sy(y):.1f}" for x, y in zip(xs, clamp)) + "'/>")
    every = max(1, math.ceil(n / 40))
    for i, ((c, v), y, x) in enumerate(zip(pts, ys, xs)):
        verdict = None if baseline else m.verdict(c, target, size, metric)
        cls = CLASSES.get(verdict, "none")
        why = "" if baseline else m.why(c, target, size, metric)
        tip = f"{c[:8]}: {v:.4g} ({y:+.2f} %), gate: {verdict or 'not judged'}" + (
            f", {m.gpus[c]}" if m.gpus.get(c) else "") + (f"; why: {why}" if why else "")
        yy = sy(min(max(y, lo), hi))
        if y > hi or y < lo:   # off the robust scale: drawn at the edge, its value written
            out.append(f"<text x='{x:.1f}' y='{yy + (12 if y < lo else -6):.1f}' "
                       f"text-anchor=middle fill='#b71c1c'>{y:+.1f}</text>")
        out.append(_marker(cls, x, yy, tip))
        if i % every == 0 or i == n - 1:
            out.append(f"<text x='{x:.1f}' y={H - B + 10} transform='rotate(-55 {x:.1f} "
                       f"{H - B + 10})' text-anchor=end class=mono>{c[:7]}</text>")
    out.append("</svg>")
    return "".join(out)


def _num(x) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) else esc(x)


def rounds(row: dict | None) -> str:
    """The A/B's comparisons and their rounds' values, as kept in the verdict row."""
    if not row or not row.get("effects"):
        return ""
    out = []
    for e in row["effects"]:
        vals = "; ".join(f"{esc(k)}: " + ", ".join(_num(x) for x in (v if isinstance(v, list)
                                                                    else [v]))
                         for k, v in (e.get("values") or {}).items())
        out.append(f"<div>vs <code>{esc(str(e.get('against') or '')[:8])}</code> "
                   f"<b>{esc(e.get('verdict') or '')}</b> {pct(e.get('change'), 2)} "
                   f"[{pct(e.get('lo'), 2)}, {pct(e.get('hi'), 2)}], "
                   f"{esc(e.get('n_ref', '?'))} vs {esc(e.get('n_new', '?'))} processes"
                   + (f"<br><span class=small>rounds: {vals}</span>" if vals else "") + "</div>")
    return "".join(out)


def table(m: Machine, target: str, size: str, metric: str, baseline: bool) -> str:
    ref, ref_label = m.reference(target, size, metric, baseline)
    head = ("<table class=list><colgroup><col style='width:90px'><col style='width:130px'>"
            "<col style='width:80px'><col style='width:80px'><col style='width:80px'>"
            "<col style='width:110px'><col style='width:150px'><col></colgroup><tr>"
            "<th>commit</th><th>date</th>"
            f"<th>value</th><th>vs previous</th><th>vs {esc(ref_label)}</th><th>gate</th>"
            "<th>GPU</th><th>the gate's note, why it dropped and the A/B's rounds</th></tr>")
    rows = []
    for c, v in reversed(m.points(target, size, metric, baseline)):
        verdict = None if baseline else m.verdict(c, target, size, metric)
        r = None if baseline else m.row(c, target, size, metric)
        cls = CLASSES.get(verdict, "none")
        note = (f"<details><summary>{esc((r.get('note') or '')[:90])}</summary>"
                f"{esc(r['note'])}</details>" if r and r.get("note") else "")
        hist = f"history {pct(r.get('change'), 2)}; " if r and r.get("change") is not None else ""
        why = "" if baseline else m.why(c, target, size, metric)
        why = f"<div class=why><b>why:</b> {esc(why)}</div>" if why else ""
        date = time.strftime("%Y-%m-%d %H:%M", time.gmtime(m.dates.get(c, 0) / 1000))
        rows.append(f"<tr id='c-{c[:8]}'><td><code>{c[:8]}</code></td><td>{date}</td>"
                    f"<td>{v:.4g}</td><td>{pct(m.change_prev(c, target, size, metric, baseline), 2)}"
                    f"</td><td>{pct(v / ref - 1, 2) if ref else ''}</td>"
                    f"<td class='c-{cls}'>{esc(verdict or 'not judged')}</td>"
                    f"<td class='small mono'>{esc(m.gpus.get(c) or '')}</td>"
                    f"<td><span class=small>{esc(hist)}</span>{note}{why}{rounds(r)}</td></tr>")
    return head + "".join(rows) + "</table>"


def render(m: Machine, target: str, size: str, baseline: bool = False) -> str:
    keys = ("tflops",) if baseline else ("tflops", "pct_of_cublas")
    parts = [f"<h1>{esc(target)} at {esc(size)} <span class=muted>on {esc(m.name)}</span></h1>",
             "<p class=small>" + " | ".join(f"<a href='#{k}'>{esc(metrics.get(k).label)}</a>"
                                            for k in keys) +
             (" | a cuBLAS configuration: the kernels' baseline, not judged by the gate"
              if baseline else "") + "</p>"]
    for k in keys:
        me = None if baseline else m.min_effect(target, size, k)
        parts.append(
            f"<section id='{k}'><h2>{esc(metrics.get(k).label)}</h2><p class=small>Each "
            f"commit's value as the % change against {esc(m.reference(target, size, k, baseline)[1])}"
            + (f"; shaded: the minimum effect the gate must catch, &plusmn;{100 * me:g} %" if me
               else "") + ". Markers: red &#9660; DROP, amber &#9670; UNRESOLVED, green &#9650; "
            "improved, &#10005; FAILED, hollow: noise or not judged. Values off the robust scale "
            "are drawn at its edge with their change written. Under a DROP, <b>why</b>: what "
            "<code>gemm explain</code> found changed in the code (builds, launch, and where it "
            "ran on the GPU, counters).</p>"
            + chart(m, target, size, k, baseline) + table(m, target, size, k, baseline)
            + "</section>")
    return page(f"{target} {size} on {m.name}", "".join(parts), nav("../../"))
