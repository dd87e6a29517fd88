"""PNG plots from the recorded history.

- history_<size>.png: every kernel's TFLOPS per commit at one size, drawn as the change against
  that series' own median (in %), so a 1 % drop shows whatever the kernel's speed; the legend
  gives each series' latest TFLOPS.
- tflops_vs_size.png: TFLOPS vs size (the power-of-two squares) at the newest commit, every
  kernel with cuBLAS drawn in (dashed).
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..core import stats
from ..core.registry import label
from ..track.history import HistoryError, finite, load_runs, resolve_machine


def _series(runs, metric: str, baseline: bool) -> dict:
    """{(target, size): [(run index, value)]} for one metric."""
    out: dict = {}
    for i, r in enumerate(runs):
        for key, p in r.points.items():
            if key.metric == metric and key.baseline == baseline and finite(p.value):
                out.setdefault((key.target, key.size), []).append((i, p.value))
    return out


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _size_order(s: str):
    dims = [int(x) for x in s.split("x")]
    return (len(dims) > 1, dims[0] if len(dims) == 1 else dims)


def make_plots(results: str, machine: str, out_dir: str) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, _ = load_runs(results, machine)
    if not runs:
        raise HistoryError("no runs to plot")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kern = _series(runs, "tflops", baseline=False)
    blas = _series(runs, "tflops", baseline=True)
    labels = [r.commit[:8] for r in runs]
    sizes = sorted({s for _, s in kern} | {s for _, s in blas}, key=_size_order)
    files = []
    for size in sizes:
        fig, ax = plt.subplots(figsize=(9, 4.8))
        for (name, s), pts in sorted(kern.items()):
            if s != size:
                continue
            med = stats.median([v for _, v in pts])
            ax.plot([i for i, _ in pts], [100 * (v / med - 1) for _, v in pts], marker="o",
                    label=f"{label(name)} ({pts[-1][1]:.2f})")
        for (name, s), pts in sorted(blas.items()):
            if s == size:
                med = stats.median([v for _, v in pts])
                ax.plot([i for i, _ in pts], [100 * (v / med - 1) for _, v in pts], "k--",
                        marker="x", label=f"{name} ({pts[-1][1]:.2f})")
        ax.axhline(0, color="grey", lw=0.8)
        for y in (-1, 1):
            ax.axhline(y, color="grey", lw=0.5, ls=":")
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_ylabel("TFLOPS change vs the series' median (%)")
        ax.set_title(f"{machine}: size {size}, per commit (latest TFLOPS in the legend; "
                     f"dotted: +-1 %)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        f = out / f"history_{size}.png"
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    files.append(_vs_size(plt, kern, blas, machine, labels[-1], out))
    return files


def _vs_size(plt, kern, blas, machine, last, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 5))
    for series, style in ((kern, "-"), (blas, "k--")):
        for name in sorted({n for n, _ in series}):
            pts = sorted((int(s), series[(name, s)][-1][1]) for n, s in series
                         if n == name and s.isdigit() and _pow2(int(s)))
            if pts:
                ax.plot([x for x, _ in pts], [y for _, y in pts], style, marker="o",
                        label=label(name))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")   # FP32 (~50 TFLOPS) and tensor cores (~700) on one readable axis
    ax.set_xlabel("M = N = K (powers of two; the other tracked shapes are in the tables)")
    ax.set_ylabel("TFLOPS (log scale)")
    ax.set_title(f"{machine}: TFLOPS vs size (latest recorded, newest commit {last})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    f = out / "tflops_vs_size.png"
    fig.savefig(f, dpi=110)
    plt.close(fig)
    return f


def main(args) -> int:
    try:
        files = make_plots(args.results, resolve_machine(args.results, args.machine), args.out)
    except HistoryError as exc:
        print(f"gemm plot: {exc}", file=sys.stderr)
        return 2
    for f in files:
        print(f)
    return 0
