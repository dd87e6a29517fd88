"""The site's first page: per machine, the newest commits x kernels x sizes as a heat map.

Each cell is one series at one commit: its % change against the previous recorded commit or
against the anchor (a toggle), coloured by what the gate decided for that series at that
commit (gemm.record.webpage.COLOURS), linked to the series' page (gemm.record.series_page).
One static file: the tables are in the HTML, a few lines of script switch machine, metric and
comparison (kept in the address's #fragment), so it works from file:// as from any host.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..core import metrics
from ..core.registry import label
from . import series_page
from .sitedata import CLASSES, GATED, Machine, load_machine
from .webpage import esc, legend, nav, page

NEWEST = 10

SCRIPT = r"""
(function(){
  var d=document, q={m:d.body.dataset.machine, metric:'tflops', cmp:'prev'};
  function read(){location.hash.slice(1).split('&').forEach(function(p){
    var kv=p.split('='); if(kv.length==2&&kv[1]) q[kv[0]]=decodeURIComponent(kv[1]);});}
  function apply(){
    d.querySelectorAll('section.machine').forEach(function(s){
      s.classList.toggle('on', s.dataset.machine===q.m);});
    d.querySelectorAll('table.heat').forEach(function(t){
      t.classList.toggle('on', t.dataset.metric===q.metric);});
    d.body.classList.toggle('cmp-anchor', q.cmp==='anchor');
    var ms=d.getElementById('machine'); if(ms) ms.value=q.m;
    d.getElementById('metric').value=q.metric;
    d.querySelectorAll('input[name=cmp]').forEach(function(r){r.checked=(r.value===q.cmp);});
  }
  function write(){location.hash='m='+encodeURIComponent(q.m)+'&metric='+q.metric+'&cmp='+q.cmp;}
  var ms=d.getElementById('machine');
  if(ms) ms.addEventListener('change', function(){q.m=ms.value; write();});
  d.getElementById('metric').addEventListener('change', function(e){q.metric=e.target.value; write();});
  d.querySelectorAll('input[name=cmp]').forEach(function(r){
    r.addEventListener('change', function(){q.cmp=r.value; write();});});
  window.addEventListener('hashchange', function(){read(); apply();});
  read(); apply();
})();
"""

STYLE = ("td.na{color:#78909c;font-style:italic;background:#fafafa}"
         "section.machine,table.heat{display:none}section.machine.on{display:block}"
         "table.heat.on{display:table}.cmp-anchor span.p,span.a{display:none}"
         ".cmp-anchor span.a{display:inline}")


def _fmt(x) -> str:
    if x is None:   # a value, but nothing to compare it with (its first, or no anchor)
        return "&ndash;"
    v = 100 * x
    return f"{v:+.1f}%" if abs(v) >= 0.05 else "0.0%"


def _when(ms: int) -> str:
    return time.strftime("%m-%d %H:%M", time.gmtime(ms / 1000)) if ms else ""


def _head(m: Machine, cols: list[str]) -> str:
    out = ["<thead><tr><th colspan=2 style='text-align:left'>series \\ commit "
           "<span class=muted>(newest first)</span></th>"]
    for i, c in enumerate(cols):
        ok = m.passed(c)
        s = (m.files.get(c) or {}).get("summary") or {}
        counts = ", ".join(f"{n} {v}" for v, n in sorted((s.get("counts") or {}).items()))
        pill = ("<span class='pill nogate'>no gate</span>" if ok is None else
                "<span class='pill pass'>pass</span>" if ok else "<span class='pill fail'>FAIL</span>")
        a = m.anchor_of(c)
        anchor = ("<span class=a><br>anchor</span>" if a == c else
                  f"<span class='a small'><br>vs {esc(a[:7])}</span>" if a else
                  "<span class='a small'><br>no anchor</span>")
        out.append(f"<th{' class=newest' if i == 0 else ''} title='{esc(counts)}'>"
                   f"<a class=mono href='gate.html#g-{c[:8]}'>{c[:7]}</a><br>"
                   f"<span class='small muted'>{_when(m.dates.get(c, 0))}</span><br>{pill}"
                   f"{anchor}</th>")
    return "".join(out) + "</tr></thead>"


def _cell(m: Machine, c: str, target: str, size: str, metric: str, baseline: bool,
          newest: bool) -> str:
    attrs = (f"data-c='{c[:8]}' " + (f"data-cublas='{esc(target)}'" if baseline
                                     else f"data-k='{esc(target)}'") + f" data-s='{esc(size)}'")
    v = m.value(c, target, size, metric, baseline)
    cls_new = " newest" if newest else ""
    if v is None:
        return f"<td class='nodata{cls_new}' {attrs}></td>"
    verdict = None if baseline else m.verdict(c, target, size, metric)
    cls = CLASSES.get(verdict, "none")
    r = None if baseline else m.row(c, target, size, metric)
    unit = metrics.get(metric).unit
    tip = f"{target} {size} at {c[:8]}: {v:.4g} {unit}; gate: {verdict or 'not judged'}"
    if r and r.get("change") is not None:
        tip += f" (history {100 * r['change']:+.2f} %)"
    why = "" if baseline else m.why(c, target, size, metric)
    if why:
        tip += f"; why: {why}"
    href = series_page.path_of(m.name, target, size) + f"#{metric}"
    return (f"<td class='v-{cls}{cls_new}' {attrs} title='{esc(tip)}'><a href='{href}'>"
            f"<span class=p>{_fmt(m.change_prev(c, target, size, metric, baseline))}</span>"
            f"<span class=a>{_fmt(m.change_anchor(c, target, size, metric, baseline))}</span>"
            f"</a></td>")


def not_applicable(m: Machine, target: str) -> str:
    """Why a kernel another machine records has no series on this one: the registry's arch
    (an sm_90a kernel on an Ampere runner), else that this machine never recorded it. Shown
    as n/a, never as a failure: the gate judges a machine against its own history only."""
    from ..core import registry
    try:
        arch = registry.get(target).arch
    except (KeyError, ValueError):
        arch = None
    why = registry.arch_support(arch, m.gpu_arch) if arch and m.gpu_arch else None
    return why or f"never recorded on {m.name}"


def heat_table(m: Machine, metric: str, cols: list[str], on: bool,
               elsewhere: tuple = ()) -> str:
    groups = [(k, False) for k in sorted({t for t, _ in m.series(metric)})]
    if metric == "tflops":   # the cuBLAS baselines: not judged, but they show a machine shift
        groups += [(b, True) for b in sorted({t for t, _ in m.series(metric, True)})]
    width = 190 + 130 + 80 * len(cols)
    out = [f"<table class='heat{' on' if on else ''}' data-metric='{metric}' "
           f"style='width:{width}px'><colgroup><col style='width:190px'>"
           f"<col style='width:130px'>" + "<col style='width:80px'>" * len(cols) + "</colgroup>",
           _head(m, cols), "<tbody>"]
    for target, baseline in groups:
        sizes = [s for t, s in m.series(metric, baseline) if t == target]
        name = label(target) if not baseline else f"{target} (cuBLAS, not judged)"
        for j, s in enumerate(sizes):
            head = (f"<th class=k rowspan={len(sizes)} title='{esc(name)}'>{esc(name)}</th>"
                    if j == 0 else "")
            href = series_page.path_of(m.name, target, s) + f"#{metric}"
            out.append(f"<tr class='{'k0' if j == 0 else ''}{' ref' if baseline else ''}'>"
                       f"{head}<th class=mono><a href='{href}'>{esc(s)}</a></th>"
                       + "".join(_cell(m, c, target, s, metric, baseline, i == 0)
                                 for i, c in enumerate(cols)) + "</tr>")
    for target in elsewhere:   # recorded by another machine only: not applicable here
        why = not_applicable(m, target)
        out.append(f"<tr class='k0 na'><th class=k title='{esc(label(target))}'>"
                   f"{esc(label(target))}</th><th class='small muted'>every size</th>"
                   f"<td class=na colspan={len(cols)} data-na='{esc(target)}' title='{esc(why)}'>"
                   f"n/a on {esc(m.name)}: {esc(why)}</td></tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _attention(m: Machine, cols: list[str]) -> str:
    """The failing verdicts among the shown commits, as links (none: a sentence saying so)."""
    items = []
    for c in cols:
        for (k, s, met), r in sorted(m.rows.get(c, {}).items()):
            cls = CLASSES.get(r.get("verdict"))
            if cls in ("DROP", "FAILED"):
                href = series_page.path_of(m.name, k, s) + f"#{met}"
                why = m.why(c, k, s, met)
                title = f" title='why: {esc(why)}'" if why else ""
                items.append(f"<a class='chip c-{cls}' href='{href}'{title}>{c[:7]} {esc(k)} "
                             f"{esc(s)} {esc(metrics.get(met).label)} {esc(r.get('verdict'))}</a>")
    if not items:
        return "<p class=small>No DROP or FAILED verdict among these commits.</p>"
    return "<p class=small>Needs attention: " + "".join(items) + "</p>"


def section(m: Machine, newest: int, on: bool, everywhere: dict | None = None) -> str:
    cols = list(reversed(m.commits[-newest:]))
    if not cols:
        return (f"<section class='machine{' on' if on else ''}' data-machine='{esc(m.name)}'>"
                f"<p>no recorded values for {esc(m.name)}</p></section>")
    anchor = f"<code>{esc(m.anchor[:8])}</code>" if m.anchor else "none"
    return (f"<section class='machine{' on' if on else ''}' data-machine='{esc(m.name)}'>"
            f"<p class=small><b>{esc(m.name)}</b>: the newest {len(cols)} of "
            f"{len(m.commits)} recorded commits; anchor {anchor}.</p>"
            + _attention(m, cols)
            + "".join(heat_table(m, k, cols, k == "tflops", tuple(sorted(
                (everywhere or {}).get(k, set()) - {t for t, _ in m.series(k)})))
                      for k in GATED) + "</section>")


def render(machines: list[Machine], newest: int = NEWEST) -> str:
    msel = ("<label>Machine <select id=machine>" + "".join(
        f"<option value='{esc(m.name)}'>{esc(m.name)}</option>" for m in machines)
        + "</select></label>") if len(machines) > 1 else ""
    controls = (f"<div class=controls>{msel}<label>Metric <select id=metric>"
                + "".join(f"<option value='{k}'>{esc(metrics.get(k).label)}</option>"
                          for k in GATED) + "</select></label><span>Change against "
                "<label><input type=radio name=cmp value=prev checked> the previous commit"
                "</label> <label><input type=radio name=cmp value=anchor> the anchor</label>"
                "</span></div>")
    intro = ("<h1>Benchmarks per commit: what changed and what the gate decided</h1>"
             "<p class=small>A cell is one series (kernel, size) at one commit: the % change of "
             "its recorded value against the series' previous recorded commit, or against the "
             "anchor the gate compared that commit with. Its colour is the gate's verdict for that "
             "series at that commit (<code>gemm regress</code>), not the size of the change: a "
             "lent GPU's speed moves values by a percent or two, and only the A/B tells code "
             "from machine. Click a cell for the series' history and the A/B's rounds.</p>")
    # the kernels any machine records: a machine without one shows it as n/a
    everywhere = {k: {t for m in machines for t, _ in m.series(k)} for k in GATED}
    body = (intro + controls + legend() + "".join(
        section(m, newest, i == 0, everywhere) for i, m in enumerate(machines)))
    html = page("gemm benchmarks: dashboard", f"<style>{STYLE}</style>" + body,
                nav("", "index.html"), SCRIPT)
    first = esc(machines[0].name) if machines else ""
    return html.replace("<body>", f"<body data-machine='{first}'>", 1)


def write_site(html_dir, results, verdicts_dir, machines: list[str], anchor: str | None = None,
               newest: int = NEWEST) -> Path:
    """index.html (the dashboard) and every series' page under html_dir; returns index.html."""
    html_dir = Path(html_dir)
    loaded = [load_machine(results, verdicts_dir, name, anchor) for name in machines]
    for m in loaded:
        targets = {(t, s, False) for k in GATED for t, s in m.series(k)} | \
                  {(t, s, True) for t, s in m.series("tflops", True)}
        for t, s, b in sorted(targets):
            p = html_dir / series_page.path_of(m.name, t, s)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(series_page.render(m, t, s, b))
    index = html_dir / "index.html"
    index.write_text(render(loaded, newest))
    return index
