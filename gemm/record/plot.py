"""PNG plots from the recorded history.

- history_<size>.png: every kernel's and cuBLAS configuration's TFLOPS per commit at one size,
  as the change against that series' own median (%), so a 1 % drop shows whatever the speed.
  Only commits with values at that size are drawn (no empty slots); the y range is the 2nd-98th
  percentile of the changes with a margin, so one spike does not flatten the rest (values off
  it are written at the edge); the floor of the gate's minimum effect for the size is shaded
  (a noisier series' own is wider: its series page shows it), and its
  DROP / UNRESOLVED verdicts (verdicts/<machine>/) ring the points they were given to.
  Each kernel has its own colour and marker; the cuBLAS configurations are grey-black, each
  with its own dash and marker.
- tflops_vs_size.png: TFLOPS vs size (the power-of-two squares) at each series' newest value.
"""
from __future__ import annotations

import sys
import zlib
from pathlib import Path

from ..core import stats
from ..core.registry import label
from ..store.history import HistoryError, resolve_machine
from .sitedata import load_machine, min_effect_for, robust_limits, size_order

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22", "#393b79", "#00a087", "#e7ba52", "#c51b7d", "#fb9a99",
           "#6a3d9a", "#b2df8a", "#8c6d31", "#7b4173"]
MARKERS = ["o", "s", "D", "^", "v", "<", ">", "p", "h", "*", "X", "P", "d", "8", "H",
           (5, 2, 0), (6, 2, 0), (7, 2, 0)]   # 16th-18th: 5- to 7-armed asterisks ((sides, style, angle))
CUBLAS = {   # configuration -> (colour, dashes, marker)
    "cublas_fp32": ("#000000", "--", "x"),
    "cublas_tf32": ("#555555", ":", "+"),
    "cublas_tf32_nk": ("#555555", "-.", "1"),
    "cublas_bf16": ("#8c6d31", (0, (6, 2, 1, 2, 1, 2)), "2"),
    "cublas_bf16_nk": ("#8c6d31", (0, (1, 1)), "3"),
}
RINGS = {"DROP": ("#d7191c", 2.2, 260), "UNRESOLVED": ("#f28e00", 1.6, 170)}


def style(name: str, kernels: list[str], baseline: bool) -> dict:
    """A series' line style: kernels by their place among all kernels, cuBLAS by name."""
    if baseline:
        extra = ["#000000", "#555555", "#8c6d31", "#7f7f7f"]
        i = zlib.crc32(name.encode())
        c, ls, mk = CUBLAS.get(name, (extra[i % 4], (0, (4, 1 + i % 3)), "x+1234"[i % 6]))
        return {"color": c, "ls": ls, "marker": mk, "lw": 1.3, "ms": 8, "mew": 1.5}
    i = kernels.index(name) if name in kernels else zlib.crc32(name.encode())
    return {"color": COLOURS[i % len(COLOURS)], "ls": "-", "marker": MARKERS[i % len(MARKERS)],
            "lw": 1.2, "ms": 5}


def at_size(m, size: str) -> tuple[list, list]:
    """The series drawn at `size` ((target, baseline)) and the commits with a value of one of
    them: a commit without values there gets no slot."""
    kernels = sorted({t for t, _ in m.series("tflops")})
    series = [(t, False) for t in kernels if (t, size) in m.series("tflops")] + \
             [(t, True) for t, s in m.series("tflops", True) if s == size]
    return series, [c for c in m.commits
                    if any(m.value(c, t, size, "tflops", b) for t, b in series)]


