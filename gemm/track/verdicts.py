"""The gate's confirmed verdicts, kept beside the results: verdicts/<machine>/<commit>.json.

When `gemm regress --record-verdicts` confirms or dismisses a flagged drop on a GPU, it writes
what it measured here. A later run of the gate without a GPU (a laptop, CI) reads them back
instead of failing the same series as unconfirmed, but only for the very value it was made for:
re-recording the commit makes its old verdicts void. The files live outside results/ because
asv walks every folder there and warns about JSON files it cannot read.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..core import metrics

FORMAT = 2   # 1 keyed rows by the metric's display label ("TFLOPS"); 2 by its key ("tflops")


def path_for(root, machine: str, commit: str) -> Path:
    return Path(root) / machine / f"{commit}.json"


def save(root, machine: str, commit: str, rows: list, device: str | None = None,
         summary: dict | None = None) -> Path:
    """Write the re-measured rows (dicts) for `commit`, over the verdicts kept for it before
    (a narrowed run replaces only its own series); atomic, other commits untouched.
    `summary`: the gate's report of the commit (counts, anchor, exit, the rows that were not
    ok), which the published site shows; it replaces the one kept before."""
    path = path_for(root, machine, commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    if summary is None:
        summary = load_summary(root, machine, commit)
    device = device or _old(path).get("device")
    new = {(r["kernel"], r["size"], r["metric"]) for r in rows}
    kept = [{k: v for k, v in r.items() if k not in ("date", "device")}
            for key, r in load(root, machine, commit).items() if key not in new]
    rows = kept + list(rows)
    data = {"format": FORMAT, "commit": commit, "machine": machine, "device": device,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows,
            "summary": summary}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)
    return path


def _old(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def load_summary(root, machine: str, commit: str) -> dict | None:
    """The gate's report kept for `commit`, if any."""
    return _old(path_for(root, machine, commit)).get("summary")


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
    path = path_for(root, machine, commit)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") not in (1, FORMAT):
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
