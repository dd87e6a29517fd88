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


def save(root, machine: str, commit: str, rows: list, device: str | None = None) -> Path:
    """Write the re-measured rows (dicts) for `commit`, over the verdicts kept for it before
    (a narrowed run replaces only its own series); atomic, other commits untouched."""
    path = path_for(root, machine, commit)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = {(r["kernel"], r["size"], r["metric"]) for r in rows}
    kept = [{k: v for k, v in r.items() if k not in ("date", "device")}
            for key, r in load(root, machine, commit).items() if key not in new]
    rows = kept + list(rows)
    data = {"format": FORMAT, "commit": commit, "machine": machine, "device": device,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)
    return path


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
