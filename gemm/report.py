"""Plain-text tables for people: the seed's benchmark table, check lines, gate verdicts."""
from __future__ import annotations

from .sweep import derived


def table(headers: list[str], rows: list[list], align: str | None = None) -> str:
    """A fixed-width table; `align` is one char per column, 'l' or 'r' (default: r)."""
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


def bench_table(records: list[dict], kernel: str) -> str:
    """The seed's table for one kernel: size, ms, TFLOPS, cuBLAS ms/TFLOPS, % of cuBLAS."""
    rows = []
    for r in records:
        if r["kernel"] != kernel:
            continue
        d = derived(r)
        status = r["status"] if r["status"] != "ok" else ""
        rows.append([r["size"], _f(d["ms"], 4), _f(d["tflops"]), _f(d["baseline_ms"], 4),
                     _f(d["baseline_tflops"]), _f(d["pct"], 1, " %"),
                     _f(None if d["spread"] is None else 100 * d["spread"], 2, " %"),
                     _f(None if d["baseline_spread"] is None else 100 * d["baseline_spread"], 2, " %"),
                     status])
    return table(["size", "kernel ms", "TFLOPS", "cuBLAS ms", "cuBLAS TFLOPS", "% cuBLAS",
                  "spread", "cuBLAS spread", "status"], rows, "lrrrrrrrl")


def check_line(rec: dict) -> str:
    worst = max((c for c in rec.get("checks", []) if c["who"] == "kernel"),
                key=lambda c: c["max_err_over_tol"], default=None)
    base = f"{rec['kernel']:<20} {rec['size']:>16}  "
    if rec["status"] in ("ok", "wrong", "baseline_wrong") and worst:
        return base + (f"{'PASS' if rec['status'] == 'ok' else 'FAIL'}  max err/tol "
                       f"{worst['max_err_over_tol']:.3g}  rel err {worst['rel_fro_error']:.2e}"
                       + ("" if rec["status"] == "ok" else f"  ({rec['error']})"))
    return base + f"FAIL  {rec['status']}: {(rec.get('error') or '').splitlines()[0][:200] if rec.get('error') else ''}"


def progress_line(done: int, total: int, rec: dict) -> str:
    d = derived(rec)
    what = (f"{d['tflops']:.2f} TFLOPS ({d['pct']:.1f} % of cuBLAS)" if d["tflops"] is not None
            else rec["status"])
    return f"[{done}/{total}] {rec['kernel']} {rec['size']}: {what}"


def summary_table(records: list[dict]) -> str:
    """Kernels down, sizes across: 'TFLOPS (% of cuBLAS)', or the failure status."""
    sizes, kernels = [], []
    for r in records:
        if r["size"] not in sizes:
            sizes.append(r["size"])
        if r["kernel"] not in kernels:
            kernels.append(r["kernel"])
    cell = {}
    blas = {}
    for r in records:
        d = derived(r)
        cell[(r["kernel"], r["size"])] = (f"{d['tflops']:.2f} ({d['pct']:.0f}%)"
                                          if d["tflops"] is not None else r["status"].upper())
        if d["baseline_tflops"] is not None:
            blas.setdefault(r["size"], []).append(d["baseline_tflops"])
    rows = [[k] + [cell.get((k, s), "") for s in sizes] for k in kernels]
    from .stats import median
    rows.append(["cuBLAS"] + [f"{median(blas[s]):.2f}" if s in blas else "-" for s in sizes])
    return table(["TFLOPS (% of cuBLAS)"] + sizes, rows)
