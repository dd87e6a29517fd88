"""Command line: gemm list | bench | measure | check | show | record | regress | calibrate |
publish | plot | tune | baseline | machine.

Thin: every command parses its arguments, validates them, and calls the stages. Commands that
need a GPU say so in one sentence and exit 2 where there is none.

One module per command, as asv has: each has add_arguments(parser) and run(args) -> int
(regress.py's is main(args)); what several commands share (UsageError, resolving kernels,
sizes and policies, the GPU check, the sweep) is in common.py. This module only makes the
parser from the table of commands and runs the one asked for.
"""
from __future__ import annotations

import argparse
import sys

from . import (baseline, bench, calibrate, check, listing, machine, measure, plot, publish,
               record, readme, regress, show, summary, tune)
from . import explain
from ..core.registry import RegistryError
from .common import UsageError
from .record import _bench_regex, fault_injection_in  # noqa: F401  (imported from here too)
from .show import _time_split  # noqa: F401  (imported from here too)


# (command, its module, its one line in `gemm --help`), in the order the help lists them
COMMANDS = (
    ("list", listing, "the registered kernels"),
    ("bench", bench, "time kernels against cuBLAS (the seed's table)"),
    ("measure", measure, "measure and print a gemm.measure/1 JSON document "
     "(the stable entry point scripts and the gate's A/B use)"),
    ("check", check, "correctness of kernels over a list of shapes"),
    ("show", show, "tables from saved measurements, gate reports, calibrations or asv's "
     "result files"),
    ("record", record, "record a commit's benchmarks with asv into results/"),
    ("regress", regress, "gate: newest commit vs the recorded history"),
    ("plot", plot, "PNG plots from the recorded history"),
    ("publish", publish, "asv's HTML history (optionally usable offline)"),
    ("calibrate", calibrate, "this runner's A/B noise (A/A) and what the gate "
     "detects here (injected delays); writes calibration/<machine>.json"),
    ("tune", tune, "search a kernel's constants on this GPU (its `tune` space)"
     " and write the winners per tuning bucket to kernels/tuned/<gpu>.toml"),
    ("baseline", baseline, "today's cuBLAS call against cublasLt's heuristic candidates, "
     "timed interleaved per configuration and size; --choose writes "
     "baselines/<gpu>-choice.toml, the baseline the suite runs"),
    ("machine", machine, "write asv's machine file for this GPU"),
    ("summary", summary, "markdown summary of a commit's sweeps and gate report (CI)"),
    ("explain", explain, "why a kernel changed: resources, SASS and launch of two builds; "
     "where a GPU answers, both timed and profiled with ncu"),
    ("readme", readme, "README.md's results table from the newest recorded run (--check: compare)"),
)


def version() -> str:
    """The installed package's version, else the source's (gemm.__version__)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    try:
        return installed("gemm")
    except PackageNotFoundError:
        import gemm
        return getattr(gemm, "__version__", "unknown")


class _Version(argparse.Action):
    """`gemm --version`: the version is looked up only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the package version and exit"):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gemm", description="Hand-written CUDA SGEMM kernels "
                                "against cuBLAS: list, benchmark, check, record, gate regressions.")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name, module, one_line in COMMANDS:
        c = sub.add_parser(name, help=one_line)
        module.add_arguments(c)
        c.set_defaults(fn=getattr(module, "run", None) or module.main)   # regress: main
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (UsageError, RegistryError) as exc:   # bad input: one sentence, before any GPU work
        print(f"gemm {args.cmd}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gemm {args.cmd}: interrupted", file=sys.stderr)
        return 130
