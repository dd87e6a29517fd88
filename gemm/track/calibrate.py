"""`gemm calibrate`: this runner's A/B noise, and what the gate detects here.

1. Noise (A/A): `processes` processes of this tree's code measure every kernel x size through
   the A/B's own path (abtest.measure). Per series, sigma is the sd of the log values over
   processes (processes - 1 dof): the prior the gate pools into its A/B.
2. Detection (fault injection, gemm.core.faults): `trials` A/Bs of this code against itself
   slowed by each share in `shares`, each run as the gate runs one (palindromic rounds, the
   gate's family-wise level, budget and overtime, decision by gemm.track.decision with the
   noise of step 1). A trial detects a share when its TFLOPS verdict is DROP.
3. Join (`--join`) / pool (`--pool`): other files' trials or noise added to this machine's
   file; nothing is measured.

Writes calibration/<machine>.json (gemm.track.calibration) and prints the noise and detection.
"""
from __future__ import annotations

import dataclasses
import json
import math
import secrets
import time
from pathlib import Path

from ..core import stats
from ..core.faults import ENV
from . import abtest, calibration, decision
from .gate import GateConfig

METRICS = ("tflops", "pct_of_cublas")


class Refused(ValueError):
    """The settings cannot make the asked-for calibration (said before anything runs)."""


def _series(kernels, sizes) -> dict[str, list[str]]:
    return {k: list(sizes) for k in kernels}


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


def noise(root, kernels, sizes, processes: int, log,
          placements: dict | None = None) -> tuple[dict, dict, int, bool]:
    """({(kernel, size, metric): [value per process]}, the GPU, processes measured, whether
    an interrupt cut it short); `placements`, if given, gets each process's placement medians."""
    got: dict = {}
    device: dict = {}
    for i in range(processes):
        log(f"calibrate: A/A process {i + 1}/{processes}: {', '.join(kernels)} at {', '.join(sizes)}")
        sets: dict = {}
        try:
            measured = abtest.measure(Path(root), _series(kernels, sizes), device=device,
                                      sets=sets)
        except KeyboardInterrupt:
            return got, device, i, True
        for key, v in measured.items():
            got.setdefault(key, []).append(v)
        if placements is not None:
            for cell, medians in sets.items():
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


