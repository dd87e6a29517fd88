"""`gemm readme`: the README's results table, written from the recorded history.

The table is the newest recorded run of one machine (gemm.store.history.load_runs; newest by
the order it returns), kernels down, square sizes across (and the odd shape 3001x2999x3003),
each cell "TFLOPS (NN %)" with % of the kernel's same-precision cuBLAS (measured interleaved);
"—" where the run has no value (a failed kernel, or a shape it refuses). cuBLAS's own rows
(measured alone) follow, TFLOPS only. It replaces what lies between the README's markers
BEGIN and END; `--check` only compares (exit 1 when the README's table is not what it would
write), so a CPU test can hold the README to results/.
"""
from __future__ import annotations

import difflib
import json
import textwrap
import time
from pathlib import Path

from ..core import metrics
from .common import UsageError

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
SQUARE = ("512", "1000", "1024", "2048", "4096", "8192")
ODD = ("3001x2999x3003",)
DASH = "—"


def add_arguments(p) -> None:
    p.add_argument("--results", default="results", help="asv results directory (default results/)")
    p.add_argument("--machine", default=None,
                   help="machine name (default: the only one in the results directory)")
    p.add_argument("--commit", default=None,
                   help="render this commit's run instead of the newest (a hash prefix)")
    p.add_argument("--file", default="README.md",
                   help=f"the file whose table between {BEGIN} and {END} is rewritten "
                        "(default README.md)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 when the file's table differs from what "
                        "this command would write")


def _num(v: float) -> str:
    """TFLOPS to about three significant figures: 0.48, 6.33, 20.7, 351."""
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _baseline(kernel: str) -> str:
    from ..core import registry
    try:
        return registry.get(kernel).baseline
    except (KeyError, ValueError):
        return ""


def _machine_words(run, machine: str) -> str:
    """'h200 (NVIDIA H200, driver ..., CUDA ...)' from the run file's asv params."""
    try:
        params = json.loads(Path(run.path).read_text()).get("params") or {}
    except (OSError, ValueError):
        params = {}
    facts = [params.get("gpu"), params.get("driver") and f"driver {params['driver']}",
             params.get("cuda") and f"CUDA {params['cuda']}"]
    facts = [f for f in facts if f]
    return f"`{machine}`" + (f" ({', '.join(facts)})" if facts else "")


def _size_key(size: str):
    from ..core.problem import Problem
    p = Problem.parse(size)
    return (p.M * p.N * p.K, size)


def render(run, machine: str) -> str:
    """The markdown between the markers (without them) for one recorded run."""
    tfl, pct = metrics.TFLOPS.key, metrics.PCT_OF_CUBLAS.key
    sizes = {k.size for k in run.points}
    cols = sorted((s for s in SQUARE if s in sizes), key=_size_key) + [s for s in ODD if s in sizes]
    kernels = sorted({k.target for k in run.points if not k.baseline})
    bases = sorted({k.target for k in run.points if k.baseline})

    def value(target, size, key, baseline=False):
        p = run.points.get(metrics.Series(target, size, key, baseline))
        v = None if p is None else p.value
        return v if v is not None and v == v else None   # None: failed; NaN: skipped

    def cell(kernel, size):
        t = value(kernel, size, tfl)
        if t is None:
            return DASH
        c = value(kernel, size, pct)
        return _num(t) + ("" if c is None else f" ({c:.0f} %)")

    day = time.strftime("%Y-%m-%d", time.gmtime(run.date / 1000)) if run.date else "?"
    head = ["kernel", "cuBLAS baseline"] + cols
    caption = (f"Commit {run.commit[:7]} ({day}) on {_machine_words(run, machine)}, as recorded "
               f"in `results/{machine}/{run.commit[:8]}-*.json`: TFLOPS (% of the "
               f"same-precision cuBLAS, measured interleaved), {DASH} where the run has no "
               f"value (a shape the kernel refuses, or a failure). Written by `gemm readme`; "
               f"do not edit by hand.")
    lines = textwrap.wrap(caption, 95, break_long_words=False, break_on_hyphens=False) + [
        "",
        "| " + " | ".join(head) + " |",
        "| --- | --- |" + " ---: |" * len(cols),
    ]
    for k in kernels:
        lines.append("| " + " | ".join([k, _baseline(k)] + [cell(k, s) for s in cols]) + " |")
    for b in bases:
        row = [value(b, s, tfl, True) for s in cols]
        lines.append("| " + " | ".join([f"{b} (alone)", ""]
                                      + [DASH if v is None else _num(v) for v in row]) + " |")
    return "\n".join(lines)


def splice(text: str, table: str) -> str:
    """`text` with what lies between BEGIN and END replaced by `table`."""
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < 0 or j < i or text.count(BEGIN) != 1 or text.count(END) != 1:
        raise UsageError(f"needs exactly one {BEGIN} ... {END} pair, in that order")
    return text[:i + len(BEGIN)] + "\n" + table + "\n" + text[j:]


def _shown(file: str, results: str) -> str | None:
    """With several machines in the results (a fleet) and no --machine: the one the file's
    table already shows (its caption names `results/<machine>/`), so that every machine's
    job writes the same table."""
    import re
    try:
        text = Path(file).read_text()
    except OSError:
        return None
    i = text.find(BEGIN)
    hit = re.search(r"`results/([^/`]+)/", text[i:]) if i >= 0 else None
    return hit.group(1) if hit and (Path(results) / hit.group(1)).is_dir() else None


def run(args) -> int:
    from ..store.history import HistoryError, load_runs, resolve_machine
    try:
        machine = resolve_machine(args.results, args.machine or _shown(args.file, args.results))
        runs, _ = load_runs(args.results, machine)
    except HistoryError as exc:
        raise UsageError(str(exc)) from None
    if not runs:
        raise UsageError(f"{args.results} holds no runs for machine {machine!r}")
    if args.commit:
        hits = [r for r in runs if r.commit.startswith(args.commit)]
        if not hits:
            raise UsageError(f"no recorded run of commit {args.commit} for machine {machine!r}")
        chosen = hits[-1]
    else:
        chosen = runs[-1]
    if not chosen.points:
        raise UsageError(f"commit {chosen.commit[:7]}'s run holds no values of the current "
                         f"benchmark versions ({chosen.other_versions} rows of others: the "
                         f"series restarted since it was recorded)")
    path = Path(args.file)
    try:
        old = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc})") from None
    try:
        new = splice(old, render(chosen, machine))
    except UsageError as exc:
        raise UsageError(f"{path} {exc}") from None
    if args.check:
        if new == old:
            print(f"{path}: the results table is commit {chosen.commit[:7]}'s ({machine})")
            return 0
        print(f"{path}: the results table differs from commit {chosen.commit[:7]}'s run "
              f"({machine}); `gemm readme` rewrites it:")
        print("".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                           str(path), "gemm readme", n=0)), end="")
        return 1
    if new != old:
        path.write_text(new)
        print(f"{path}: results table written from commit {chosen.commit[:7]} ({machine})")
    else:
        print(f"{path}: results table already commit {chosen.commit[:7]}'s ({machine})")
    return 0
