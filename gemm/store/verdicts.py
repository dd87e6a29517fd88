"""The gate's kept verdicts, verdicts/<machine>/<commit>.json (outside results/, which asv
walks): read back without a GPU, by the site and gemm show; a DROP row may carry gemm
explain's `explanation`. Layout: docs/gate.md ("Kept verdicts").
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..core import metrics
from ..core.problem import same_size

FORMAT = 2   # 1 keyed rows by the metric's display label ("TFLOPS"); 2 by its key ("tflops")


def path_for(root, machine: str, commit: str) -> Path:
    return Path(root) / machine / f"{commit}.json"


def save(root, machine: str, commit: str, rows: list, device: str | None = None,
         summary: dict | None = None) -> Path:
    """Write the re-measured rows (dicts) for `commit` over the rows kept for it (a narrowed
    run replaces only its own series), atomically; `summary` (the gate's report of the commit,
    which the site shows) replaces the one kept."""
    path = path_for(root, machine, commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = _old(path)
    summary = summary if summary is not None else old.get("summary")
    device = device or old.get("device")
    new = {(r["kernel"], r["size"], r["metric"]) for r in rows}
    kept = [{k: v for k, v in r.items() if k not in ("date", "device")}
            for key, r in load(root, machine, commit).items() if key not in new]
    rows = kept + list(rows)
    data = {"format": FORMAT, "commit": commit, "machine": machine, "device": device,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows,
            "summary": summary}
    _write(path, data)
    return path


def _write(path: Path, data: dict) -> None:
    """Atomic: a reader sees the old file or the new one, never a part."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _old(path: Path) -> dict:
    """The file's document ({} where there is none or it is unreadable)."""
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def load_all(root, machine: str) -> list[dict]:
    """Every kept verdict file of `machine` (the published site's verdict page)."""
    out = []
    for path in sorted((Path(root) / machine).glob("*.json")):
        data = _old(path)
        if data.get("format") in (1, FORMAT) and data.get("commit"):
            out.append(data)
    return out


def load(root, machine: str, commit: str) -> dict:
    """{(kernel, size, metric key): row} recorded for `commit`; {} if none or unreadable."""
    data = _old(path_for(root, machine, commit))
    if data.get("format") not in (1, FORMAT):
        return {}
    out = {}
    for r in data.get("rows", []):
        try:
            metric = r["metric"]
            if data["format"] == 1:
                metric = metrics.by_label(metric).key
            out[(r["kernel"], r["size"], metric)] = {**r, "metric": metric,
                                                     "date": data.get("date"),
                                                     "device": data.get("device")}
        except (KeyError, TypeError, AttributeError):
            continue
    return out


# --- explanations of confirmed drops -------------------------------------------------------

def attach_to_rows(rows, kernel: str, size: str, explanation: dict) -> int:
    """Set `explanation` on the DROP rows (dicts) of `kernel` at `size`, every metric, in
    place; returns how many."""
    n = 0
    for r in rows if isinstance(rows, list) else []:
        if (isinstance(r, dict) and r.get("verdict") == "DROP" and r.get("kernel") == kernel
                and same_size(r.get("size"), size)):
            r["explanation"] = explanation
            n += 1
    return n


def attach_explanation(root, machine: str, commit: str, kernel: str, size: str,
                       explanation: dict) -> int:
    """Attach `explanation` to the DROP rows of `kernel` at `size` in the kept file of
    `commit`, its rows and its summary's, atomically; returns how many (0: nothing written)."""
    return _attach(path_for(root, machine, commit), kernel, size, explanation, True)


def attach_to_report(path, kernel: str, size: str, explanation: dict) -> int:
    """The same for the gate's report (gemm regress --json, gemm.regress/1) at `path`."""
    return _attach(Path(path), kernel, size, explanation, False)


def _attach(path: Path, kernel: str, size: str, explanation: dict, kept: bool) -> int:
    data = _old(path)
    if kept and data.get("format") not in (1, FORMAT):
        return 0
    n = attach_to_rows(data.get("rows"), kernel, size, explanation)
    if kept:
        n += attach_to_rows((data.get("summary") or {}).get("rows"), kernel, size, explanation)
    if n:
        _write(path, data)
    return n


def explanations(rows) -> dict:
    """{(kernel, size): explanation} of the DROP rows that carry one (both metrics share it)."""
    out = {}
    for r in rows if isinstance(rows, list) else []:
        if (isinstance(r, dict) and r.get("verdict") == "DROP"
                and isinstance(r.get("explanation"), dict)):
            out.setdefault((r.get("kernel"), r.get("size")), r["explanation"])
    return out


def why(explanation: dict | None) -> str:
    """The explanation in one line: its summary, how it was made and against which commit."""
    if not isinstance(explanation, dict) or not explanation.get("summary"):
        return ""
    how = [str(explanation.get("mode") or ""),
           f"vs {str(explanation['against'])[:10]}" if explanation.get("against") else ""]
    how = ", ".join(h for h in how if h)
    return str(explanation["summary"]) + (f" ({how})" if how else "")