def trial(root, kernels, sizes, shares, cfg: GateConfig, priors: dict, log,
          label: str = "", stopped: dict | None = None, clock=time.monotonic,
          values: dict | None = None, robust_priors: dict | None = None,
          overtime: set | None = None) -> dict:
    """One detection trial: {(kernel, size, metric, share): decision.Effect or None}.

    As in the gate's A/B (confirm.ABRun), a round measures only the undecided series, and a
    share stops at the gate's budget (its time taken as twice its own arms') except for series
    on course for a DROP, which get the overtime. Series left open are AMBIGUOUS. Filled if
    given: `stopped` (why: "budget" or "cap"), `overtime` (keys measured past the budget),
    `values` (the process values each decision used)."""
    keys = [(k, s, m) for k in kernels for s in sizes for m in METRICS]
    # the family as the gate counts it for a commit with these comparisons: every series,
    # every look, and the one restart its A/A control allows
    family = decision.family_size(len(keys), cfg.min_rounds, cfg.max_rounds)
    vals: dict = {}           # (arm, key) -> [values]; arm: "ref" or a share
    places: dict = {}         # (arm, key) -> [per-placement medians per process] (TFLOPS keys)
    decided: dict = {}
    spent = {sh: 0.0 for sh in shares}
    stopped = {} if stopped is None else stopped
    overtime = set() if overtime is None else overtime
    values = {} if values is None else values

    def effect(sh, key, rounds: int):
        ref, new = vals.get(("ref", key), []), vals.get((sh, key), [])
        values[key + (sh,)] = {"ref": ref[:2 * rounds], "new": new[:2 * rounds]}
        if ("ref", key) in places:
            values[key + (sh,)]["placements"] = {
                "ref": places[("ref", key)][:2 * rounds],
                "new": places.get((sh, key), [])[:2 * rounds]}
        if not ref or not new or None in ref or None in new:
            return None
        # the share's open rounds are the first `rounds`, and so are the reference's
        return cfg.decide([ref[j:j + 2] for j in range(0, 2 * rounds, 2)],
                          [new[j:j + 2] for j in range(0, 2 * rounds, 2)],
                          cfg.min_effect_at(key[1], priors.get(key)), family, priors.get(key),
                          (robust_priors or {}).get(key))
    n = 0
    while n < cfg.max_rounds:
        todo = {sh: [k for k in keys if k + (sh,) not in decided] for sh in shares}
        todo = {sh: ks for sh, ks in todo.items() if ks}
        for sh in [sh for sh in todo if n >= 1 and spent[sh] > cfg.budget_s]:
            going = []
            more = spent[sh] <= cfg.budget_s + cfg.overtime_s
            for key in todo.pop(sh):
                e = effect(sh, key, n)
                if more and e is not None and decision.on_course(
                        e, cfg.min_effect_at(key[1], priors.get(key))):
                    going.append(key)
                    overtime.add(key + (sh,))
                else:
                    if e is not None and n < cfg.min_rounds:   # no decision before then:
                        e = dataclasses.replace(e, verdict=decision.AMBIGUOUS)   # as the gate
                    decided[key + (sh,)] = e
                    stopped[key + (sh,)] = "budget"
            if going:
                todo[sh] = going
                log(f"calibrate: {label}+{100 * sh:g} % delay: past its time budget after {n} "
                    f"rounds; overtime (up to {cfg.overtime_s:g} s more) for what is on "
                    f"course for a DROP: "
                    + "; ".join(f"{k} at {sz} ({m})" for k, sz, m in going))
        if not todo:
            break
        n += 1
        union = [k for k in keys if any(k in ks for ks in todo.values())]
        arms = [("ref", None, union)] + [(sh, {ENV: repr(float(sh))}, todo[sh]) for sh in todo]
        for arm, env, open_keys in arms + arms[::-1]:
            cells = abtest.series_of((k, sz) for k, sz, _ in open_keys)
            log(f"calibrate: {label}round {n}/{cfg.max_rounds}: "
                f"{'reference' if arm == 'ref' else f'+{100 * arm:g} % delay'}: "
                + "; ".join(f"{k} at {', '.join(s)}" for k, s in cells.items()))
            t0 = clock()
            sets: dict = {}
            for key, v in abtest.measure(Path(root), cells, env=env, sets=sets).items():
                vals.setdefault((arm, key), []).append(v)
                if key[2] == "tflops" and sets:
                    places.setdefault((arm, key), []).append(sets.get(key[:2]))
            if arm != "ref":
                spent[arm] += 2 * (clock() - t0)
        if n < cfg.min_rounds:
            continue
        for sh, open_keys in todo.items():
            for key in open_keys:
                e = effect(sh, key, n)
                if e is None or e.verdict != decision.AMBIGUOUS or n == cfg.max_rounds:
                    decided[key + (sh,)] = e
                    if e is not None and e.verdict == decision.AMBIGUOUS:
                        stopped[key + (sh,)] = "cap"
    return decided


