"""`python -m gemm.measure.once KERNEL --size S [--define NAME=V]... [--launches N]
[--seconds T]`: launch one registered kernel at one size, and nothing else (no cuBLAS, no
correctness check): what `gemm explain` times and profiles with ncu in each side's tree.

The kernel is this tree's, as the harness runs it (gemm.cuda.launch: the tuned constants of
this GPU's table for the size class, then the --define overrides), on fixed-seed random
operands in [-1, 1) (bf16 operands as the top 16 bits of the float32 values). First
`--launches` launches, each waited for (ncu's `--launch-skip N-1 --launch-count 1` profiles
the last of them); then, with `--seconds`, half a second of launches untimed (the clocks and
the power settle under load) and `--seconds` of batches of 10 launches timed by CUDA events.
The last line on stdout is `@@ONCE {json}`: kernel, size, defines, entries and grids,
launches (one by one) and timed, ms (median per launch over the batches, or null), busy ([start, end] of the timed
batches, time.time()), device, package (the gemm that ran). Exit 2 with one sentence where it
cannot (unknown kernel or constant, nvcc failed, a refused shape, an arch this GPU cannot
run), 4 where there is no usable GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

TAG = "@@ONCE "
BATCH = 10
WARM_S = 0.5          # launching, untimed, before the timed batches
EXIT_CANNOT = 2
EXIT_NO_GPU = 4


def parse_define(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    try:
        if not sep or not name.strip():
            raise ValueError
        return name.strip(), int(value, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"define {text!r} is not NAME=INTEGER") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gemm.measure.once",
                                description="launch one kernel at one size (for ncu, timing)")
    p.add_argument("kernel", help="kernel name or unique prefix")
    p.add_argument("--size", required=True, help="N (square) or MxNxK")
    p.add_argument("--define", action="append", default=[], type=parse_define,
                   metavar="NAME=V", help="override a constant (repeatable)")
    p.add_argument("--launches", type=int, default=4,
                   help="launches waited for one by one first (default 4)")
    p.add_argument("--seconds", type=float, default=0.0,
                   help="then time batches of launches for this long (default 0: none)")
    return p


def _operand(drv, rng, rows: int, cols: int, in_bytes: int):
    import numpy as np
    x = rng.random((rows, cols), dtype=np.float32) * 2 - 1
    if in_bytes == 2:   # bfloat16: the float32 value's top half
        x = (x.view(np.uint32) >> 16).astype(np.uint16)
    return drv.to_device(np.ascontiguousarray(x))


def run(args) -> dict:
    """Launch as asked; the result document. Raises ValueError (one sentence) where it
    cannot, GPUUnavailable where there is no GPU."""
    import numpy as np

    from ..core.geometry import plan
    from ..core.problem import Problem
    from ..core.registry import get
    from ..core.tuning import resolve
    from ..cuda import device
    from ..cuda.launch import launcher
    from ..cuda.loader import CompileError

    prob = Problem.parse(args.size)
    spec = get(args.kernel)
    drv = device.cuda()
    info = device.info()
    spec = resolve(spec, prob, info.slug)
    if args.define:
        spec = spec.with_defines(**dict(args.define))
    try:
        launch = launcher(spec, prob)
    except CompileError as exc:
        raise ValueError(str(exc).strip().splitlines()[0]) from None
    rng = np.random.default_rng(2024)
    a = _operand(drv, rng, prob.M, prob.K, spec.operands.in_bytes)
    b = _operand(drv, rng, prob.K, prob.N, spec.operands.in_bytes)
    c = drv.mem_alloc(prob.M * prob.N * 4)
    drv.memset_d32(c, 0, prob.M * prob.N)
    stream = drv.Stream()
    for _ in range(max(args.launches, 0)):
        launch(a, b, c, stream)
        stream.synchronize()
    per, busy = [], None
    if args.seconds > 0:
        start, end = drv.Event(), drv.Event()
        warm = time.time() + WARM_S   # the clocks and power settle under load first
        while time.time() < warm:
            for _ in range(BATCH):
                launch(a, b, c, stream)
            stream.synchronize()
        t0 = time.time()
        while time.time() - t0 < args.seconds or len(per) < 3:
            start.record(stream)
            for _ in range(BATCH):
                launch(a, b, c, stream)
            end.record(stream)
            end.synchronize()
            per.append(end.time_since(start) / BATCH)
        busy = [t0, time.time()]
    for buf in (a, b, c):
        buf.free()
    import gemm
    return {"kernel": spec.name, "size": prob.label, "defines": dict(spec.defines),
            "entries": [[e, list(g)] for e, g in plan(spec, prob)],
            "launches": max(args.launches, 0), "timed": BATCH * len(per),
            "ms": sorted(per)[len(per) // 2] if per else None, "batches": len(per),
            "busy": busy, "device": info.name,
            "package": os.path.abspath(gemm.__file__)}


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from ..cuda.device import GPUUnavailable
    try:
        doc = run(args)
    except GPUUnavailable as exc:
        print(f"gemm.measure.once: no GPU: {exc}", file=sys.stderr)
        return EXIT_NO_GPU
    except (ValueError, TypeError) as exc:   # unknown kernel or constant, refused shape
        print(f"gemm.measure.once: {exc}", file=sys.stderr)
        return EXIT_CANNOT
    sys.stdout.write(TAG + json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
