"""Where one launch of 18 spends its time, job by job (the STREAM_K draft's SK_TRACE marks).

    python3 ci/probes/sk_trace.py --size 2048 --stream-k 0 1

For each schedule: launches 18 (tuned constants for the size, then STREAM_K and SK_TRACE=1)
a few times, clears the marks, launches once more and prints, for the first blocks, each job
(tile, K steps) with the SM cycles of its K loop and of its epilogue; then the spread of all
blocks' ends (microseconds, globaltimer) and the median K loop, epilogue and a consumer's idle
time between its jobs (cycles).
Needs a GPU; the marks cost a few instructions per job (SK_TRACE 0 builds without them).
"""
from __future__ import annotations

import argparse

import numpy as np


def trace(size: str, stream_k: int, blocks: int, extra: dict | None = None) -> None:
    import ml_dtypes
    from gemm.core import registry
    from gemm.core.problem import Problem
    from gemm.core.tuning import resolve
    from gemm.cuda.device import cuda, info
    from gemm.cuda.launch import launcher
    from gemm.cuda.loader import load

    drv = cuda()
    prob = Problem.parse(size)
    spec = resolve(registry.get("18"), prob, info().slug)
    spec = spec.with_defines(STREAM_K=stream_k, SK_TRACE=1, **(extra or {}))
    launch = launcher(spec, prob)
    module = load(spec).module
    rng = np.random.default_rng(0)
    a = drv.to_device((rng.random((prob.M, prob.K), dtype=np.float32) * 2 - 1)
                      .astype(ml_dtypes.bfloat16).view(np.uint16))
    b = drv.to_device((rng.random((prob.N, prob.K), dtype=np.float32) * 2 - 1)
                      .astype(ml_dtypes.bfloat16).view(np.uint16))
    c = drv.mem_alloc(prob.M * prob.N * 4)
    for _ in range(20):
        launch(a, b, c)
    marks, marks_size = module.get_global("sk_trace")
    gmarks, gmarks_size = module.get_global("sk_gtrace")
    drv.memset_d8(marks, 0, marks_size)
    drv.memset_d8(gmarks, 0, gmarks_size)
    drv.Context.synchronize()
    launch(a, b, c)
    drv.Context.synchronize()
    t = np.empty(marks_size // 8, dtype=np.uint64)
    g = np.empty(gmarks_size // 8, dtype=np.uint64)
    drv.memcpy_dtoh(t, marks)
    drv.memcpy_dtoh(g, gmarks)
    jobs = t.reshape(-1, 16, 4).astype(np.int64)
    gt = g.reshape(-1, 4).astype(np.int64)
    used = np.nonzero(gt[:, 0])[0]
    t0 = gt[used, :2][gt[used, :2] > 0].min()
    print(f"== 18 at {size}, STREAM_K {stream_k}, {spec.defines}: {len(used)} blocks")
    ends = (np.maximum(gt[used, 2], gt[used, 3]) - t0) / 1000
    print(f"block end (us after the first start): min {ends.min():.2f} median "
          f"{np.median(ends):.2f} max {ends.max():.2f}")
    loops, epis, waits = [], [], []
    for blk in list(used[:blocks]) + list(used[-2:]):
        first = min(jobs[blk, j, 0] for j in range(16) if jobs[blk, j, 0])
        us = [f"{(x - t0) / 1000:.2f}" if x else "-" for x in gt[blk]]   # 0: never ran
        print(f"block {blk} timeline (cycles after its first job's start; consumer starts "
              f"{us[0]} / {us[1]} us, ends {us[2]} / {us[3]} us): "
              + "; ".join(f"j{j} {jobs[blk, j, 0] - first}..{jobs[blk, j, 1] - first}"
                          f"..{jobs[blk, j, 2] - first}" for j in range(16) if jobs[blk, j, 0]))
    for blk in used[:blocks]:
        row = []
        for j in range(16):
            start, loop_end, end, what = jobs[blk, j]
            if not start:
                continue
            tile, kb, ke = what >> 32, (what >> 16) & 0xFFFF, what & 0xFFFF
            row.append(f"j{j} t{tile} k{kb}-{ke}: loop {(loop_end - start)} epi "
                       f"{(end - loop_end)} cyc")
        print(f"block {blk}: " + "; ".join(row))
    for blk in used:
        for j in range(16):
            start, loop_end, end, _ = jobs[blk, j]
            if start:
                loops.append(loop_end - start)
                epis.append(end - loop_end)
            if j >= 2 and start and jobs[blk, j - 2, 2]:
                waits.append(start - jobs[blk, j - 2, 2])   # the same consumer's idle time
    print(f"per job: K loop median {np.median(loops):.0f} cycles, epilogue median "
          f"{np.median(epis):.0f} (max {np.max(epis):.0f}), a consumer's wait for its next "
          f"turn median {np.median(waits) if waits else 0:.0f} cycles")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="2048")
    p.add_argument("--stream-k", type=int, nargs="+", default=[0, 1])
    p.add_argument("--blocks", type=int, default=6, help="blocks printed job by job")
    p.add_argument("--define", action="append", default=[], help="NAME=VALUE over the tuned")
    args = p.parse_args()
    for sk in args.stream_k:
        trace(args.size, sk, args.blocks,
              {k: int(v) for k, v in (d.split("=", 1) for d in args.define)})


if __name__ == "__main__":
    main()
