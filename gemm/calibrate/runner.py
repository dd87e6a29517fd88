"""`gemm calibrate`: this runner's A/B noise, and what the gate detects here.

1. Noise (A/A): `processes` processes of this tree's code measure every kernel x size through
   the A/B's own path (abtest.measure). Per series, sigma is the sd of the log values over
   processes (processes - 1 dof): the prior the gate pools into its A/B.
2. Detection (fault injection, gemm.core.faults): `trials` trials, each one A/B of the gate's
   engine (gemm.track.abrun) per share in `shares`: this code against itself slowed by the
   share, with the noise of step 1. A trial detects a share when its TFLOPS verdict is DROP.
3. Join (`--join`) / pool (`--pool`): other files' trials or noise added to this machine's
   file; nothing is measured.

Writes calibration/<machine>.json (gemm.store.calibration) and prints the noise and detection.
"""
from __future__ import annotations

import json
import math
import secrets
import time
from pathlib import Path

from ..core import stats
from ..core.faults import ENV
from ..store import calibration as calibration_file
from ..track import abtest, calibration, decision, plan
from ..track.abrun import ABRun, Comparison, State
from ..track.gate import GateConfig, Row, Verdict

METRICS = ("tflops", "pct_of_cublas")


class Refused(ValueError):
    """The settings cannot make the asked-for calibration (said before anything runs)."""


def _logs(values) -> list[float]:
    """The log values of a series' usable process values (failed processes left out)."""
    return [math.log(v) for v in values if v is not None and v > 0]


def sigma_of(values: list[float]) -> tuple[float, int] | None:
    vals = _logs(values)
    if len(vals) < 2:
        return None
    m = sum(vals) / len(vals)
    return math.sqrt(sum((x - m) ** 2 for x in vals) / (len(vals) - 1)), len(vals) - 1


def robust_sd(values) -> float | None:
    """1.4826 MAD of a series' log process values (failed processes left out); None under 3."""
    vals = _logs(values or [])
    return stats.robust_sigma(vals) if len(vals) >= 3 else None


def tail_of(values: list[float], cut: float = 4.0) -> tuple[float, int] | None:
    """(robust sd of the log values, how many lie beyond `cut` of them from the median): an
    sd well over the robust sd means a heavy tail."""
    r = robust_sd(values)
    if r is None:
        return None
    vals = _logs(values)
    m = stats.median(vals)
    return r, (sum(abs(x - m) > cut * r for x in vals) if r > 0 else 0)


def placements_of(doc: dict) -> dict:
    """{(kernel, size): [the kernel's median s per operand placement]} from a gemm.measure/1
    document's records."""
    out = {}
    for r in doc.get("records") or []:
        sets = (r.get("kernel_time") or {}).get("per_set") or []
        if r.get("role") == "kernel" and sets:
            out[(r["kernel"], r["size"])] = [x.get("median_s") for x in sets]
    return out


def noise(root, kernels, sizes, processes: int, log,
          placements: dict | None = None) -> tuple[dict, dict, int, bool]:
    """({(kernel, size, metric): [value per process]}, the GPU, processes measured, whether
    an interrupt cut it short); `placements`, if given, gets each process's placement medians."""
    got: dict = {}
    device: dict = {}
    for i in range(processes):
        log(f"calibrate: A/A process {i + 1}/{processes}: {', '.join(kernels)} at {', '.join(sizes)}")
        docs: list = []
        try:
            measured = abtest.measure(Path(root), {k: list(sizes) for k in kernels}, docs=docs)
        except KeyboardInterrupt:
            return got, device, i, True
        for doc in docs:
            device.update(doc.get("device") or {})
        for key, v in measured.items():
            got.setdefault(key, []).append(v)
        if placements is not None:
            for cell, medians in (placements_of(docs[0]) if docs else {}).items():
                placements.setdefault(cell, []).append(medians)
    return got, device, processes, False


