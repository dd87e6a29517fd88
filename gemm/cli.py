"""Command line: gemm list | bench | check | regress | plot | machine.

Thin: every command parses its arguments, validates them, and calls the stages. Commands that
need a GPU say so in one sentence and exit 2 where there is none.
"""
from __future__ import annotations

import argparse
import json
import sys

from . import registry
from .problem import Problem

CHECK_SHAPES = ("64", "128", "256", "512", "1024", "1000x832x504", "1x1x1", "65x129x7",
                "127x1x300", "1x4097x3", "4095x63x129", "2048")
CHECK_AB = ((1.0, 0.0), (1.5, 0.5), (-1.0, 2.0))


class UsageError(Exception):
    pass


def _kernels(names) -> list[str]:
    if not names:
        return registry.names()
    try:
        return [registry.get(n).name for n in names]
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _problems(sizes) -> list[Problem]:
    try:
        return [Problem.parse(s) for s in sizes]
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None


def _need_gpu() -> None:
    from .device import probe
    ok, why = probe()
    if not ok:
        raise UsageError(f"this command needs a CUDA GPU, and none is usable here: {why}")


def _progress(done, total, rec):
    from .report import progress_line
    print(progress_line(done, total, rec), file=sys.stderr, flush=True)


def cmd_list(args) -> int:
    from .report import table
    rows = [[s.name, s.file, " ".join(f"{k}={v}" for k, v in s.defines.items()),
             "x".join(map(str, s.tile)), s.threads, "main+edge" if s.split else "single",
             s.precision, s.baseline, s.summary] for s in registry.registry().values()]
    print(table(["kernel", "file", "constants", "tile", "threads", "launch", "precision",
                 "baseline", "what"], rows, "llllrllll"))
    return 0


def cmd_bench(args) -> int:
    from .report import bench_table
    from .sweep import sweep
    from .timing import Policy
    kernels = _kernels(args.kernel)
    problems = _problems(args.sizes)
    try:
        policy = Policy(mode=args.mode)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _need_gpu()
    res = sweep(kernels, problems, policy, progress=_progress)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    dev = res.get("device") or {}
    print(f"\n{dev.get('name', '?')} ({dev.get('arch', '?')}, {dev.get('sms', '?')} SMs), "
          f"{policy.mode} L2, CUDA-event medians, {res['wall_s']:.0f} s")
    for k in kernels:
        print(f"\n{k}\n" + bench_table(res["records"], k))
    bad = [r for r in res["records"] if r["status"] != "ok"]
    for r in bad:
        print(f"\n{r['kernel']} {r['size']}: {r['status']}: {(r.get('error') or '')[:500]}")
    return 1 if bad else 0


def cmd_check(args) -> int:
    from .report import check_line
    from .sweep import sweep
    kernels = _kernels(args.kernel)
    problems = _problems(args.shapes)
    _need_gpu()
    res = sweep(kernels, problems, time_it=False, ab=CHECK_AB)
    for r in res["records"]:
        print(check_line(r))
    bad = [r for r in res["records"] if r["status"] != "ok"]
    print(f"\n{len(res['records']) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


def cmd_show(args) -> int:
    from .report import bench_table, summary_table
    try:
        with open(args.file) as f:
            res = json.load(f)
        records = res["records"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{args.file} is not a sweep JSON file ({exc})") from None
    if args.full:
        for k in dict.fromkeys(r["kernel"] for r in records):
            print(f"\n{k}\n" + bench_table(records, k))
    dev = res.get("device") or {}
    print(f"\n{dev.get('name', '?')}: {len(records)} measurements in {res.get('wall_s', 0):.0f} s")
    print(summary_table(records))
    return 0


def cmd_regress(args) -> int:
    from . import regress
    return regress.main(args)


def cmd_plot(args) -> int:
    from . import plot
    return plot.main(args)


def cmd_publish(args) -> int:
    from . import publish
    return publish.main(args)


def cmd_machine(args) -> int:
    from . import track
    return track.write_machine(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gemm", description="Hand-written CUDA SGEMM kernels "
                                "against cuBLAS: list, benchmark, check, gate regressions.")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the registered kernels").set_defaults(fn=cmd_list)

    b = sub.add_parser("bench", help="time kernels against cuBLAS (the seed's table)")
    b.add_argument("--kernel", "-k", action="append", help="kernel name or prefix (repeatable)")
    b.add_argument("--sizes", nargs="+", default=["512", "1024", "2048", "4096", "8192"],
                   help="N (square) or MxNxK")
    b.add_argument("--mode", default="hot", help="hot (default) or cold L2")
    b.add_argument("--json", help="write every sample and clock reading to this file")
    b.set_defaults(fn=cmd_bench)

    c = sub.add_parser("check", help="correctness of kernels over a list of shapes")
    c.add_argument("--kernel", "-k", action="append")
    c.add_argument("--shapes", nargs="+", default=list(CHECK_SHAPES))
    c.set_defaults(fn=cmd_check)

    sh = sub.add_parser("show", help="tables from a saved sweep (gemm bench --json)")
    sh.add_argument("file")
    sh.add_argument("--full", action="store_true", help="the per-kernel tables too")
    sh.set_defaults(fn=cmd_show)

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
    pb.set_defaults(fn=cmd_publish)

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
