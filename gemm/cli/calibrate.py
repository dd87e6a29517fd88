"""`gemm calibrate`: this runner's A/B noise (A/A) and what the gate detects here (injected
delays), or other GPUs' files pooled (--pool) or joined (--join) into this machine's; the
noise and detection tables (which `gemm show` prints for a calibration file too).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core import shapes
from .common import UsageError, _need_gpu, _targets


def add_arguments(p) -> None:
    p.add_argument("--kernel", "-k", action="append", help="kernels for the noise (default all)")
    p.add_argument("--sizes", nargs="+", default=list(shapes.TRACKED),
                   help="sizes for the noise, N or MxNxK (default: the tracked sizes)")
    p.add_argument("--processes", type=int, default=6,
                   help="A/A processes (default 6; 0: keep the file's noise, trials only)")
    p.add_argument("--inject-kernel", action="append",
                   help="kernels of the detection test (default: the first three)")
    p.add_argument("--inject-sizes", nargs="+", default=["2048", "4096", "8192"],
                   help="sizes of the detection test (default 2048 4096 8192)")
    p.add_argument("--shares", nargs="+", type=float, default=[0.005, 0.01, 0.02, 0.03],
                   help="injected delays, as shares of the kernel's time")
    p.add_argument("--trials", type=int, default=5,
                   help="detection trials per injected delay (default 5; 0: noise only)")
    p.add_argument("--add-trials", action="store_true",
                   help="add the trials to the file's (same gate settings, kernels, sizes "
                   "and noise: with --processes 0), numbered on per share")
    p.add_argument("--min-rounds", type=int, default=None,
                   help="rounds before the first decision (default: the gate's)")
    p.add_argument("--max-rounds", type=int, default=None,
                   help="rounds before UNRESOLVED (default: the gate's)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of each share's A/B, its rounds planned to fit, as the gate's "
                   "(default: the gate's)")
    p.add_argument("--mean-rule", action="store_true",
                   help="trials decide as gemm regress --mean-rule does (means only)")
    p.add_argument("--overtime", type=float, default=None, metavar="S",
                   help="seconds of overtime per share past its budget for what is on course "
                   "for a DROP (default: the gate's; 0: none)")
    p.add_argument("--repo", default=".", help="the checkout whose code is measured")
    p.add_argument("--machine", default=None, help="asv machine name (default: from the GPU)")
    p.add_argument("--out", default="calibration", help="directory (default calibration/)")
    p.add_argument("--join", nargs="+", metavar="FILE",
                   help="add these files' detection trials (same settings and noise, e.g. "
                   "from another GPU's lane) to the machine's file; measures nothing")
    p.add_argument("--pool", nargs="+", metavar="FILE",
                   help="pool these files' A/A noise (other GPUs of the same name, e.g. a pool "
                   "of lent machines) into the machine's file, series by series; empties its "
                   "detection table where its trials' series gained noise; measures nothing")


def run(args) -> int:
    from ..core.shapes import problems
    from ..calibrate import runner as calibrate
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
    bad = next((f"--shares must lie in (0, 1), got {s:g}" for s in args.shares if not 0 < s < 1),
               None)
    if bad is None and (args.processes == 1 or args.processes < 0):
        bad = (f"--processes must be 0 (the file's noise) or at least 2 (an A/A spread needs "
               f"two), got {args.processes}")
    if bad is None and args.trials < 0:
        bad = f"--trials must be 0 or more, got {args.trials}"
    if bad:
        raise UsageError(bad)
    if args.processes == 0 and args.trials == 0:
        raise UsageError("--processes 0 --trials 0 would measure nothing")
    ok, why = gpu_present()   # asked of `gemm measure --probe`, whose error line `why` is
    if not ok:
        _need_gpu()           # this process's own sentence (the probe's has its prefix)
        raise UsageError(f"the measuring processes cannot use the GPU ({why})")
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
    from ..calibrate.runner import tail_of
    from ..track.decision import POWER, family_size, rounds_needed
    from ..track.gate import GateConfig as G
    from .tables import table
    g = G()
    fam = family_size(20, g.min_rounds, g.max_rounds)   # a commit with 20 comparisons
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
          f"rounds: A B B A rounds for the gate to call its minimum effect a DROP with "
          f"{100 * POWER:.0f} % power (20 comparisons; the gate stops at {g.max_rounds}).")
    try:
        import scipy  # noqa: F401  (rounds_needed's t quantiles; the track extra)
        rounds = lambda r: rounds_needed(r["sigma"], g.effect_for(r["size"]), g.alpha, fam,  # noqa: E731
                                         prior_dof=r["dof"])
    except ImportError:
        print("(rounds: '-', scipy is not installed here: pip install 'gemm[track]')")
        rounds = lambda r: "-"  # noqa: E731
    from ..track.calibration import of_doc
    cal = of_doc(doc.get("machine"), doc)
    print("rule: how the gate's A/B decides the series: by means, or by trimmed means "
          "where the A/A shows a heavy tail (the rounds column is the mean rule's).")
    rows = []
    for r in doc.get("noise") or []:
        tail = tail_of(r.get("values") or [])
        rule = "trimmed" if cal.heavy_tailed(r["kernel"], r["size"], r["metric"]) else "mean"
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
    (gemm.calibrate.pooling.pool); nothing is measured, no GPU is needed."""
    from ..calibrate import runner as calibrate
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
    file (gemm.calibrate.pooling.join); nothing is measured, no GPU is needed."""
    from ..calibrate import runner as calibrate
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
                "rule": {True: "Huber locations for heavy-tailed series",
                         "trimmed": "trimmed means for heavy-tailed series"}.get(
                             g.get("robust"), "means only"),
                "overtime": f"overtime {g['overtime_s']:g} s" if g.get("overtime_s")
                            else "no overtime"}
    from ..calibrate.runner import trial_settings
    from ..track.gate import GateConfig
    now = describe(trial_settings(GateConfig()))
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