def run(root, machine: str, kernels, sizes, processes: int, inject_kernels, inject_sizes,
        shares, trials: int, cfg: GateConfig, out_dir, log=print,
        add_trials: bool = False, gpu_name: str | None = None,
        gpu: str | None = None) -> tuple[Path, dict]:
    """Noise from `processes` A/A processes (0: the file's), then `trials` detection trials.
    The file keeps what this run did not redo. `add_trials`: the new trials join the file's
    (same settings, kernels, sizes), numbered on per share. `gpu_name`: this GPU's name (a
    file of another is not used); `gpu`: its NVML name and UUID, kept with the noise."""
    old, why_not = calibration.load(out_dir, machine, gpu_name=gpu_name)
    gate = cfg.trial_settings()
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
    calibration.save(out_dir, machine, {**base, "noise": rows, "detection": [], "summary": [],
                                        **keep})
    if cut:
        raise KeyboardInterrupt     # no trials on noise the run did not finish
    if trials:
        log("calibrate: the noise is written; the detection trials follow")
    det = list(earlier)
    first = {sh: next_trial(det, sh) for sh in shares}
    for t in range(trials):
        priors = {key: cal.prior(*key) for key in
                  [(k, sz, m) for k in inject_kernels for sz in inject_sizes for m in METRICS]}
        stopped: dict = {}
        over: set = set()
        raw: dict = {}
        robust = {key: cal.robust_prior(*key) for key in priors} if cfg.robust else {}
        res = trial(root, inject_kernels, inject_sizes, shares, cfg,
                    {k: v for k, v in priors.items() if v is not None}, log,
                    label=f"trial {t + 1}/{trials}: ", stopped=stopped, values=raw, overtime=over,
                    robust_priors={k: v for k, v in robust.items() if v is not None})
        tag = secrets.token_hex(6)    # this trial's identity: a joined copy is not counted twice
        for (k, sz, m, sh), e in sorted(res.items()):
            p = priors.get((k, sz, m))
            det.append({"trial": first[sh] + t, "id": tag, "gpu": gpu,   # which GPU ran it
                        "kernel": k, "size": sz, "metric": m,
                        "share": sh, "stopped": stopped.get((k, sz, m, sh)),
                        "overtime": (k, sz, m, sh) in over,
                        "verdict": e.verdict if e else "FAILED",
                        "change": e.change if e else None,
                        "lo": math.expm1(e.lo) if e else None, "hi": math.expm1(e.hi) if e else None,
                        "n_ref": e.n_ref if e else None, "n_new": e.n_new if e else None,
                        "prior_sigma": p.sigma if p else None, "prior_dof": p.dof if p else None,
                        "rule": "huber" if robust.get((k, sz, m)) is not None else "mean",
                        "values": raw.get((k, sz, m, sh))})
        # written after every trial: a run cut short keeps the trials it finished
        calibration.save(out_dir, machine, {
            **base, "gate": gate, "noise": rows, **table_of(det)})
    return calibration.path_for(out_dir, machine), json.loads(
        calibration.path_for(out_dir, machine).read_text())


def summarize(det: list[dict], shares) -> list[dict]:
    """Per kernel x size (TFLOPS): detections per share, and the smallest always detected."""
    cells: dict = {}
    for d in det:
        if d["metric"] != "tflops":
            continue
        c = cells.setdefault((d["kernel"], d["size"]), {})
        c.setdefault(d["share"], []).append(d)
    out = []
    for (k, s), by_share in sorted(cells.items()):
        row = {"kernel": k, "size": s, "detected": {}, "median_change": {}}
        for sh in sorted(by_share):
            ds = by_share[sh]
            hits = sum(d["verdict"] == decision.DROP for d in ds)
            row["detected"][str(sh)] = f"{hits}/{len(ds)}"
            ch = [d["change"] for d in ds if d["change"] is not None]
            row["median_change"][str(sh)] = stats.median(ch) if ch else None
        row["smallest_always_detected"] = _smallest(by_share)
        out.append(row)
    return out


def _smallest(by_share: dict) -> float | None:
    """The smallest share s such that every trial of s and of every larger share detected."""
    best = None
    for sh in sorted(by_share, reverse=True):
        if all(d["verdict"] == decision.DROP for d in by_share[sh]):
            best = sh
        else:
            break
    return best


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


# pooling and joining files (no measuring) live in gemm.track.pooling
from .pooling import join, merged_noise, pool, pool_summary  # noqa: E402,F401
