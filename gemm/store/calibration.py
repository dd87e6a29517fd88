"""A runner's calibration file, calibration/<machine>.json, which `gemm calibrate` writes: each
series' A/A noise and the detection trials. Used only if made for this asv machine, on a GPU of
the same name, under CONFIRM and under MAX_AGE_DAYS old (docs/calibration.md); the gate reads
its noise through gemm.track.calibration."""
from __future__ import annotations

import calendar
import json
import os
import time
from pathlib import Path

from ..core import metrics
from ..core.policy import CONFIRM

SCHEMA = "gemm.calibration/1"
MAX_AGE_DAYS = 180


def policy_fingerprint(policy=CONFIRM) -> str:
    """What the calibrated numbers depend on: the policy and the metric definitions."""
    return metrics.version(metrics.TFLOPS, policy)


def path_for(root, machine: str) -> Path:
    return Path(root) / f"{machine}.json"


def read(root, machine: str, gpu_name: str | None = None, policy=CONFIRM,
         now: float | None = None) -> tuple[dict | None, str]:
    """(the document, '') or (None, why it is not used)."""
    path = path_for(root, machine)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None, f"no calibration at {path} (run `gemm calibrate` on this runner)"
    except (OSError, ValueError) as exc:
        return None, f"{path} is unreadable ({exc})"
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None, f"{path} is not a {SCHEMA} file"
    if doc.get("machine") != machine:
        return None, f"{path} was made for machine {doc.get('machine')!r}, not {machine!r}"
    if gpu_name and doc.get("gpu_name") and doc["gpu_name"] != gpu_name:
        return None, f"{path} was made on a {doc['gpu_name']}, this GPU is a {gpu_name}"
    if doc.get("policy") != policy_fingerprint(policy):
        return None, (f"{path} is stale: made under another measurement policy "
                      f"({doc.get('policy')}, now {policy_fingerprint(policy)})")
    try:
        made = calendar.timegm(time.strptime(doc["date"], "%Y-%m-%dT%H:%M:%SZ"))
    except (KeyError, TypeError, ValueError):
        return None, f"{path} has no valid date"
    age = ((now if now is not None else time.time()) - made) / 86400
    if age > MAX_AGE_DAYS:
        return None, f"{path} is stale: {age:.0f} days old (at most {MAX_AGE_DAYS})"
    return doc, ""


def save(root, machine: str, doc: dict) -> Path:
    """Write atomically; the document gets schema, machine, date and policy here."""
    path = path_for(root, machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schema": SCHEMA, "machine": machine,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "policy": policy_fingerprint(), **doc}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)
    return path
