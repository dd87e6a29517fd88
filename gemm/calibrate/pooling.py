"""Pooling other files' A/A noise (gemm calibrate --pool) and joining their detection trials
(--join) into a machine's calibration; nothing is measured."""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..store import calibration as calibration_file
from ..track import calibration
from .runner import Refused, _measured, _other_noise, next_trial, table_of


def merged_noise(old, rows: list[dict]) -> list[dict]:
    """This run's noise rows over `old`'s (other series kept); into a pooled row they go as
    one more part, replacing this GPU's earlier part."""
    def key(r):
        return (r.get("kernel"), r.get("size"), r.get("metric"))
    olds = {key(r): r for r in (old.doc.get("noise", []) if old else [])}
    new = {key(r) for r in rows}
    out = [r for k, r in olds.items() if k not in new]
    for r in rows:
        o = olds.get(key(r))
        if o is not None and o.get("parts"):
            mine = (r.get("source") or {}).get("gpu")
            parts = [p for p in o["parts"] if not (mine and p["source"].get("gpu") == mine)]
            out.append(pooled_row(key(r), parts + parts_of(old.doc, r)))
        else:
            out.append(r)
    return out


def _files(out_dir, machine: str, others, option: str):
    """The machine's usable file and the usable files `others` of the same machine and GPU
    name, [(path, Calibration)]; else Refused."""
    base, why = calibration.load(out_dir, machine)
    if base is None:
        raise Refused(f"{option}: no usable base file: {why}")
    out = []
    for path in map(Path, others):
        cal, why = calibration.load(path.parent, path.stem, gpu_name=base.gpu_name)
        if cal is None or cal.machine != machine:
            raise Refused(f"{option} {path}: {why or 'made for another machine'}")
        out.append((path, cal))
    return base, out


def written(out_dir, machine: str, doc: dict) -> tuple[Path, dict]:
    """Save `doc` as the machine's file: (its path, the file as written)."""
    path = calibration_file.save(out_dir, machine, doc)
    return path, json.loads(path.read_text())


def _identity(d: dict) -> tuple:
    """A detection row without its number: the same in a lane's copy of the file."""
    return tuple(sorted((k, json.dumps(v)) for k, v in d.items() if k != "trial"))


def join(out_dir, machine: str, others) -> tuple[Path, dict]:
    """The detection trials of the files `others` joined to this machine's file, numbered on
    per share, rows it has already left out. Only trials of one procedure: usable files of
    the same machine, GPU name, policy, gate settings, kernels, sizes and priors; else
    Refused, nothing written."""
    base, files = _files(out_dir, machine, others, "--join")
    doc = dict(base.doc)
    det = list(doc.get("detection") or [])
    other = _other_noise(base, det)
    if other:
        raise Refused(f"--join: the base file's own trials were made with other noise than it "
                      f"holds now ({other})")
    for path, cal in files:
        have = {_identity(d) for d in det}
        got = [d for d in cal.doc.get("detection") or [] if _identity(d) not in have]
        if not got:
            raise Refused(f"--join {path}: it has no detection trials the base file lacks")
        if cal.doc.get("gate") != doc.get("gate") or (det and _measured(got) != _measured(det)):
            raise Refused(f"--join {path}: its trials were made with other gate settings, "
                          "kernels or sizes")
        other = _other_noise(base, got)
        if other:
            raise Refused(f"--join {path}: {other} was measured with other calibrated noise "
                          "than the base file's")
        added = []
        for sh in sorted({d["share"] for d in got}):
            first = next_trial(det, sh)
            mine = [d for d in got if d["share"] == sh]
            order = sorted({(d["trial"], d.get("id")) for d in mine}, key=str)
            renum = {t: first + i for i, t in enumerate(order)}
            added += [{**d, "trial": renum[(d["trial"], d.get("id"))]} for d in mine]
        det += added
    doc.update(table_of(det))
    return written(out_dir, machine, {k: v for k, v in doc.items()
                                      if k not in ("schema", "machine", "policy")})


def source_of(doc: dict) -> dict:
    """Where a file's A/A noise was measured (for rows that do not say): GPU, date, processes."""
    dev = doc.get("device") or {}
    return {"gpu": doc.get("gpu"), "pci_bus_id": dev.get("pci_bus_id"), "date": doc.get("date"),
            "processes": doc.get("processes")}


