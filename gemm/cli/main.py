"""Command line: gemm list | bench | measure | check | show | record | regress | calibrate |
publish | plot | tune | machine.

Thin: every command parses its arguments, validates them, and calls the stages. Commands that
need a GPU say so in one sentence and exit 2 where there is none.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core import registry, shapes
from ..core.policy import POLICIES, Policy, named


POLICY_HELP = ("suite (the per-commit record's, default) or confirm (the gate's A/B and "
               "calibration: several operand sets per problem, more samples)")


class UsageError(Exception):
    pass


# "unsupported": a shape the kernel refuses by its launch contract (said, not a failure)
OK_STATUSES = ("ok", "unsupported")


def _targets(names, baselines_too=False) -> list[str]:
    if not names:
        return registry.names()
    out = []
    for n in names:
        if baselines_too and n in registry.BASELINES:
            out.append(n)
            continue
        try:
            out.append(registry.get(n).name)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return out


def _problems(sizes):
    try:
        return shapes.problems(sizes)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None


def _policy(mode: str, name: str = "suite") -> Policy:
    try:
        return named(name, mode)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _need_gpu() -> None:
    from ..measure.sweep import probe_gpu
    ok, why = probe_gpu()
    if not ok:
        raise UsageError(f"this command needs a CUDA GPU, and none is usable here: {why}")


def _sweep(targets, problems, **kw) -> dict:
    from ..measure.sweep import progress_printer, sweep
    return sweep(targets, problems, progress=progress_printer(sys.stderr), **kw)


def cmd_list(args) -> int:
    from .tables import table
    rows = [[s.name, s.file, " ".join(f"{k}={v}" for k, v in s.defines.items()),
             "x".join(map(str, s.tile)), s.threads,
             ("main+edge" if s.split else "single") + (f", align {s.align}" if s.align > 1 else ""),
             s.precision, s.baseline, s.summary] for s in registry.registry().values()]
    print(table(["kernel", "file", "constants", "tile", "threads", "launch", "precision",
                 "baseline", "what"], rows, "llllrllll"))
    return 0


def cmd_bench(args) -> int:
    from .tables import bench_table
    kernels = _targets(args.kernel)
    problems = _problems(args.sizes)
    policy = _policy(args.mode, args.policy)
    _need_gpu()
    doc = _sweep(kernels, problems, policy=policy)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    dev = doc.get("device") or {}
    print(f"\n{dev.get('name', '?')} ({dev.get('arch', '?')}, {dev.get('sms', '?')} SMs), "
          f"{policy.mode} L2, CUDA-event medians, {doc['wall_s']:.0f} s")
    for k in kernels:
        print(f"\n{k}\n" + bench_table(doc["records"], k))
    bad = [r for r in doc["records"] if r["status"] not in OK_STATUSES]
    for r in bad:
        print(f"\n{r['kernel']} {r['size']}: {r['status']}: {(r.get('error') or '')[:500]}")
    return 1 if bad else 0


def _tasks(tasks, kernels, sizes) -> list:
    """`--task KERNEL@SIZE` pairs, resolved as --kernel and --sizes are; not with those."""
    if kernels or sizes is not None:
        raise UsageError("--task names its own kernel and size: give --task, or --kernel and "
                         "--sizes, not both")
    out = []
    for t in tasks:
        name, at, size = t.rpartition("@")
        if not at or not name or not size:
            raise UsageError(f"--task wants KERNEL@SIZE (e.g. 05@4096 or 05@4096x4096x1024), "
                             f"got {t!r}")
        out.append((_targets([name], baselines_too=True)[0], _problems([size])[0]))
    return out


def cmd_measure(args) -> int:
    """The stable measuring entry point: a gemm.measure/1 document, nothing else on stdout."""
    if args.probe:
        _need_gpu()
        return 0
    if args.task:   # exactly these pairs, in this order (the A/B's arms: one process each)
        pairs = _tasks(args.task, args.kernel, args.sizes)
        targets, problems = [], []
    else:
        pairs = None
        targets = _targets(args.kernel, baselines_too=True)
        problems = _problems(args.sizes if args.sizes is not None else list(shapes.TRACKED))
    policy = _policy(args.mode, args.policy)
    _need_gpu()
    doc = _sweep(targets, problems, policy=policy, pairs=pairs)
    text = json.dumps(doc)
    if args.json in (None, "-"):
        sys.stdout.write(text + "\n")
    else:
        with open(args.json, "w") as f:
            f.write(text)
    return 0 if all(r["status"] in OK_STATUSES for r in doc["records"]) else 1


def cmd_check(args) -> int:
    from .tables import check_line
    targets = _targets(args.kernel, baselines_too=True)
    problems = _problems(args.shapes)
    _need_gpu()
    doc = _sweep(targets, problems, time_it=False, ab=shapes.CHECK_AB)
    for r in doc["records"]:
        print(check_line(r))
    bad = [r for r in doc["records"] if r["status"] not in OK_STATUSES]
    print(f"\n{len(doc['records']) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


def cmd_show(args) -> int:
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
            print(f"  {r['kernel']} {r['size']} {r['metric']}: {r['verdict']} {r.get('note', '')}")


def cmd_record(args) -> int:
    from ..record.machine import write_machine
    from ..record.recorder import RecordError, record, rev_parse
    sha = rev_parse(args.repo, args.commit)
    if sha is None:
        raise UsageError(f"git cannot name commit {args.commit!r} in {args.repo}")
    at = rev_parse(args.repo)
    if at != sha:   # asv runs the tree as it is: its code must be the commit's
        raise UsageError(f"{args.repo} is at {str(at)[:10]}, not at {sha[:10]}: check the commit "
                         f"out there (e.g. git worktree add) to record it")
    faults = fault_injection_in(args.repo)
    if faults and not args.allow_fault_injection:
        raise UsageError(f"fault injection is on ({faults}): values slowed on purpose would "
                         "enter the history unmarked; record into a scratch copy with "
                         "--allow-fault-injection (the gate's drift test), or turn it off")
    _need_gpu()
    machine = write_machine(args.machine)
    extra = [x for b in args.bench for x in ("-b", _bench_regex(b))]
    try:
        record(args.repo, machine, sha, extra, results=args.results)
    except RecordError as exc:
        print(f"gemm record: {exc}", file=sys.stderr)
        return 1
    return 0


def fault_injection_in(repo) -> str:
    """What would slow a recorded run on purpose: $GEMM_INJECT_DELAY, or an inject_delay in
    the registry of the tree being recorded (gemm.core.faults); '' when none."""
    import os
    from ..core.faults import ENV
    found = [f"{ENV}={os.environ[ENV]}"] if os.environ.get(ENV) else []
    path = Path(repo) / "kernels" / "kernels.toml"
    if path.is_file():
        try:
            specs = registry.load_registry(path).values()
        except ValueError:
            specs = []
        found += [f"{s.name} inject_delay = {s.inject_delay}" for s in specs if s.inject_delay]
    return "; ".join(found)


def cmd_tune(args) -> int:
    import time
    import tomllib
    from ..core import tuning
    from ..measure.facts import machine_info
    from ..measure.tune import tune
    try:
        spec = registry.get(args.kernel)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not spec.tune:
        raise UsageError(f"{spec.name} declares no search space (`tune` in kernels.toml)")
    _need_gpu()
    gpu = machine_info()["machine"]
    out = Path(args.out) if args.out else tuning.tuned_dir()
    out.mkdir(parents=True, exist_ok=True)
    res = tune(spec, log=lambda s: print(s, file=sys.stderr, flush=True))
    res.update(gpu=gpu, date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    log_path = out / f"{gpu}-{spec.name}.json"
    log_path.write_text(json.dumps(res, indent=1))
    path = out / f"{gpu}.toml"
    tables = {}
    if path.exists():
        with open(path, "rb") as f:
            tables = tomllib.load(f)
    missing = [c for c, _, _ in tuning.SIZE_CLASSES if c not in res["winners"]]
    if missing:   # keep the table as it was: a failed search must not erase earlier winners
        print(f"gemm tune: no candidate was accepted for {', '.join(missing)}; "
              f"{path} left as it was (search log: {log_path})", file=sys.stderr)
        return 1
    tables[spec.name] = res["winners"]
    path.write_text(tuning.render_table(gpu, tables, f"Search logs: {gpu}-<kernel>.json."))
    from .tables import table
    rows = [[cls, w["size"], " ".join(f"{k}={v}" for k, v in w["defines"].items()),
             f"{w['tflops']:.2f}", f"{w['pct_of_cublas']:.1f} %"]
            for cls, w in res["winners"].items()]
    ok = sum(r["status"] == "ok" for r in res["candidates"])
    print(f"{spec.name} on {gpu}: {len(res['candidates'])} candidates, {ok} accepted, "
          f"{res['wall_s']:.0f} s; winners written to {path}, search log {log_path}")
    print(table(["class", "size", "constants", "TFLOPS", "% cuBLAS"], rows, "llllr"))
    return 0 if res["winners"] else 1


def _bench_regex(name: str) -> str:
    """asv -b matches its regex against names with their parameters, so `-b 10` would also
    select every kernel at sizes containing 10: a kernel name or prefix becomes its class."""
    try:
        return rf"Kernel_{registry.get(name).name}\."
    except ValueError:
        return name   # a regex of the user's own


def cmd_machine(args) -> int:
    from ..record.machine import write_machine
    _need_gpu()
    print(write_machine(args.machine, args.path))
    return 0


def cmd_regress(args) -> int:
    from . import regress
    return regress.main(args)


def cmd_calibrate(args) -> int:
    from ..core.shapes import problems
    from ..track import calibrate
    from ..track.confirm import gpu_present
    from ..track.gate import GateConfig
    if args.join and args.pool:
        raise UsageError("--join and --pool are separate steps (pool first, then trials)")
    if args.join:
        return _calibrate_join(args)
    if args.pool:
        return _calibrate_pool(args)
    kernels = _targets(args.kernel)
    inject = _targets(args.inject_kernel) if args.inject_kernel else kernels[:3]
    for sizes in (args.sizes, args.inject_sizes):
        problems(sizes)   # bad sizes fail here, before anything runs
    if (not all(0 < s < 1 for s in args.shares) or args.processes == 1 or args.processes < 0
            or args.trials < 0):
        raise UsageError("shares in (0, 1), --processes 0 (the file's noise) or >= 2, "
                         "--trials >= 0")
    if args.processes == 0 and args.trials == 0:
        raise UsageError("--processes 0 --trials 0 would measure nothing")
    ok, why = gpu_present()
    if not ok:
        raise UsageError(f"this command needs a CUDA GPU, and none is usable here: {why}")
    machine = args.machine
    if machine is None:
        from ..measure.facts import machine_info
        machine = machine_info()["machine"]
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    from ..measure.facts import gpu_identity, gpu_name
    gate = GateConfig()
    cfg = GateConfig(min_rounds=gate.min_rounds if args.min_rounds is None else args.min_rounds,
                     max_rounds=gate.max_rounds if args.max_rounds is None else args.max_rounds,
                     budget_s=gate.budget_s if args.budget is None else args.budget,
                     robust=not args.mean_rule,
                     overtime_s=gate.overtime_s if args.overtime is None else args.overtime)
    try:
        cfg.validate()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        path, doc = calibrate.run(args.repo, machine, kernels, args.sizes, args.processes, inject,
                                  args.inject_sizes, args.shares, args.trials, cfg, args.out, log,
                                  add_trials=args.add_trials, gpu_name=gpu_name(),
                                  gpu=gpu_identity())
    except calibrate.Refused as exc:   # said before anything was measured
        raise UsageError(str(exc)) from None
    _print_noise(doc)
    _print_detection(doc, "" if args.trials else " (kept from the file's earlier calibration)")
    print(f"\ncalibration written to {path}")
    return 0


def _print_noise(doc: dict) -> None:
    """The A/A noise table of a calibration document (gemm calibrate, gemm show)."""
    from ..track.calibrate import tail_of
    from ..track.decision import rounds_needed
    from ..track.gate import GateConfig as G
    from .tables import table
    g = G()
    fam = 20 * (g.max_rounds - g.min_rounds + 1) * 2   # a commit with 20 comparisons
    srcs = doc.get("sources") or []
    gpus = len({x.get("gpu") or x.get("pci_bus_id") for x in srcs})
    where = (f"pooled over {len(srcs)} A/A runs on {gpus} GPUs "
             f"({', '.join(_source_label(x) for x in srcs)}): "
             f"{doc.get('processes')} processes, the oldest of {str(doc.get('date'))[:10]}; a "
             f"row's processes: its dof + the GPUs it has" if len(srcs) > 1 else
             f"the last calibration: {doc.get('processes')} processes, "
             f"{str(doc.get('date'))[:10]}; a row's processes: its dof + 1")
    print(f"\nA/A noise on {doc.get('gpu_name')} ({where}): sd of one process's value.\n"
          f"robust sd: 1.4826 MAD; tail: processes beyond 4 robust sds (an sd well above the "
          f"robust sd means a few processes ran apart).\n"
          f"rounds: A B B A rounds for the gate to call its minimum effect a DROP with 99 % "
          f"power (20 comparisons; the gate stops at {g.max_rounds}).")
    try:
        import scipy  # noqa: F401  (rounds_needed's t quantiles; the track extra)
        rounds = lambda r: rounds_needed(r["sigma"], g.effect_for(r["size"]), g.alpha, fam,  # noqa: E731
                                         prior_dof=r["dof"])
    except ImportError:
        print("(rounds: '-', scipy is not installed here: pip install 'gemm[track]')")
        rounds = lambda r: "-"  # noqa: E731
    from ..track.calibration import of_doc
    cal = of_doc(doc.get("machine"), doc)
    print("rule: how the gate's A/B decides the series: by means, or by Huber locations "
          "where the A/A shows a heavy tail (the rounds column is the mean rule's).")
    rows = []
    for r in doc.get("noise") or []:
        tail = tail_of(r.get("values") or [])
        rule = "huber" if cal.heavy_tailed(r["kernel"], r["size"], r["metric"]) else "mean"
        rows.append([r["kernel"], r["size"], r["metric"], f"{r['median']:.4g}",
                     f"{100 * r['sigma']:.3f}",
                     f"{100 * tail[0]:.3f}" if tail else "-", tail[1] if tail else "-", r["dof"],
                     rounds(r), rule])
    print(table(["kernel", "size", "metric", "median", "sd %", "robust sd %", "tail", "dof",
                 "rounds", "rule"], rows, "lllrrrrrrl"))


def _machine_of(args, files: list[str], flag: str) -> str:
    if args.machine is not None:
        return args.machine
    try:
        return json.loads(Path(files[0]).read_text()).get("machine")
    except (OSError, ValueError, AttributeError) as exc:
        raise UsageError(f"{flag} {files[0]}: unreadable ({exc})") from None


def _source_label(src: dict) -> str:
    gpu = src["gpu"].split()[-1][:12] if src.get("gpu") else None    # GPU-<8 hex digits>
    return f"{gpu or src.get('pci_bus_id') or '?'} x {src.get('processes')}"


def _calibrate_pool(args) -> int:
    """`gemm calibrate --pool FILE...`: other GPUs' A/A noise pooled into this machine's file
    (gemm.track.calibrate.pool); nothing is measured, no GPU is needed."""
    from ..track import calibrate
    machine = _machine_of(args, args.pool, "--pool")
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    try:
        path, doc = calibrate.pool(args.out, machine, args.pool, log)
    except calibrate.Refused as exc:
        raise UsageError(str(exc)) from None
    _print_noise(doc)
    print(f"\ncalibration written to {path}")
    return 0


def _calibrate_join(args) -> int:
    """`gemm calibrate --join FILE...`: other files' detection trials join this machine's
    file (gemm.track.calibrate.join); nothing is measured, no GPU is needed."""
    from ..track import calibrate
    machine = _machine_of(args, args.join, "--join")
    try:
        path, doc = calibrate.join(args.out, machine, args.join)
    except calibrate.Refused as exc:
        raise UsageError(str(exc)) from None
    _print_detection(doc, f" (joined from {len(args.join)} more files)")
    print(f"\ncalibration written to {path}")
    return 0


def _trials_made_under(gate: dict) -> str:
    """The gate settings a detection table was made under, and where today's gate differs
    (a table made before a change of rule is evidence for the rule it was made under)."""
    def describe(g: dict) -> dict:
        eff = g.get("min_effect") or {}
        return {"alpha": f"alpha {g.get('alpha')}",
                "effect": f"minimum effect {100 * eff.get('large', 0):g} % at 2048^3 and up",
                "rounds": f"rounds {g.get('min_rounds')}-{g.get('max_rounds')}",
                "budget": f"budget {g.get('budget_s', 0):g} s",
                "rule": "Huber locations for heavy-tailed series" if g.get("robust")
                        else "means only",
                "overtime": f"overtime {g['overtime_s']:g} s" if g.get("overtime_s")
                            else "no overtime"}
    from ..track.gate import GateConfig
    now = describe(GateConfig().trial_settings())
    made = describe(gate)
    differ = [now[k] for k in made if made[k] != now[k]]
    return ("made under: " + ", ".join(made.values())
            + (f" (today's gate: {', '.join(differ)})" if differ else ""))


def _print_detection(doc: dict, note: str) -> None:
    from .tables import table
    if doc.get("summary"):
        shares = [str(s) for s in doc["shares"]]
        det = doc.get("detection") or []
        per = ", ".join(f"+{100 * float(s):g} %: {len({d['trial'] for d in det if str(d['share']) == s})}"
                        for s in shares)
        gpus = {d.get("gpu") for d in det if d.get("gpu")}   # kept with trials from 2026-11-30
        where = f"; trials on {len(gpus)} GPUs named" if gpus else ""
        print(f"\nDetection (TFLOPS verdict DROP / trials; median measured change) with "
              f"injected delays; trials per share: {per}{where}{note}")
        print(_trials_made_under(doc.get("gate") or {}))
        print(table(["kernel", "size"] + [f"+{100 * float(s):g} %" for s in shares]
                    + ["smallest always detected"],
                    [[r["kernel"], r["size"]]
                     + [f"{r['detected'].get(s, '-')} ({100 * (r['median_change'].get(s) or 0):+.2f} %)"
                        for s in shares]
                     + [f"{100 * r['smallest_always_detected']:g} %"
                        if r["smallest_always_detected"] else "none"]
                     for r in doc["summary"]], "ll" + "r" * (len(shares) + 1)))


def cmd_plot(args) -> int:
    from ..record import plot
    return plot.main(args)


def cmd_publish(args) -> int:
    from ..record import publish
    return publish.main(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gemm", description="Hand-written CUDA SGEMM kernels "
                                "against cuBLAS: list, benchmark, check, record, gate regressions.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the registered kernels").set_defaults(fn=cmd_list)

    b = sub.add_parser("bench", help="time kernels against cuBLAS (the seed's table)")
    b.add_argument("--kernel", "-k", action="append", help="kernel name or prefix (repeatable)")
    b.add_argument("--sizes", nargs="+", default=list(shapes.TRACKED), help="N (square) or MxNxK")
    b.add_argument("--mode", default="hot", help="hot (default) or cold L2")
    b.add_argument("--policy", default="suite", choices=list(POLICIES), help=POLICY_HELP)
    b.add_argument("--json", help="write the measurement document (every sample) to this file")
    b.set_defaults(fn=cmd_bench)

    me = sub.add_parser("measure", help="measure and print a gemm.measure/1 JSON document "
                        "(the stable entry point scripts and the gate's A/B use)")
    me.add_argument("--kernel", "-k", action="append",
                    help="kernel name or prefix, or a cuBLAS configuration (repeatable)")
    me.add_argument("--sizes", nargs="+", help="N (square) or MxNxK (default: the tracked sizes)")
    me.add_argument("--task", action="append", metavar="KERNEL@SIZE",
                    help="one (kernel, size) pair, instead of --kernel x --sizes (repeatable; "
                    "measured in the order given)")
    me.add_argument("--mode", default="hot", help="hot (default) or cold L2")
    me.add_argument("--policy", default="suite", choices=list(POLICIES), help=POLICY_HELP)
    me.add_argument("--json", default="-", help="where the document goes (default: stdout)")
    me.add_argument("--probe", action="store_true", help="only say whether a GPU is usable")
    me.set_defaults(fn=cmd_measure)

    c = sub.add_parser("check", help="correctness of kernels over a list of shapes")
    c.add_argument("--kernel", "-k", action="append")
    c.add_argument("--shapes", nargs="+", default=list(shapes.CHECK_SHAPES))
    c.set_defaults(fn=cmd_check)

    sh = sub.add_parser("show", help="tables from saved measurements or gate reports")
    sh.add_argument("file", nargs="+")
    sh.add_argument("--full", action="store_true", help="the per-kernel tables too")
    sh.set_defaults(fn=cmd_show)

    rc = sub.add_parser("record", help="record a commit's benchmarks with asv into results/")
    rc.add_argument("--repo", default=".", help="checkout whose code is measured (default .)")
    rc.add_argument("--machine", default=None, help="machine name (default: from the GPU)")
    rc.add_argument("--commit", default="HEAD")
    rc.add_argument("--results", default=None, help="results directory (default: the repo's)")
    rc.add_argument("--allow-fault-injection", action="store_true",
                    help="record even with fault injection on (into a scratch history only)")
    rc.add_argument("--bench", "-b", action="append", default=[],
                    help="only this kernel (name or prefix), or benchmarks matching this regex "
                    "(asv -b); judge such a run with gemm regress --kernels")
    rc.set_defaults(fn=cmd_record)

    from .regress import add_arguments
    r = sub.add_parser("regress", help="gate: newest commit vs the recorded history")
    add_arguments(r)
    r.set_defaults(fn=cmd_regress)

    pl = sub.add_parser("plot", help="PNG plots from the recorded history")
    pl.add_argument("--results", default="results")
    pl.add_argument("--machine", default=None)
    pl.add_argument("--out", default="plots")
    pl.set_defaults(fn=cmd_plot)

    pb = sub.add_parser("publish", help="asv's HTML history (optionally usable offline)")
    pb.add_argument("--config", default="asv.conf.json")
    pb.add_argument("--offline", action="store_true",
                    help="copy asv's CDN scripts next to the pages (fetched once with npm)")
    pb.add_argument("--vendor", default=".asv/vendor", help="where those scripts are kept")
    pb.add_argument("--verdicts", default=None,
                    help="the gate's kept verdicts (default: verdicts/ beside the config)")
    pb.set_defaults(fn=cmd_publish)

    ca = sub.add_parser("calibrate", help="this runner's A/B noise (A/A) and what the gate "
                        "detects here (injected delays); writes calibration/<machine>.json")
    ca.add_argument("--kernel", "-k", action="append", help="kernels for the noise (default all)")
    ca.add_argument("--sizes", nargs="+", default=list(shapes.TRACKED))
    ca.add_argument("--processes", type=int, default=6,
                    help="A/A processes (default 6; 0: keep the file's noise, trials only)")
    ca.add_argument("--inject-kernel", action="append",
                    help="kernels of the detection test (default: the first three)")
    ca.add_argument("--inject-sizes", nargs="+", default=["2048", "4096", "8192"])
    ca.add_argument("--shares", nargs="+", type=float, default=[0.005, 0.01, 0.02, 0.03],
                    help="injected delays, as shares of the kernel's time")
    ca.add_argument("--trials", type=int, default=5)
    ca.add_argument("--add-trials", action="store_true",
                    help="add the trials to the file's (same gate settings, kernels, sizes "
                    "and noise: with --processes 0), numbered on per share")
    ca.add_argument("--min-rounds", type=int, default=None,
                    help="rounds before the first decision (default: the gate's)")
    ca.add_argument("--max-rounds", type=int, default=None,
                    help="rounds before UNRESOLVED (default: the gate's)")
    ca.add_argument("--budget", type=float, default=None,
                    help="seconds of A/B per share before no new round starts (default: the "
                    "gate's)")
    ca.add_argument("--mean-rule", action="store_true",
                    help="trials decide as gemm regress --mean-rule does (means only)")
    ca.add_argument("--overtime", type=float, default=None, metavar="S",
                    help="seconds of overtime per share past its budget for what is on course "
                    "for a DROP (default: the gate's; 0: none)")
    ca.add_argument("--repo", default=".", help="the checkout whose code is measured")
    ca.add_argument("--machine", default=None, help="asv machine name (default: from the GPU)")
    ca.add_argument("--out", default="calibration", help="directory (default calibration/)")
    ca.add_argument("--join", nargs="+", metavar="FILE",
                    help="add these files' detection trials (same settings and noise, e.g. "
                    "from another GPU's lane) to the machine's file; measures nothing")
    ca.add_argument("--pool", nargs="+", metavar="FILE",
                    help="pool these files' A/A noise (other GPUs of the same name, e.g. a pool "
                    "of lent machines) into the machine's file, series by series; empties its "
                    "detection table where its trials' series gained noise; measures nothing")
    ca.set_defaults(fn=cmd_calibrate)

    tu = sub.add_parser("tune", help="search a kernel's constants on this GPU (its `tune` space)"
                        " and write the winners per size class to kernels/tuned/<gpu>.toml")
    tu.add_argument("kernel")
    tu.add_argument("--out", default=None, help="directory (default: kernels/tuned)")
    tu.set_defaults(fn=cmd_tune)

    m = sub.add_parser("machine", help="write asv's machine file for this GPU")
    m.add_argument("--machine", default=None, help="name (default: from the GPU, e.g. h200)")
    m.add_argument("--path", default=None, help="machine file (default ~/.asv-machine.json)")
    m.set_defaults(fn=cmd_machine)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except UsageError as exc:
        print(f"gemm {args.cmd}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gemm {args.cmd}: interrupted", file=sys.stderr)
        return 130
