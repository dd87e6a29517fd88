"""Markdown for `gemm summary`: text safe in a table cell, labels, and this
commit's results table, kernels x sizes, with the gate's marks."""
from __future__ import annotations

# the marks of the verdicts that fail the gate (red) and of the undecided (yellow)
MARK = {"DROP": "🔴", "FAILED": "🔴", "MISSING": "🔴", "UNRESOLVED": "🟡"}


def cell(text) -> str:
    """Text safe inside a markdown table cell."""
    s = "" if text is None else str(text)
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\r", " ").replace("\n", " "))


def pct(x, signed=True, nd=2) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.{nd}f} %" if signed else f"{100 * x:.{nd}f} %"


def kernel_label(name: str) -> str:
    try:
        from ..core.registry import label
        return label(name)
    except Exception:       # noqa: BLE001 -- a name alone is fine in a summary
        return name


def metric_label(key: str) -> str:
    from ..core import metrics
    try:
        return metrics.get(key).label
    except ValueError:
        return key


def size_key(size: str):
    from ..core.shapes import TRACKED
    return (0, TRACKED.index(size)) if size in TRACKED else (1, 0)


def results_table(records: list[dict], flagged: dict | None = None) -> list[str]:
    """Kernels down, sizes across (the tracked sizes in their order): 'TFLOPS (% of cuBLAS)',
    or the failure status; then a row per cuBLAS configuration (the kernels' baselines: fp32,
    tf32, ...), its median TFLOPS over the records that timed it. A (kernel, size) with a
    verdict in `flagged` gets its mark. Where several records have a (kernel, size) (a target
    the shared sweep left to its own sweep), a timed one wins."""
    from ..core import metrics, registry, stats
    flagged = flagged or {}
    best: dict[tuple[str, str], dict] = {}
    blas: dict[tuple[str, str], list[float]] = {}
    for r in records:
        if not isinstance(r, dict) or "kernel" not in r or "size" not in r:
            continue
        b = metrics.baseline_values(r)["tflops"] if r.get("baseline_time") else None
        if b is not None:
            blas.setdefault((str(r.get("baseline") or r["kernel"]), r["size"]), []).append(b)
        if r.get("role", "kernel") != "kernel" or r["kernel"] in registry.BASELINES:
            continue
        key = (r["kernel"], r["size"])
        if key not in best or metrics.timed(r) or not metrics.timed(best[key]):
            best[key] = r
    sizes = sorted({s for _, s in best} | {s for _, s in blas}, key=size_key)
    order = {b: i for i, b in enumerate(registry.BASELINES)}
    baselines = sorted({b for b, _ in blas}, key=lambda b: (order.get(b, len(order)), b))
    kernels = sorted({k for k, _ in best})
    if not kernels:
        return []

    def value(k, s):
        r = best.get((k, s))
        if r is None:
            return ""
        v = metrics.values(r)
        if v["tflops"] is not None:
            text = f"{v['tflops']:.2f} ({v['pct_of_cublas']:.0f} %)"
        elif r.get("status") == "unsupported":
            text = "unsupported"
        else:
            text = f"**{cell(str(r.get('status', '?')).upper())}**"
        mark = flagged.get((k, s))
        return f"{MARK[mark]} {text}" if mark else text

    out = ["| TFLOPS (% of cuBLAS) | " + " | ".join(sizes) + " |",
           "|---|" + "---:|" * len(sizes)]
    for k in kernels:
        out.append(f"| {cell(kernel_label(k))} | " + " | ".join(value(k, s) for s in sizes)
                   + " |")
    for b in baselines:
        out.append(f"| {cell(b)} | " + " | ".join(
            f"{stats.median(blas[b, s]):.2f}" if (b, s) in blas else "-" for s in sizes) + " |")
    return out
