"""The recorded history and the gate's kept verdicts, joined per series and commit: what the
dashboard (gemm.record.dashboard), the series pages (gemm.record.series_page) and the plots
(gemm.record.plot) draw.

A commit's verdict for a series is the gate's row for it (verdicts/<machine>/<commit>.json:
the summary's rows, every one that was not ok, and the A/B's rows with their rounds); a
series the gate judged and listed no row for was ok; a commit the gate never judged has none.
A DROP's row may carry why it dropped (gemm explain's summary line, `Machine.why`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..core import stats
from ..store import verdicts as kept
from ..store.history import finite, gpu_arch, load_runs

GATED = ("tflops", "pct_of_cublas")
# verdict -> (css class, words); the class colours a dashboard cell and a plot marker
CLASSES = {"DROP": "DROP", "FAILED": "FAILED", "MISSING": "FAILED", "UNRESOLVED": "UNRESOLVED",
           "improved": "improved", "noise": "noise", "ok": "ok", "new": "new",
           "skipped": "none", "drop?": "UNRESOLVED", None: "none"}


def size_order(s: str):
    dims = [int(x) for x in s.split("x")]
    return (len(dims) > 1, dims[0] if len(dims) == 1 else dims)


def min_effect_for(size: str, prior=None) -> float | None:
    """The gate's minimum effect at a size: its class's floor, or wider where the noise
    `prior` (gemm.track.calibration) needs it; None for a size the gate cannot parse."""
    from ..track.gate import GateConfig
    try:
        return GateConfig().effect_for(size, prior)
    except (ValueError, KeyError):
        return None


def pct(x, digits: int = 1) -> str:
    """A relative change in percent; an interval's bound past +900 % (1-2 dof) says only that."""
    if x is not None and x >= 9:
        return "> +900 %"
    return "" if x is None or not finite(x) else f"{100 * x:+.{digits}f} %"


@dataclass
class Machine:
    name: str
    commits: list            # ordered oldest first: commits with at least one current value
    dates: dict              # commit -> ms since the epoch
    values: dict             # (target, size, metric, baseline) -> {commit: value}
    files: dict              # commit -> kept verdict file (dict)
    anchor: str | None       # the anchor named now (else the newest judgement's)
    rows: dict = field(default_factory=dict)   # commit -> {(kernel, size, metric): row}
    gpus: dict = field(default_factory=dict)   # commit -> which GPU made its run (gemm_host)
    gpu_arch: str | None = None                # the model's sm_XY (results/<machine>/machine.json)
    calibration: object = None                 # the gate's (gemm.track.calibration), if usable

    # --- the series ------------------------------------------------------------------
    def series(self, metric: str, baseline: bool = False) -> list[tuple[str, str]]:
        keys = {(t, s) for (t, s, m, b) in self.values if m == metric and b == baseline}
        return sorted(keys, key=lambda k: (k[0], size_order(k[1])))

    def points(self, target, size, metric, baseline=False) -> list[tuple[str, float]]:
        vals = self.values.get((target, size, metric, baseline), {})
        return [(c, vals[c]) for c in self.commits if c in vals]

    def value(self, commit, target, size, metric, baseline=False):
        return self.values.get((target, size, metric, baseline), {}).get(commit)

    def previous(self, commit, target, size, metric, baseline=False):
        """(commit, value) of the series' last recorded value before `commit`, or None."""
        prev = None
        for c, v in self.points(target, size, metric, baseline):
            if c == commit:
                return prev
            prev = (c, v)
        return None

    def change_prev(self, commit, target, size, metric, baseline=False):
        v, p = self.value(commit, target, size, metric, baseline), \
            self.previous(commit, target, size, metric, baseline)
        return None if v is None or p is None else v / p[1] - 1

    def anchor_of(self, commit) -> str | None:
        """The anchor the gate compared `commit` with (its kept summary's: None where the gate
        had none), else, for a commit the gate never judged, today's."""
        s = (self.files.get(commit) or {}).get("summary") or {}
        return (s.get("anchor") or None) if "anchor" in s else self.anchor

    def change_anchor(self, commit, target, size, metric, baseline=False):
        a = self.anchor_of(commit)
        v = self.value(commit, target, size, metric, baseline)
        ref = self.value(a, target, size, metric, baseline) if a else None
        return None if v is None or not ref else v / ref - 1

    def reference(self, target, size, metric, baseline=False) -> tuple[float | None, str]:
        """What a series page draws changes against: the anchor's value, else the median."""
        if self.anchor:
            v = self.value(self.anchor, target, size, metric, baseline)
            if v:
                return v, f"anchor {self.anchor[:8]}"
        vals = [v for _, v in self.points(target, size, metric, baseline)]
        return (stats.median(vals) if vals else None), "the series' median"

    # --- the gate ----------------------------------------------------------------------
    def judged(self, commit) -> bool:
        return commit in self.files

    def passed(self, commit) -> bool | None:
        s = (self.files.get(commit) or {}).get("summary")
        return None if not s else not s.get("exit", 0)

    def row(self, commit, kernel, size, metric) -> dict | None:
        return self.rows.get(commit, {}).get((kernel, size, metric))

    def verdict(self, commit, kernel, size, metric) -> str | None:
        """The gate's word for the series at `commit`; None: not judged (or no value)."""
        r = self.row(commit, kernel, size, metric)
        if r is not None:
            return r.get("verdict")
        if self.value(commit, kernel, size, metric) is None:
            return None
        return "ok" if (self.files.get(commit) or {}).get("summary") else None

    def why(self, commit, kernel, size, metric) -> str:
        """Why the series dropped at `commit`: the explanation attached to its DROP row
        (gemm explain --attach), in one line; "" where there is none."""
        r = self.row(commit, kernel, size, metric)
        return kept.why(r.get("explanation")) if r and r.get("verdict") == "DROP" else ""

    def min_effect(self, kernel, size, metric) -> float | None:
        """The series' minimum effect: the gate's, from the committed calibration (the same
        function and file the next judgement uses), else the newest the gate kept, else its
        class's floor."""
        if self.calibration is not None:
            return min_effect_for(size, self.calibration.prior(kernel, size, metric))
        for c in reversed(self.commits):
            r = self.row(c, kernel, size, metric)
            if r and r.get("min_effect"):
                return float(r["min_effect"])
        return min_effect_for(size)


