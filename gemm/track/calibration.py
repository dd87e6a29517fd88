"""A runner's calibration as the gate reads it: each series' noise, its own or borrowed."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..core import registry
from ..core.policy import CONFIRM
from ..core.problem import Problem
from ..store import calibration as calibration_file
from .decision import TAIL_RATIO, Noise, trimmed_noise


@dataclass
class Calibration:
    machine: str
    gpu_name: str | None
    date: str
    noise: dict = field(default_factory=dict)      # (kernel, size, metric) -> Noise
    doc: dict = field(default_factory=dict)
    _robust: dict = field(default_factory=dict, repr=False, compare=False)   # computed once

    def prior(self, kernel: str, size: str, metric: str) -> Noise | None:
        """Its own noise, else the worst near it of its precision's kernels or of all (borrowed)."""
        own = self.noise.get((kernel, size, metric))
        if own is not None:
            return own
        mine = precision_of(kernel)
        alike = {key: n for key, n in self.noise.items()
                 if mine is not None and precision_of(key[0]) == mine}
        near, got = _worst_near(alike, size, metric)
        near_any, worst = _worst_near(self.noise, size, metric)
        if near != near_any:
            got = _worse(got, worst)
        return None if got is None else replace(got, borrowed=True)

    def robust_prior(self, kernel: str, size: str, metric: str) -> Noise | None:
        """The series' own trimmed-mean prior where it is heavy-tailed (TAIL_RATIO), else None."""
        key = (kernel, size, metric)
        if key not in self._robust:
            got = trimmed_noise(self._aa_values(key)) if key in self.noise else None
            heavy = got is not None and self.noise[key].sigma > TAIL_RATIO * got[1]
            self._robust[key] = got[0] if heavy else None
        return self._robust[key]

    def _aa_values(self, key) -> list[list[float]]:
        """The series' A/A values, one list per GPU (a pooled row's parts)."""
        row = next((r for r in self.doc.get("noise", [])
                    if (r.get("kernel"), r.get("size"), r.get("metric")) == key), {})
        parts = [p.get("values") or [] for p in row.get("parts") or []] or [row.get("values") or []]
        return [[v for v in vs if v] for vs in parts]

    def heavy_tailed(self, kernel: str, size: str, metric: str) -> bool:
        return self.robust_prior(kernel, size, metric) is not None

    def borrowed(self, kernel: str, size: str, metric: str) -> bool:
        key = (kernel, size, metric)
        return key not in self.noise and self.prior(*key) is not None


def precision_of(kernel: str) -> str | None:
    try:
        return registry.get(kernel).precision
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


def _worst_near(noise: dict, size: str, metric: str) -> tuple[list[str], Noise | None]:
    """(the sizes nearest `size` in `noise`, the worst noise at them)."""
    sizes = {s for (_, s, m) in noise if m == metric}
    near = [size] if size in sizes else bracketing_sizes(size, sizes)
    return near, _worse(*(n for (k, s, m), n in noise.items() if s in near and m == metric))


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
    """(the calibration, '') or (None, why it is not used: gemm.store.calibration.read)."""
    doc, why = calibration_file.read(root, machine, gpu_name, policy, now)
    return (None if doc is None else of_doc(machine, doc)), why


def of_doc(machine: str, doc: dict) -> Calibration:
    """A document as the gate reads it (rows without sigma and dof left out; no checks)."""
    cal = Calibration(machine, doc.get("gpu_name"), doc.get("date") or "", doc=doc)
    for r in doc.get("noise", []):
        try:
            noise = Noise(float(r["sigma"]), int(r["dof"]))
            cal.noise[(r["kernel"], r["size"], r["metric"])] = noise
        except (KeyError, TypeError, ValueError):
            continue
    return cal
