"""`gemm show`: tables from saved measurements, gate reports, kept verdict files
(verdicts/<machine>/<commit>.json), calibration files or asv's result files
(results/<machine>/*.json). A confirmed DROP's explanation, where attached, is printed under
it ("why: ..."); UNRESOLVED series are told by reason (gemm.record.unresolved), each with a short
note (--full: the whole note)."""
from __future__ import annotations

import json

from ..core.metrics import Series

from .calibrate import _print_detection, _print_noise
from .common import UsageError


def add_arguments(p) -> None:
    p.add_argument("file", nargs="+",
                   help="JSON files: measurements (gemm bench/measure --json), gate reports "
                   "(gemm regress --json), kept verdicts (verdicts/<machine>/<commit>.json), "
                   "calibrations (calibration/*.json) or asv result files "
                   "(results/<machine>/*.json)")
    p.add_argument("--full", action="store_true",
                   help="the per-kernel tables too, and each UNRESOLVED series' whole note")


def run(args) -> int:
    from ..store.calibration import SCHEMA as CALIBRATION
    from .tables import bench_table, summary_table
    records, docs, runs = [], [], []
    for path in args.file:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path} is not a JSON file ({exc})") from None
        if isinstance(doc, dict) and doc.get("schema") == CALIBRATION:
            docs.append(doc)
            continue
        if isinstance(doc, dict) and "result_columns" in doc:
            runs.append(_asv_run(path, doc))
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("records", doc.get("rows")), list):
            raise UsageError(f"{path} is neither a measurement (gemm bench/measure --json), "
                             f"a gate report (gemm regress --json), a verdict file, a "
                             f"calibration file nor an asv result file "
                             f"(results/<machine>/*.json)")
        docs.append(doc)
    for run, doc in runs:
        print(asv_run_table(run, doc))
    for doc in docs:
        if doc.get("schema") == CALIBRATION:
            print(f"calibration of {doc.get('machine')} ({doc.get('policy')})")
            _print_noise(doc)
            _print_detection(doc, "")
        elif "rows" in doc and "format" in doc and "summary" in doc:
            _show_regress(_as_report(doc), f"verdicts kept on {doc.get('machine')}", args.full)
        elif "rows" in doc:
            _show_regress(doc, full=args.full)
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


def _asv_run(path, doc):
    from ..store.history import HistoryError, read_run
    if doc.get("version") != 2:
        raise UsageError(f"{path} is an asv result file of version {doc.get('version')!r}; "
                         f"gemm reads version 2 (asv 0.6)")
    try:
        return read_run(path), doc   # every row as recorded, whatever its benchmark version
    except HistoryError as exc:
        raise UsageError(str(exc)) from None


def asv_run_table(run, doc: dict) -> str:
    """One recorded run: kernels down, sizes across, 'TFLOPS (% of cuBLAS)' as asv recorded
    them (medians), then each cuBLAS configuration's TFLOPS."""
    import datetime
    from ..core.registry import label
    from ..store.history import finite
    from .tables import table

    def cell(target, size, baseline=False):
        t = run.points.get(Series(target, size, "tflops", baseline))
        pct = None if baseline else run.points.get(Series(target, size, "pct_of_cublas"))
        if t is None:
            return ""
        if not finite(t.value):
            return "failed" if t.value is None else "skipped"
        return f"{t.value:.2f}" + (f" ({pct.value:.0f} %)" if pct and finite(pct.value) else "")

    sizes = list(dict.fromkeys(k.size for k in run.points))
    kernels = sorted({k.target for k in run.points if not k.baseline})
    blas = sorted({k.target for k in run.points if k.baseline})
    rows = [[label(k)] + [cell(k, s) for s in sizes] for k in kernels]
    rows += [[b] + [cell(b, s, True) for s in sizes] for b in blas]
    params = doc.get("params") or {}
    when = datetime.datetime.fromtimestamp(run.date / 1000, datetime.timezone.utc) \
        if run.date else None
    head = (f"{params.get('machine', run.path.parent.name)} ({params.get('gpu', '?')}): commit "
            f"{run.commit[:10]}" + (f", {when:%Y-%m-%d %H:%M} UTC" if when else "")
            + f", {run.path.name}: asv's medians")
    return head + "\n" + table(["TFLOPS (% of cuBLAS)"] + sizes, rows)


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


def _as_report(doc: dict) -> dict:
    """A kept verdict file read as a gate report: its summary's counts and exit, its rows
    with the A/B's over the summary's (gemm.record.sitedata reads them alike)."""
    s = doc.get("summary") or {}
    rows: dict = {}
    for r in (s.get("rows") or []) + (doc.get("rows") or []):
        if isinstance(r, dict) and {"kernel", "size", "metric", "verdict"} <= set(r):
            key = (r["kernel"], r["size"], r["metric"])
            rows[key] = {**rows.get(key, {}), **{k: v for k, v in r.items() if v is not None}}
    # its gate's settings are not kept: those of today's (carry_commits: which UNRESOLVED fail)
    from ..track.gate import GateConfig
    return {"machine": doc.get("machine"), "commit": doc.get("commit"),
            "exit": s.get("exit", "-"), "counts": s.get("counts") or {},
            "rows": list(rows.values()), "config": {"carry_commits": GateConfig.carry_commits}}


def _show_regress(doc: dict, title: str | None = None, full: bool = False) -> None:
    from ..store.verdicts import why
    from ..record import unresolved
    counts = doc.get("counts") or {}
    print(f"{title or 'gate on ' + str(doc.get('machine'))}: commit "
          f"{str(doc.get('commit'))[:10]}, exit {doc.get('exit')}: "
          + (", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
             or ("EMPTY run" if doc.get("empty") else "no series")))
    reasons = unresolved.lines(doc["rows"], doc.get("config"))
    if reasons:
        print("  UNRESOLVED, why" + ("" if full else " (--full: each one's whole note)") + ":")
        for line in reasons:
            print(f"    {line}")
    explained = set()
    for r in doc["rows"]:
        if r["verdict"] not in ("ok", "new", "improved") or r.get("effects"):   # A/B's too
            effect = (f" (min effect {100 * r['min_effect']:.1f} %)"
                      if r.get("min_effect") is not None else "")
            print(f"  {r['kernel']} {r['size']} {r['metric']}{effect}: {r['verdict']} "
                  f"{unresolved.note(r, doc.get('config'), full)}")
            line = why(r.get("explanation")) if r["verdict"] == "DROP" else ""
            if line and (r["kernel"], r["size"]) not in explained:   # once for both metrics
                explained.add((r["kernel"], r["size"]))
                print(f"    why: {line}")
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