def noise_rows(got: dict, source: dict | None = None,
               placements: dict | None = None) -> list[dict]:
    """Noise rows of A/A values (series with two usable values or more), each with its
    `source` (pooling tells runs apart by it) and, for TFLOPS, its `placements`."""
    rows = []
    for key, values in sorted(got.items()):
        sd = sigma_of(values)
        if sd is not None:
            row = {"kernel": key[0], "size": key[1], "metric": key[2], "sigma": sd[0],
                   "dof": sd[1], "median": stats.median([v for v in values if v]),
                   "values": values, **({"source": source} if source else {})}
            sets = (placements or {}).get(key[:2])
            if key[2] == "tflops" and sets and len(sets) == len(values):
                row["placements"] = sets   # per process: the kernel's median s per placement
            rows.append(row)
    return rows


def trial_settings(cfg: GateConfig) -> dict:
    """The gate settings a calibration's trials are made under (trials join only their own)."""
    out = {"screen": "half the minimum effect", "min_effect": cfg.min_effect,
           "alpha": cfg.alpha, "min_rounds": cfg.min_rounds,
           "max_rounds": cfg.max_rounds, "budget_s": cfg.budget_s}
    if cfg.robust:
        out["robust"] = "trimmed"   # (True: tables of the Huber rule before it)
    # the fit tests on the e_i and the new pairs, Welch where they fail (absent: the e_i alone,
    # the rounds' spread then, before 2e332d0)
    out["prior_rejected"] = "welch, new pairs tested"
    if cfg.overtime_s:
        out["overtime_s"] = cfg.overtime_s
    return out


REFERENCE = "+0 %"   # a trial's reference arm: this code, no delay
PROCEDURE = "a gate A/B per share"   # in the file's gate settings: trials join only their own


def trial(root, kernels, sizes, shares, cfg: GateConfig, cal, log, label: str = "",
          clock=None) -> dict:
    """One detection trial: per share, one A/B of the gate's engine of this code against
    itself slowed by the share, every series a comparison, with `cal`'s noise. Returns
    {(kernel, size, metric, share): its detection row (less trial, id and gpu)}."""
    medians = {(r["kernel"], r["size"], r["metric"]): r.get("median")
               for r in cal.doc.get("noise", [])}
    out = {}
    for sh in shares:
        rows = [Row(k, sz, m, 0, None, medians.get((k, sz, m)), None, None, Verdict.CANDIDATE,
                    min_effect=cfg.effect_for(sz, cal.prior(k, sz, m)))
                for k in kernels for sz in sizes for m in METRICS]
        procs: list = []      # (round, arm, placements) per process, in order

        def measure(arm: str, what: dict) -> tuple[dict, dict]:
            walls: dict = {}
            docs: list = []
            got = abtest.measure(Path(root), what, env=None if arm == REFERENCE else
                                 {ENV: repr(float(sh))}, walls=walls, docs=docs)
            procs.append((ab.n, arm, placements_of(docs[0]) if docs else {}))
            return got, walls
        ab = ABRun([(r, REFERENCE) for r in rows], cfg, f"+{100 * sh:g} %", measure,
                   lambda s: log(f"calibrate: {label}{s}"), cal, plan.speeds(rows), clock=clock,
                   built=(REFERENCE,))
        ab.run()
        for c in ab.comps:
            out[(*c.key, sh)] = _detection(ab, c, procs, cal)
    return out