def _rows(f: dict) -> dict:
    """{(kernel, size, metric): row} of one kept file; the A/B's rows (with their rounds)
    over the summary's."""
    out = {}
    for r in ((f.get("summary") or {}).get("rows") or []) + (f.get("rows") or []):
        try:
            key = (r["kernel"], r["size"], r["metric"])
        except (KeyError, TypeError):
            continue
        out[key] = {**out.get(key, {}), **{k: v for k, v in r.items() if v is not None}}
    return out


def gpu_of(path) -> str | None:
    """Which GPU made a recorded run: its UUID's first block ("GPU-" and 8 hex digits) and the runner's
    host name, as kept under "gemm_host" (gemm.record.machine.host_facts); None where the
    file keeps neither (runs recorded before a fleet)."""
    import json
    try:
        facts = json.loads(Path(path).read_text()).get("gemm_host") or {}
    except (OSError, ValueError, AttributeError):
        return None
    uuid = str(facts.get("gpu_uuid") or "")
    gpu = "-".join(uuid.split("-")[:2]) if uuid else ""
    host = str(facts.get("host") or "")
    return " on ".join(x for x in (gpu, host) if x) or None


def load_machine(results, verdicts_dir, machine: str, anchor: str | None = None,
                 calibration_dir=None) -> Machine:
    """`calibration_dir`: where the gate's calibration/<machine>.json lies (default: beside
    the results directory); a file the gate would not use is not used here either."""
    runs, _ = load_runs(results, machine)
    values: dict = {}
    commits, dates, gpus = [], {}, {}
    for r in runs:
        gpu = gpu_of(r.path)
        if gpu:
            gpus[r.commit] = gpu
        got = False
        for key, p in r.points.items():
            if key.metric in GATED and finite(p.value) and p.value > 0:
                values.setdefault((key.target, key.size, key.metric, key.baseline), {})[r.commit] \
                    = p.value
                got = True
        if got and r.commit not in dates:
            commits.append(r.commit)
            dates[r.commit] = r.date
    files = {f["commit"]: f for f in kept.load_all(verdicts_dir, machine)} \
        if verdicts_dir and Path(verdicts_dir).is_dir() else {}
    if anchor is None:
        judged = [c for c in commits if (files.get(c) or {}).get("summary", {}) and
                  files[c]["summary"].get("anchor")]
        anchor = files[judged[-1]]["summary"]["anchor"] if judged else None
    m = Machine(machine, commits, dates, values, files, anchor)
    m.rows = {c: _rows(f) for c, f in files.items()}
    m.gpus = gpus
    m.gpu_arch = gpu_arch(results, machine)
    from ..track import calibration
    m.calibration, _ = calibration.load(calibration_dir or Path(results).parent / "calibration",
                                        machine)
    return m


def robust_limits(ys: list[float], band: float = 0.0, lo_q=0.02, hi_q=0.98, margin=0.12):
    """y limits that a single spike does not stretch: the 2nd-98th percentile of the values,
    always with 0 and the band, plus a margin."""
    ys = sorted(y for y in ys if y is not None and not math.isnan(y))
    if not ys:
        return -max(band, 1.0), max(band, 1.0)

    def q(p):
        i = p * (len(ys) - 1)
        f = math.floor(i)
        return ys[f] + (ys[min(f + 1, len(ys) - 1)] - ys[f]) * (i - f)
    lo, hi = min(q(lo_q), -band, 0.0), max(q(hi_q), band, 0.0)
    pad = max(hi - lo, 0.5) * margin
    return lo - pad, hi + pad
