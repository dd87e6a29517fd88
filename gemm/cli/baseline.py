"""`gemm baseline`: today's cuBLAS call against cublasLt's heuristic candidates for the same
problem, per configuration x size, on this GPU (gemm.measure.baseline); prints a table each
and writes the comparison (schema gemm.baseline/1) with --json. Measuring changes nothing;
`--choose` turns recorded comparisons into the GPU model's committed choice file
(baselines/<gpu>-choice.toml, gemm.core.ltchoice), which the suite's baseline follows."""
from __future__ import annotations

import json
import os
import sys

from ..core import registry
from .common import UsageError, _need_gpu, _problems

MAX_ALGOS = 64


def add_arguments(p) -> None:
    from ..measure.baseline import DEFAULT_CONFIGS, DEFAULT_SIZES
    p.add_argument("-b", "--baseline", action="append", metavar="NAME",
                   help="cuBLAS configuration (repeatable; default: "
                   f"{' '.join(DEFAULT_CONFIGS)}; known: {' '.join(registry.BASELINES)})")
    p.add_argument("--sizes", nargs="+", default=list(DEFAULT_SIZES),
                   help=f"N (square) or MxNxK (default: {' '.join(DEFAULT_SIZES)})")
    p.add_argument("--algos", type=int, default=8,
                   help=f"heuristic candidates asked for, 1-{MAX_ALGOS} (default 8)")
    p.add_argument("--rounds", type=int, default=5,
                   help="timed rounds, each one batch of every function in turn, 3-50 (default 5)")
    p.add_argument("--workspace-mib", type=int, default=32,
                   help="cublasLt's workspace in MiB, 0-1024 (default 32, as frameworks give it)")
    p.add_argument("--budget-s", type=float, default=300.0,
                   help="start no new problem after this many seconds (default 300)")
    p.add_argument("--json", help="write the comparison (schema gemm.baseline/1) to this file")
    p.add_argument("--choose", nargs="+", metavar="JSON",
                   help="measure nothing: from these gemm.baseline/1 files (one GPU model, "
                   "any number of GPUs) write the model's choice file, the algorithm the "
                   "suite's baseline runs per configuration x size (gemm.core.ltchoice)")
    p.add_argument("--out", help="with --choose: the file to write (default "
                   "baselines/<gpu>-choice.toml; - prints it)")


def _configs(names) -> list[str]:
    from ..measure.baseline import DEFAULT_CONFIGS
    out = []
    for n in names or DEFAULT_CONFIGS:
        if n not in registry.BASELINES:
            raise UsageError(f"unknown cuBLAS configuration {n!r} (known: "
                             f"{', '.join(registry.BASELINES)})")
        if n not in out:
            out.append(n)
    return out


def _check_args(args) -> tuple[list[str], list]:
    """The configurations and problems; UsageError (one sentence) for anything wrong."""
    configs = _configs(args.baseline)
    problems = _problems(args.sizes)
    for name, value, lo, hi in (("--algos", args.algos, 1, MAX_ALGOS),
                                ("--rounds", args.rounds, 3, 50),
                                ("--workspace-mib", args.workspace_mib, 0, 1024)):
        if not lo <= value <= hi:
            raise UsageError(f"{name} must be between {lo} and {hi}, got {value}")
    if not args.budget_s > 0:
        raise UsageError(f"--budget-s must be positive, got {args.budget_s:g}")
    if args.json:   # its folder is made now, so that a run is never lost to a bad path
        if os.path.isdir(args.json):
            raise UsageError(f"--json {args.json} is a folder, not a file")
        try:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--json {args.json}: its folder cannot be made ({exc})") from None
    return configs, problems


def choose(args) -> int:
    """`--choose`: the choice file from recorded comparisons; no GPU."""
    from ..core import ltchoice
    docs = []
    for name in args.choose:
        try:
            with open(name) as f:
                docs.append((name, json.load(f)))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--choose {name} cannot be read as JSON ({exc})") from None
    try:
        cf = ltchoice.choose(docs, made_by="gemm baseline --choose " + " ".join(args.choose))
    except ltchoice.ChoiceError as exc:
        raise UsageError(str(exc)) from None
    text = ltchoice.render(cf)
    if args.out == "-":
        print(text, end="")
        return 0
    out = args.out or str(ltchoice.path_for(cf.slug))
    with open(out, "w") as f:
        f.write(text)
    chosen = [e for e in cf.entries if e.call is ltchoice.Call.CUBLASLT]
    print(f"{out}: {cf.gpu}, {len(cf.entries)} configuration x size entries, "
          f"{len(chosen)} on cuBLASLt" + "".join(f"\n  {e.config} {e.size}: {e.algo.label()} "
                                              f"({e.why})" for e in chosen))
    return 0