def _detection(ab: ABRun, c: Comparison, procs: list, cal) -> dict:
    r = c.row
    values: dict = {"ref": [x for p in c.refs for x in p], "new": [x for p in c.news for x in p]}
    t = (r.kernel, r.size)
    sets = {a: [s[t] for n, arm, s in procs if arm == a and t in s and n > c.since]
            for a in (REFERENCE, ab.new)}
    if r.metric == "tflops" and sets[REFERENCE]:
        values["placements"] = {"ref": sets[REFERENCE][:len(values["ref"])],
                                "new": sets[ab.new][:len(values["new"])]}
    e, p = ab.estimate(c), cal.prior(*c.key)
    failed = c.state is State.FAILED
    return {"kernel": r.kernel, "size": r.size, "metric": r.metric,
            "stopped": c.stop, "overtime": c.measured_overtime,
            "verdict": "FAILED" if failed else e.verdict if e else decision.AMBIGUOUS,
            "change": e.change if e else None,
            "lo": decision.change_of(e.lo) if e else None,
            "hi": decision.change_of(e.hi) if e else None,
            "n_ref": e.n_ref if e else None, "n_new": e.n_new if e else None,
            "prior_sigma": p.sigma if p else None, "prior_dof": p.dof if p else None,
            "rule": e.rule if e else "mean", "values": values}


def run(root, machine: str, kernels, sizes, processes: int, inject_kernels, inject_sizes,
        shares, trials: int, cfg: GateConfig, out_dir, log=print,
        add_trials: bool = False, gpu_name: str | None = None,
        gpu: str | None = None) -> tuple[Path, dict]:
    """Noise from `processes` A/A processes (0: the file's), then `trials` detection trials.
    The file keeps what this run did not redo. `add_trials`: the new trials join the file's
    (same settings, kernels, sizes), numbered on per share. `gpu_name`: this GPU's name (a
    file of another is not used); `gpu`: its NVML name and UUID, kept with the noise."""
    old, why_not = calibration.load(out_dir, machine, gpu_name=gpu_name)
    gate = {**trial_settings(cfg), "procedure": PROCEDURE}
    earlier = []
    if add_trials and old is not None and old.doc.get("detection"):
        made = (old.doc.get("gate"),) + _measured(old.doc["detection"])
        now = (gate, sorted(inject_kernels), sorted(inject_sizes))
        if made != now:
            raise Refused("--add-trials: the file's trials were made with other gate settings, "
                          "kernels or sizes (gate {}, kernels {}, sizes {})".format(*made))
        if processes:
            raise Refused("--add-trials needs --processes 0: trials with new noise as their "
                          "prior would not be trials of the file's procedure")
        other = _other_noise(old, old.doc["detection"])
        if other:
            raise Refused(f"--add-trials: the file's trials were made with other noise than "
                          f"it holds now ({other}); start a new table (no --add-trials)")
        earlier = list(old.doc["detection"])
    if not processes and old is None:
        raise Refused(f"--processes 0 uses the file's noise, and there is none: {why_not}")
    cut = False
    if processes:
        places: dict = {}
        got, device, done, cut = noise(root, kernels, sizes, processes, log, places)
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        source = {"gpu": gpu, "pci_bus_id": device.get("pci_bus_id"), "date": when,
                  "processes": done, "id": secrets.token_hex(6)}
        rows = noise_rows(got, source, places)
        if cut:
            # interrupted: kept, but never over a file's noise of more processes
            have = {(r["kernel"], r["size"], r["metric"]): r["dof"]
                    for r in (old.doc.get("noise", []) if old else [])}
            rows = [r for r in rows if r["dof"] > have.get((r["kernel"], r["size"], r["metric"]), 0)]
            log(f"calibrate: interrupted after {done} of {processes} A/A processes: the noise of "
                f"{len(rows)} series is written (the file's noise with more processes is kept)")
            if not rows:
                raise KeyboardInterrupt
        base = {"gpu_name": device.get("name"), "device": device, "processes": done,
                "gpu": gpu, "date": when}
        rows = merged_noise(old, rows)
        if any(r.get("parts") for r in rows):   # a pooled file: its summary over the parts
            base.update(pool_summary(rows))
    else:
        rows = old.doc.get("noise", [])
        # the noise was not measured again: the file keeps its date (its age is the noise's)
        base = {k: old.doc.get(k) for k in ("gpu_name", "device", "processes", "date", "gpu",
                                            "sources") if k in old.doc}
    base["gate"] = gate
    cal = calibration.of_doc(machine, {"gpu_name": base.get("gpu_name"), "noise": rows})
    # the file's detection table stays until a new trial replaces it (or joins it)
    keep = {k: old.doc[k] for k in ("shares", "trials", "detection", "summary", "gate")
            if old is not None and k in old.doc}
    calibration_file.save(out_dir, machine, {**base, "noise": rows, "detection": [],
                                             "summary": [], **keep})
    if cut:
        raise KeyboardInterrupt     # no trials on noise the run did not finish
    if trials:
        log("calibrate: the noise is written; the detection trials follow")
    det = list(earlier)
    first = {sh: next_trial(det, sh) for sh in shares}
    for t in range(trials):
        res = trial(root, inject_kernels, inject_sizes, shares, cfg, cal, log,
                    label=f"trial {t + 1}/{trials}: ")
        tag = secrets.token_hex(6)    # this trial's identity: a joined copy is not counted twice
        for (k, sz, m, sh), d in sorted(res.items()):
            det.append({"trial": first[sh] + t, "id": tag, "gpu": gpu,   # which GPU ran it
                        "kernel": k, "size": sz, "metric": m, "share": sh, **d})
        # written after every trial: a run cut short keeps the trials it finished
        calibration_file.save(out_dir, machine, {
            **base, "gate": gate, "noise": rows, **table_of(det)})
    return calibration_file.path_for(out_dir, machine), json.loads(
        calibration_file.path_for(out_dir, machine).read_text())