def parts_of(doc: dict, row: dict) -> list[dict]:
    """A noise row's per-GPU parts: a pooled row's own, else the row as one part."""
    if row.get("parts"):
        return row["parts"]
    return [{"source": row.get("source") or source_of(doc), "sigma": row["sigma"],
             "dof": row["dof"], "median": row.get("median"), "values": row.get("values") or [],
             **({"placements": row["placements"]} if row.get("placements") else {})}]


def pool_summary(rows: list[dict]) -> dict:
    """A pooled file's top fields: its A/A runs, their processes, the oldest run's date."""
    sources = {_source_key(p["source"]): p["source"] for r in rows for p in parts_of({}, r)}
    return {"sources": list(sources.values()),
            "processes": sum(x.get("processes") or 0 for x in sources.values()),
            "date": min(str(x.get("date")) for x in sources.values())}


def pooled_row(key: tuple, parts: list[dict]) -> dict:
    """One series' noise over several GPUs: the dof-weighted pooled variance (each GPU about
    its own mean: offsets between GPUs are not noise), dof summed; `values` scaled to the first
    part's median; `parts` kept."""
    dof = sum(p["dof"] for p in parts)
    var = sum(p["dof"] * p["sigma"] ** 2 for p in parts) / dof
    m0 = next((p["median"] for p in parts if p.get("median")), None)
    values = [v * m0 / p["median"] for p in parts if p.get("median")
              for v in p.get("values") or [] if v is not None]   # a part without one: none
    return {"kernel": key[0], "size": key[1], "metric": key[2], "sigma": math.sqrt(var),
            "dof": dof, "median": m0, "values": values, "parts": parts}


def _source_key(src: dict) -> str:
    return json.dumps(src, sort_keys=True)


def pool(out_dir, machine: str, others, log=print) -> tuple[Path, dict]:
    """The A/A noise of the files `others` (other GPUs of the same name) pooled into this
    machine's file, series by series (pooled_row): where a runner is any of many GPUs, one
    GPU's noise misstates the next's. Each file must be usable and add GPUs not pooled yet.
    The detection table is emptied where pooling moved the noise its trials used."""
    base, files = _files(out_dir, machine, others, "--pool")
    parts: dict = {}
    for r in base.doc.get("noise") or []:
        parts[(r["kernel"], r["size"], r["metric"])] = list(parts_of(base.doc, r))
    seen = {_source_key(p["source"]) for ps in parts.values() for p in ps}
    gained: set = set()
    for path, cal in files:
        # parts the base already holds (a lane's file starts as its copy) count once
        theirs = {(r["kernel"], r["size"], r["metric"]):
                  [p for p in parts_of(cal.doc, r) if _source_key(p["source"]) not in seen]
                  for r in cal.doc.get("noise") or []}
        if not any(theirs.values()):
            raise Refused(f"--pool {path}: its noise is already in the base file (or it has "
                          "none)")
        for key, ps in theirs.items():
            parts.setdefault(key, []).extend(ps)
            if ps:
                gained.add(key)
        seen |= {_source_key(p["source"]) for ps in theirs.values() for p in ps}
    rows = [pooled_row(key, ps) for key, ps in sorted(parts.items())]
    doc = {k: v for k, v in base.doc.items() if k not in ("schema", "machine", "policy")}
    doc.update({"noise": rows, **pool_summary(rows)})
    det = base.doc.get("detection") or []
    changed = sorted({(d.get("kernel"), d.get("size"), d.get("metric")) for d in det} & gained)
    # a series that borrowed its prior can have it moved by noise pooled for another series
    moved = _other_noise(calibration.of_doc(machine, doc), det) if det else ""
    if changed or moved:
        doc.update({"shares": [], "trials": 0, "detection": [], "summary": []})
        log(f"calibrate: the detection table of {len({d['trial'] for d in det})} trial(s) is "
            f"dropped: its trials were made with the unpooled noise of "
            + (", ".join(f"{k} at {sz} ({m})" for k, sz, m in changed[:3])
               + (" ..." if len(changed) > 3 else "") if changed else
               f"the series they decided (the prior of {moved} moves)"))
    elif det:
        log(f"calibrate: the detection table of {len({d['trial'] for d in det})} trial(s) is "
            "kept: the noise of every series its trials decided is as it was")
    return written(out_dir, machine, doc)