def run(args) -> int:
    if args.choose:
        return choose(args)
    if args.out:
        raise UsageError("--out goes with --choose")
    configs, problems = _check_args(args)
    _need_gpu()
    from ..cuda.device import GPUUnavailable
    from ..measure import baseline
    try:
        doc = baseline.run(configs, problems, n_algos=args.algos, rounds=args.rounds,
                           workspace_bytes=args.workspace_mib << 20, budget_s=args.budget_s,
                           log=lambda s: print(s, file=sys.stderr, flush=True))
    except GPUUnavailable as exc:
        raise UsageError(f"this command needs a CUDA GPU with cuBLASLt, and none is usable "
                         f"here: {exc}") from None
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    print(render(doc))
    return 0 if healthy(doc) else 1


def healthy(doc: dict) -> bool:
    """No run-level failure: not aborted, every problem measured, today's call correct."""
    return doc.get("aborted") is None and all(
        not e["error"] and e["today"].get("ok") for e in doc["results"])


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _mib(n) -> str:
    return "-" if n is None else f"{n / (1 << 20):.1f}"


def entry_table(entry: dict) -> str:
    """One configuration x size: today's call, then each candidate with its ratio and verdict."""
    from .tables import table
    t = entry["today"]
    rows = [["today", "default", "", "", "", "", "", "", _f(t.get("ms"), ".4f"),
             _f(t.get("tflops"), ".1f"), _f(None if t.get("spread") is None
                                            else 100 * t["spread"], ".2f"),
             "1", "", "ok" if t.get("ok") else ("WRONG" if t.get("ok") is False else "-")]]
    for c in entry["candidates"]:
        a = c.get("algo") or {}
        spread = None if c.get("spread") is None else 100 * c["spread"]
        rng = ("" if c.get("ratio_min") is None
               else f"{c['ratio_min']:.3f}-{c['ratio_max']:.3f}")
        verdict = c.get("verdict") or "-"
        if c["rank"] == entry.get("best"):
            verdict += " (best)"
        rows.append([f"#{c['rank']}", _f(a.get("id"), ""), _f(a.get("tile"), ""),
                     _f(a.get("stages"), ""), _f(a.get("splitk"), ""),
                     _f(a.get("cluster"), ""), _mib(c.get("workspace_bytes")),
                     _f(c.get("waves"), ".2f"), _f(c.get("ms"), ".4f"),
                     _f(c.get("tflops"), ".1f"), _f(spread, ".2f"), _f(c.get("ratio"), ".3f"),
                     rng, verdict])
    head = (f"{entry['config']} {entry['size']}: today {entry['today_call']}; cublasLt "
            f"{entry.get('lt_compute') or 'gave no candidates'}")
    notes = [f"  heuristic: {n}" for n in entry.get("heuristic_notes") or []]
    notes += [f"  #{c['rank']}: {c['error']}" for c in entry["candidates"] if c.get("error")]
    notes += [f"  #{c['rank']}: wrong: max err/tol {c['check']['max_err_over_tol']:.3g}"
              for c in entry["candidates"] if c.get("check") and not c.get("ok")]
    if entry.get("error"):
        return "\n".join([head, f"  error: {entry['error']}"] + notes)
    body = table(["", "algo", "tile", "stages", "splitK", "cluster", "ws MiB", "waves", "ms",
                  "TFLOPS", "spread %", "x today", "rounds", "verdict"], rows,
                 "lrllrlrrrrrrrl")
    return "\n".join([head, body] + notes)


def render(doc: dict) -> str:
    m = doc.get("machine") or {}
    s = doc.get("settings") or {}
    lines = [f"{m.get('gpu', '?')} ({m.get('identity') or 'identity unknown'}), driver "
             f"{m.get('driver', '?')}, cuBLAS {m.get('cublas', '?')}, cuBLASLt "
             f"{m.get('cublaslt', '?')}, nvmath-python {m.get('nvmath', '?')}; "
             f"{s.get('algos', '?')} candidates asked, {_mib(s.get('workspace_bytes'))} MiB "
             f"workspace, {s.get('rounds', '?')} rounds, {_f(doc.get('wall_s'), '.0f')} s",
             "x today: median over rounds of candidate / today's time in the same round; "
             "faster / slower: in every round (else same); spread: robust sigma / median."]
    for entry in doc["results"]:
        lines += ["", entry_table(entry)]
    if doc.get("aborted"):
        lines += ["", f"ABORTED: {doc['aborted']}"]
    return "\n".join(lines)