def summarize(det: list[dict], shares) -> list[dict]:
    """Per kernel x size (TFLOPS): detections per share, their median change, and the smallest
    share detected in every trial of it and of every larger share."""
    cells: dict = {}
    for d in det:
        if d["metric"] == "tflops":
            cells.setdefault((d["kernel"], d["size"]), {}).setdefault(d["share"], []).append(d)
    out = []
    for (k, s), by_share in sorted(cells.items()):
        hits = {sh: sum(d["verdict"] == decision.DROP for d in ds) for sh, ds in by_share.items()}
        always = [sh for sh in sorted(by_share)
                  if all(hits[x] == len(by_share[x]) for x in by_share if x >= sh)]
        changes = {sh: [d["change"] for d in ds if d["change"] is not None]
                   for sh, ds in by_share.items()}
        out.append({"kernel": k, "size": s,
                    "detected": {str(sh): f"{hits[sh]}/{len(by_share[sh])}"
                                 for sh in sorted(by_share)},
                    "median_change": {str(sh): stats.median(changes[sh]) if changes[sh] else None
                                      for sh in sorted(by_share)},
                    "smallest_always_detected": min(always, default=None)})
    return out


def next_trial(det: list[dict], share) -> int:
    """The next trial number of `share` (a trial may measure some shares only)."""
    return 1 + max((d["trial"] for d in det if d["share"] == share), default=0)


def table_of(det: list[dict]) -> dict:
    """The file's detection fields: shares, trials (the fewest of any share), rows, summary."""
    shares = sorted({d["share"] for d in det})
    counts = [len({d["trial"] for d in det if d["share"] == sh}) for sh in shares]
    return {"shares": shares, "trials": min(counts, default=0), "detection": det,
            "summary": summarize(det, shares)}


def _measured(det: list[dict]) -> tuple:
    """The kernels and sizes of detection rows."""
    return sorted({d["kernel"] for d in det}), sorted({d["size"] for d in det})


def _other_noise(cal, rows: list[dict]) -> str:
    """The first row whose prior is not `cal`'s noise for its series, described ('' if none)."""
    for d in rows:
        p = cal.prior(d["kernel"], d["size"], d["metric"])
        used = (d.get("prior_sigma"), d.get("prior_dof"))
        if ((p.sigma, p.dof) if p else (None, None)) != used:
            return f"trial {d['trial']}, {d['kernel']} at {d['size']} ({d['metric']})"
    return ""


# pooling and joining files (no measuring) live in gemm.calibrate.pooling
from .pooling import join, merged_noise, pool, pool_summary  # noqa: E402,F401
