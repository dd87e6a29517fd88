"""A runner's calibration/<machine>.json as the gate reads it: each series' A/A noise
(decision.Noise), used only if made for this asv machine, on a GPU of the same name, under
CONFIRM and under MAX_AGE_DAYS old (docs/calibration.md)."""
from __future__ import annotations

import calendar
import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..core import metrics
from ..core.policy import CONFIRM
from ..core.problem import Problem
from .decision import TAIL_RATIO, Noise, trimmed_noise

SCHEMA = "gemm.calibration/1"
MAX_AGE_DAYS = 180


def policy_fingerprint(policy=CONFIRM) -> str:
    """What the calibrated numbers depend on: the policy and the metric definitions."""
    return metrics.version(metrics.TFLOPS, policy)


def path_for(root, machine: str) -> Path:
    return Path(root) / f"{machine}.json"


@dataclass
class Calibration:
    machine: str
    gpu_name: str | None
    date: str
    noise: dict = field(default_factory=dict)      # (kernel, size, metric) -> Noise
    doc: dict = field(default_factory=dict)
    _robust: dict = field(default_factory=dict, repr=False, compare=False)   # computed once

    def prior(self, kernel: str, size: str, metric: str) -> Noise | None:
        """The series' own noise, else the worst near it of its precision's kernels, or of every
        kernel where those were calibrated farther off (borrowed)."""
        own = self.noise.get((kernel, size, metric))
        if own is not None:
            return own
        mine = precision_of(kernel)
        alike = {key: n for key, n in self.noise.items()
                 if mine is not None and precision_of(key[0]) == mine}
        got = _worst_near(alike, size, metric)
        if _near(alike, size, metric) != _near(self.noise, size, metric):
            got = _worse(got, _worst_near(self.noise, size, metric))
        return None if got is None else replace(got, borrowed=True)

    def _aa_values(self, key) -> list[list[float]]:
        """The series' A/A values, one list per GPU (a pooled row's parts)."""
        row = next((r for r in self.doc.get("noise", [])
                    if (r.get("kernel"), r.get("size"), r.get("metric")) == key), None)
        if row is None:
            return []
        parts = [p.get("values") or [] for p in row.get("parts") or []] or [row.get("values") or []]
        return [[v for v in vs if v] for vs in parts]

    def robust_prior(self, kernel: str, size: str, metric: str) -> Noise | None:
        """The series' own trimmed-mean prior where it is heavy-tailed (TAIL_RATIO), else None."""
        key = (kernel, size, metric)
        if key not in self._robust:
            got = trimmed_noise(self._aa_values(key)) if key in self.noise else None
            heavy = got is not None and self.noise[key].sigma > TAIL_RATIO * got[1]
            self._robust[key] = got[0] if heavy else None
        return self._robust[key]

    def heavy_tailed(self, kernel: str, size: str, metric: str) -> bool:
        return self.robust_prior(kernel, size, metric) is not None

    def borrowed(self, kernel: str, size: str, metric: str) -> bool:
        return (kernel, size, metric) not in self.noise and self.prior(kernel, size, metric) is not None


def precision_of(kernel: str) -> str | None:
    """The registry's precision of a kernel (None for one it does not know)."""
    from ..core import registry
    try:
        return registry.get(kernel).precision
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


def _near(noise: dict, size: str, metric: str) -> list[str]:
    sizes = {s for (_, s, m) in noise if m == metric}
    return [size] if size in sizes else bracketing_sizes(size, sizes)


def _worst_near(noise: dict, size: str, metric: str) -> Noise | None:
    near = _near(noise, size, metric)
    return _worse(*(n for (k, s, m), n in noise.items() if s in near and m == metric))


def _worse(*ns: Noise | None) -> Noise | None:
    """The largest sigma with the fewest dof (None where there is none)."""
    ns = [n for n in ns if n is not None]
    return Noise(max(n.sigma for n in ns), min(n.dof for n in ns)) if ns else None


def bracketing_sizes(size: str, sizes) -> list[str]:
    """Of `sizes` in `size`'s class, the nearest not above and not below it in M*N*K."""
    p = Problem.parse(size)
    vols = {s: Problem.parse(s).flops for s in sizes if Problem.parse(s).size_class == p.size_class}
    below = max((s for s in vols if vols[s] <= p.flops), key=vols.get, default=None)
    above = min((s for s in vols if vols[s] >= p.flops), key=vols.get, default=None)
    return [s for s in dict.fromkeys((below, above)) if s is not None]


def load(root, machine: str, gpu_name: str | None = None, policy=CONFIRM,
         now: float | None = None) -> tuple[Calibration | None, str]:
    """(the calibration, '') or (None, why it is not used)."""
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
    return of_doc(machine, doc), ""


def of_doc(machine: str, doc: dict) -> Calibration:
    """A document as the gate reads it (rows without sigma and dof left out; no checks)."""
    cal = Calibration(machine, doc.get("gpu_name"), doc.get("date") or "", doc=doc)
    for r in doc.get("noise", []):
        try:
            cal.noise[(r["kernel"], r["size"], r["metric"])] = Noise(float(r["sigma"]), int(r["dof"]))
        except (KeyError, TypeError, ValueError):
            continue
    return cal


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
