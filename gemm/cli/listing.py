"""`gemm list`: the registered kernels, in 100 columns (`-v`: every field of each entry)."""
from __future__ import annotations

import textwrap

from ..core import registry

WIDTH = 100   # every line of `gemm list` fits this many columns


def add_arguments(p) -> None:
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every entry's file, constants, launch, baseline and arch too")


def run(args) -> int:
    specs = list(registry.registry().values())
    print(_details(specs) if args.verbose else _table(specs))
    return 0


def _launch(s) -> str:
    return (("main+edge" if s.split else "persistent" if s.persistent else "single")
            + (f", align {s.align}" if s.align > 1 else "") + (", split-K" if s.split_k else ""))


def _table(specs) -> str:
    """Kernel, precision, tile, threads and what it does, the last wrapped within WIDTH."""
    from .tables import table
    heads = ["kernel", "precision", "tile", "threads"]
    fixed = [[s.name, s.precision, "x".join(map(str, s.tile)), s.threads] for s in specs]
    widths = [max(len(str(c)) for c in col) for col in zip(heads, *fixed)]
    room = max(20, WIDTH - sum(widths) - 2 * len(widths))
    rows = []
    for s, row in zip(specs, fixed):
        lines = textwrap.wrap(s.summary, room, break_on_hyphens=False) or [""]
        rows.append(row + [lines[0]])
        rows += [["", "", "", ""] + [line] for line in lines[1:]]
    return (table(heads + ["what"], rows, "lllrl")
            + "\n\n(gemm list -v: files, constants, launch, cuBLAS baseline and arch)")


def _details(specs) -> str:
    """One block per kernel: each field on its own line, wrapped within WIDTH."""
    out = []
    for s in specs:
        fields = [("file", s.file), ("what", s.summary),
                  ("constants", " ".join(f"{k}={v}" for k, v in s.defines.items()) or "-"),
                  ("tile", "x".join(map(str, s.tile))),
                  ("block", f"{'x'.join(map(str, s.block))} ({s.threads} threads)"
                   + (f", {s.smem} B dynamic shared memory" if s.smem_expr else "")),
                  ("launch", _launch(s) + (", tuned per GPU" if s.tuned else "")),
                  ("entries", " ".join(s.entries)),
                  ("precision", f"{s.precision}, B {s.b_layout}, against {s.baseline}"),
                  ("arch", s.arch)]
        out.append(s.name)
        for key, val in fields:
            out += textwrap.wrap(str(val), WIDTH, initial_indent=f"  {key:<10} ",
                                 subsequent_indent=" " * 13) or [f"  {key}"]
    return "\n".join(out)