def history_plot(plt, m, size: str, out: Path) -> Path | None:
    kernels = sorted({t for t, _ in m.series("tflops")})
    series, cols = at_size(m, size)
    if not cols:
        return None
    x_of = {c: i for i, c in enumerate(cols)}
    band = 100 * (min_effect_for(size) or 0)
    fig, ax = plt.subplots(figsize=(13, 5.6))
    lines, all_y = [], []
    for t, b in series:
        pts = m.points(t, size, "tflops", b)
        med = stats.median([v for _, v in pts])
        ys = [100 * (v / med - 1) for _, v in pts]
        all_y += ys
        lines.append((t, b, [x_of[c] for c, _ in pts], ys, pts))
    lo, hi = robust_limits(all_y, band)
    if band:
        ax.axhspan(-band, band, color="#e3f2fd", zorder=0,
                   label=f"the gate's floor at this size (+-{band:g} %; noisier series: wider)")
    ax.axhline(0, color="grey", lw=0.8)
    rung = {v: False for v in RINGS}
    for t, b, xs, ys, pts in lines:
        st = style(t, kernels, b)
        clipped = [min(max(y, lo), hi) for y in ys]
        ax.plot(xs, clipped, color=st["color"], ls=st["ls"], lw=st["lw"], marker=st["marker"],
                ms=st["ms"], mew=st.get("mew", 1), label=f"{label(t) if not b else t} "
                f"({pts[-1][1]:.2f})")
        for x, y in zip(xs, ys):
            if y > hi or y < lo:
                ax.annotate(f"{y:+.1f}%", (x, hi if y > hi else lo), fontsize=6,
                            color=st["color"], ha="left", xytext=(5, -9 if y > hi else 4),
                            textcoords="offset points")
        if b:
            continue
        for (c, _), x, y in zip(pts, xs, clipped):
            v = m.verdict(c, t, size, "tflops")
            if v in RINGS:
                colour, lw, s = RINGS[v]
                ax.scatter([x], [y], s=s, facecolors="none", edgecolors=colour, linewidths=lw,
                           zorder=5)
                rung[v] = True
    for v, seen in rung.items():   # the verdicts' rings last in the legend
        if seen:
            colour, lw, s = RINGS[v]
            ax.scatter([], [], s=s, facecolors="none", edgecolors=colour, linewidths=lw,
                       label=f"the gate's {v}")
    ax.set_ylim(lo, hi)
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_xticks(range(len(cols)), [c[:8] for c in cols], rotation=55, ha="right", fontsize=7)
    ax.set_ylabel("TFLOPS change vs the series' median (%)")
    ax.set_title(f"{m.name}: size {size}, per recorded commit (latest TFLOPS in the legend; "
                 f"y: 2nd-98th percentile, values beyond written at the edge)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    f = out / f"history_{size}.png"
    fig.savefig(f, dpi=110)
    plt.close(fig)
    return f


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def vs_size_plot(plt, m, out: Path) -> Path:
    kernels = sorted({t for t, _ in m.series("tflops")})
    fig, ax = plt.subplots(figsize=(12, 5.6))
    for b in (False, True):
        for name in sorted({t for t, _ in m.series("tflops", b)}):
            pts = sorted((int(s), m.points(name, s, "tflops", b)[-1][1])
                         for t, s in m.series("tflops", b)
                         if t == name and s.isdigit() and _pow2(int(s)))
            if pts:
                st = style(name, kernels, b)
                ax.plot([x for x, _ in pts], [y for _, y in pts], color=st["color"],
                        ls=st["ls"], marker=st["marker"], ms=st["ms"], lw=st["lw"],
                        label=label(name) if not b else name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")   # FP32 (~50 TFLOPS) and tensor cores (~700) on one readable axis
    ax.set_xlabel("M = N = K (powers of two; the other tracked shapes are in the tables)")
    ax.set_ylabel("TFLOPS (log scale)")
    last = m.commits[-1][:8] if m.commits else "none"
    ax.set_title(f"{m.name}: TFLOPS vs size (each series' newest value; newest commit {last})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    f = out / "tflops_vs_size.png"
    fig.savefig(f, dpi=110)
    plt.close(fig)
    return f


def make_plots(results: str, machine: str, out_dir: str, verdicts_dir=None) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if verdicts_dir is None:
        verdicts_dir = Path(results).resolve().parent / "verdicts"
    m = load_machine(results, verdicts_dir, machine)
    if not m.commits:
        raise HistoryError("no runs to plot")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sizes = sorted({s for _, s in m.series("tflops")} | {s for _, s in m.series("tflops", True)},
                   key=size_order)
    files = [f for s in sizes if (f := history_plot(plt, m, s, out))]
    files.append(vs_size_plot(plt, m, out))
    return files


def main(args) -> int:
    try:
        files = make_plots(args.results, resolve_machine(args.results, args.machine), args.out,
                           getattr(args, "verdicts", None))
    except HistoryError as exc:
        print(f"gemm plot: {exc}", file=sys.stderr)
        return 2
    for f in files:
        print(f)
    return 0
