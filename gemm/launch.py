"""Launch geometry (pure arithmetic) and the launch of a loaded kernel on device buffers.

Split kernels (spec.edge set): the main kernel gets a (N // tile_n, M // tile_m) grid of full
tiles; the edge kernel a 1-D grid over the right strip (one block per row tile, corner
included) and the bottom strip (one block per full column tile), in the order that
kernels/common.cuh's edge_tile_origin decodes. Other kernels get the ceil grid and check
bounds themselves.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import Problem
from .registry import KernelSpec

MAX_GRID_Y = 65535
# (int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C)
SIGNATURE = "iiifPPfP"


@dataclass(frozen=True)
class Grids:
    main: tuple[int, int, int] | None   # None: no full tile (the edge kernel covers it all)
    edge: tuple[int, int, int] | None   # None: no remainder


def edge_blocks(M: int, N: int, tm: int, tn: int) -> int:
    right = -(-M // tm) if N % tn else 0
    bottom = N // tn if M % tm else 0
    return right + bottom


def grids(spec: KernelSpec, prob: Problem) -> Grids:
    tm, tn = spec.tile
    M, N = prob.M, prob.N
    if not spec.split:
        g = (-(-N // tn), -(-M // tm), 1)
        if g[1] > MAX_GRID_Y:
            raise ValueError(f"M = {M} needs {g[1]} row tiles, past CUDA's grid limit {MAX_GRID_Y}")
        return Grids(g, None)
    main = (N // tn, M // tm, 1) if (M >= tm and N >= tn) else None
    if main and main[1] > MAX_GRID_Y:
        raise ValueError(f"M = {M} needs {main[1]} row tiles, past CUDA's grid limit {MAX_GRID_Y}")
    n_edge = edge_blocks(M, N, tm, tn)
    return Grids(main, (n_edge, 1, 1) if n_edge else None)


def tile_cover(spec: KernelSpec, prob: Problem) -> list[tuple[int, int]]:
    """Tile origins (row0, col0) the launch covers: the Python twin of the CUDA mapping,
    used by the CPU tests to prove every element of C belongs to exactly one block."""
    tm, tn = spec.tile
    g = grids(spec, prob)
    out = []
    if g.main:
        out += [(by * tm, bx * tn) for by in range(g.main[1]) for bx in range(g.main[0])]
    if g.edge:
        M, N = prob.M, prob.N
        for b in range(g.edge[0]):
            if N % tn:
                tiles_m = -(-M // tm)
                if b < tiles_m:
                    out.append((b * tm, (N // tn) * tn))
                    continue
                b -= tiles_m
            out.append(((M // tm) * tm, b * tn))
    return out


def launcher(spec: KernelSpec, prob: Problem):
    """A function launch(a_ptr, b_ptr, c_ptr, stream) that enqueues the kernel once."""
    from .loader import load
    k = load(spec)
    g = grids(spec, prob)
    block = spec.block
    calls = [(f, grid) for f, grid in ((k.main, g.main), (k.edge, g.edge)) if grid]
    for f, _ in calls:
        f.prepare(SIGNATURE)
    M, N, K = prob.M, prob.N, prob.K
    alpha, beta = float(prob.alpha), float(prob.beta)

    def launch(a, b, c, stream=None):
        for f, grid in calls:
            f.prepared_async_call(grid[:2], block, stream, M, N, K, alpha, int(a), int(b),
                                  beta, int(c))

    return launch
