"""Plain-text tables for people: the seed's benchmark table, check lines, the summary grid,
the gate's verdicts. Values come from gemm.core.metrics; nothing here measures or records."""
from __future__ import annotations

from ..core import metrics, stats


def table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A fixed-width table; `align` is one char per column, 'l' or 'r' (default: l then r)."""
    cells = [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    align = align or "l" + "r" * (len(headers) - 1)

    def fmt(r):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                         for c, w, a in zip(r, widths, align)).rstrip()

    lines = [fmt(headers), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def _f(x, nd=2, suffix=""):
    return "-" if x is None else f"{x:.{nd}f}{suffix}"


def _pct(x):
    return _f(None if x is None else 100 * x, 2, " %")


def bench_table(records: list[dict], kernel: str) -> str:
    """The seed's table for one kernel: size, ms, TFLOPS, cuBLAS ms/TFLOPS, % of cuBLAS."""
    rows = []
    for r in records:
        if r["kernel"] != kernel:
            continue
        v = metrics.values(r)
        b = metrics.baseline_values(r)
        kt = (r.get("kernel_time") or {}).get("samples_s")
        bt = (r.get("baseline_time") or {}).get("samples_s")
        rows.append([r["size"], _f(None if v["seconds"] is None else 1e3 * v["seconds"], 4),
                     _f(v["tflops"]), _f(None if b["seconds"] is None else 1e3 * b["seconds"], 4),
                     _f(b["tflops"]), _f(v["pct_of_cublas"], 1, " %"),
                     _pct(metrics.spread(kt)), _pct(metrics.spread(bt)),
                     "" if r["status"] == "ok" else r["status"]])
    return table(["size", "kernel ms", "TFLOPS", "cuBLAS ms", "cuBLAS TFLOPS", "% cuBLAS",
                  "spread", "cuBLAS spread", "status"], rows, "lrrrrrrrl")


def check_line(rec: dict) -> str:
    worst = max((c for c in rec.get("checks", []) if c["who"] == rec.get("role", "kernel")),
                key=lambda c: c["max_err_over_tol"], default=None)
    base = f"{rec['kernel']:<20} {rec['size']:>16}  "
    if rec["status"] in ("ok", "wrong", "baseline_wrong") and worst:
        return base + (f"{'PASS' if rec['status'] == 'ok' else 'FAIL'}  max err/tol "
                       f"{worst['max_err_over_tol']:.3g}  rel err {worst['rel_fro_error']:.2e}"
                       + ("" if rec["status"] == "ok" else f"  ({rec['error']})"))
    err = (rec.get("error") or "").splitlines()
    if rec["status"] == "unsupported":
        return base + f"SKIP  unsupported: {err[0][:200] if err else ''}"
    return base + f"FAIL  {rec['status']}: {err[0][:200] if err else ''}"


def summary_table(records: list[dict]) -> str:
    """Kernels down, sizes across: 'TFLOPS (% of cuBLAS)', or the failure status."""
    sizes, kernels = [], []
    for r in records:
        if r["size"] not in sizes:
            sizes.append(r["size"])
        if r["kernel"] not in kernels and r.get("role", "kernel") == "kernel":
            kernels.append(r["kernel"])
    cell, blas = {}, {}
    for r in records:
        b = metrics.baseline_values(r)["tflops"]
        if b is not None:
            blas.setdefault(r["size"], []).append(b)
        if r.get("role", "kernel") != "kernel":
            continue
        v = metrics.values(r)
        cell[(r["kernel"], r["size"])] = (f"{v['tflops']:.2f} ({v['pct_of_cublas']:.0f}%)"
                                          if v["tflops"] is not None else r["status"].upper())
    rows = [[k] + [cell.get((k, s), "") for s in sizes] for k in kernels]
    rows.append(["cuBLAS"] + [f"{stats.median(blas[s]):.2f}" if s in blas else "-" for s in sizes])
    return table(["TFLOPS (% of cuBLAS)"] + sizes, rows)


def regress_table(rows, commit: str, notes: list | None = None) -> str:
    """The gate's rows (gemm.track.gate.Row); `notes`: each row's note as shown (default its
    own)."""
    def f(x, pct=False):
        if x is None:
            return "-"
        return f"{100 * x:+.2f} %" if pct else f"{x:.4g}"

    from ..core.registry import label
    body = [[label(r.kernel), r.size, metrics.get(r.metric).label, f"{f(r.centre)} (n={r.n_hist})",
             f(r.new), f(r.change, True), f(None if r.bound is None else -r.bound, True),
             "-" if r.min_effect is None else f"{100 * r.min_effect:.1f} %",
             r.verdict, r.note if notes is None else n]
            for r, n in zip(rows, notes or [None] * len(rows))]
    head = f"gemm regress: commit {commit[:10]} against the history before it\n"
    return head + table(["kernel", "size", "metric", "history median", "new", "change",
                         "flag at", "min effect", "verdict", "note"], body, "llllrrrrll")
