"""PNG plots from the recorded history: TFLOPS per commit (one figure per size) and
TFLOPS vs size for the newest commit, with cuBLAS for reference."""
from __future__ import annotations

import sys
from pathlib import Path

from .history import HistoryError, finite, load_runs, resolve_machine


def _series(runs, bench_suffix):
    out = {}
    for i, r in enumerate(runs):
        for (name, params), p in r.points.items():
            if name.endswith(bench_suffix) and finite(p.value):
                out.setdefault(params, []).append((i, p.value))
    return out


def make_plots(results: str, machine: str, out_dir: str) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, _ = load_runs(results, machine)
    if not runs:
        raise HistoryError("no runs to plot")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kern = _series(runs, "Kernels.track_tflops")
    blas = _series(runs, "Cublas.track_tflops")
    labels = [r.commit[:8] for r in runs]
    sizes = sorted({p[1] for p in kern} | {p[1] for p in blas}, key=lambda s: (len(s), s))
    files = []
    for size in sizes:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for (a, s), pts in sorted(kern.items()):
            if s == size:
                ax.plot([i for i, _ in pts], [v for _, v in pts], marker="o", label=a)
        for (a, s), pts in sorted(blas.items()):
            if s == size:
                ax.plot([i for i, _ in pts], [v for _, v in pts], "k--", marker="x", label=a)
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_ylabel("TFLOPS")
        ax.set_title(f"{machine}: TFLOPS per commit, size {size}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        f = out / f"history_{size}.png"
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)
    last = len(runs) - 1
    fig, ax = plt.subplots(figsize=(8, 4.5))
    squares = [s for s in sizes if s.isdigit()]
    for series, style in ((kern, "-"), (blas, "k--")):
        for name in sorted({p[0] for p in series}):
            xs, ys = [], []
            for s in squares:
                v = [val for i, val in series.get((name, s), []) if i == last]
                if v:
                    xs.append(int(s))
                    ys.append(v[0])
            if xs:
                order = sorted(range(len(xs)), key=xs.__getitem__)
                ax.plot([xs[i] for i in order], [ys[i] for i in order], style, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M = N = K")
    ax.set_ylabel("TFLOPS")
    ax.set_title(f"{machine}: TFLOPS vs size at {labels[last]}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    f = out / "tflops_vs_size.png"
    fig.savefig(f, dpi=110)
    plt.close(fig)
    files.append(f)
    return files


def main(args) -> int:
    results = args.results
    machine = args.machine
    try:
        files = make_plots(results, resolve_machine(results, machine), args.out)
    except HistoryError as exc:
        print(f"gemm plot: {exc}", file=sys.stderr)
        return 2
    for f in files:
        print(f)
    return 0
