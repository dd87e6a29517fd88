"""`gemm show`: tables from saved measurements, gate reports or calibration files."""
from __future__ import annotations

import json

from .calibrate import _print_detection, _print_noise
from .common import UsageError


def add_arguments(p) -> None:
    p.add_argument("file", nargs="+",
                   help="JSON files: measurements, gate reports or calibrations")
    p.add_argument("--full", action="store_true", help="the per-kernel tables too")


def run(args) -> int:
    from ..track.calibration import SCHEMA as CALIBRATION
    from .tables import bench_table, summary_table
    records, docs = [], []
    for path in args.file:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path} is not a JSON file ({exc})") from None
        if isinstance(doc, dict) and doc.get("schema") == CALIBRATION:
            docs.append(doc)
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("records", doc.get("rows")), list):
            raise UsageError(f"{path} is neither a measurement (gemm bench/measure --json), "
                             f"a gate report (gemm regress --json) nor a calibration file")
        docs.append(doc)
    for doc in docs:
        if doc.get("schema") == CALIBRATION:
            print(f"calibration of {doc.get('machine')} ({doc.get('policy')})")
            _print_noise(doc)
            _print_detection(doc, "")
        elif "rows" in doc:
            _show_regress(doc)
        else:
            records += doc["records"]
    if records:
        if args.full:
            for k in dict.fromkeys(r["kernel"] for r in records):
                print(f"\n{k}\n" + bench_table(records, k))
        dev = next((d["device"] for d in docs if d.get("device")), None) or {}
        wall = sum(d.get("wall_s", 0) for d in docs if "records" in d)
        print(f"\n{dev.get('name', '?')}: {len(records)} measurements in {wall:.0f} s"
              + _time_split(docs, records))
        print(summary_table(records))
    return 0


def _time_split(docs: list[dict], records: list[dict]) -> str:
    """Where the sweeps' time went, where they say (workers' start-up, opening each target,
    checks, timing)."""
    ready = sum(w.get("ready_s") or 0 for d in docs for w in d.get("workers", []))
    walls = [r["wall"] for r in records if r.get("wall")]
    if not walls:
        return ""
    opened = sum(sum(w.get("open_s", {}).values()) for w in walls)
    check = sum(w.get("check_s", 0) for w in walls)
    timed = sum(w.get("time_s", 0) for w in walls)
    return (f" ({ready:.0f} s starting {sum(len(d.get('workers', [])) for d in docs)} worker "
            f"processes, " + (f"{opened:.0f} s opening targets, " if opened else "")
            + f"{check:.0f} s checking, {timed:.0f} s timing)")


def _show_regress(doc: dict) -> None:
    counts = doc.get("counts") or {}
    print(f"gate on {doc.get('machine')}: commit {str(doc.get('commit'))[:10]}, exit "
          f"{doc.get('exit')}: " + (", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
                                    or ("EMPTY run" if doc.get("empty") else "no series")))
    for r in doc["rows"]:
        if r["verdict"] not in ("ok", "new", "improved"):
            effect = (f" (min effect {100 * r['min_effect']:.1f} %)"
                      if r.get("min_effect") is not None else "")
            print(f"  {r['kernel']} {r['size']} {r['metric']}{effect}: {r['verdict']} "
                  f"{r.get('note', '')}")
    wide = sorted((r["kernel"], r["size"], r["metric"], r["min_effect"]) for r in doc["rows"]
                  if r.get("min_effect") and r["min_effect"] > _floor(r["size"]))
    if wide:
        print(f"  {len(wide)} series can only catch a drop wider than their size class's "
              "floor (their calibrated noise): " + ", ".join(
                  f"{k} {s} {m} {100 * e:.1f} %" for k, s, m, e in wide))


def _floor(size: str) -> float:
    from ..track.gate import GateConfig
    try:
        return GateConfig().effect_for(size)
    except ValueError:
        return 1.0
