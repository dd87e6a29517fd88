"""Launch geometry: which entry points of a kernel run over which grids (pure arithmetic).

Split kernels (spec.edge set): the main entry gets a (N // tile_n, M // tile_m) grid of full
tiles; the edge entry a 1-D grid over the right strip (one block per row tile, corner
included) and the bottom strip (one block per full column tile), in the order that
kernels/common.cuh's edge_tile_origin decodes. Kernels with vector loads (spec.align > 1) need
N and K to be multiples of `align`; other shapes run the bounds-checked `fallback` entry over
the ceil grid. Single kernels get the ceil grid and check bounds themselves.
"""
from __future__ import annotations

from .problem import Problem, ShapeRefused
from .registry import KernelSpec

MAX_GRID_Y = 65535

Grid = tuple[int, int, int]


def edge_blocks(M: int, N: int, tm: int, tn: int) -> int:
    right = -(-M // tm) if N % tn else 0
    bottom = N // tn if M % tm else 0
    return right + bottom


def aligned(spec: KernelSpec, prob: Problem) -> bool:
    return prob.N % spec.align == 0 and prob.K % spec.align == 0


def _check_y(rows: int, M: int) -> None:
    if rows > MAX_GRID_Y:
        raise ShapeRefused(f"M = {M} needs {rows} row tiles, past CUDA's grid limit {MAX_GRID_Y}")


def plan(spec: KernelSpec, prob: Problem) -> list[tuple[str, Grid]]:
    """[(entry point, grid), ...] in launch order. A kernel with an `align` and no fallback
    (a TMA kernel) raises ShapeRefused (a ValueError) for shapes it cannot take, before any
    launch."""
    tm, tn = spec.tile
    M, N = prob.M, prob.N
    if not aligned(spec, prob) and not spec.fallback:
        raise ShapeRefused(f"{spec.name} needs N and K to be multiples of {spec.align} "
                         f"(got {prob.label}) and has no fallback entry")
    if not spec.split or not aligned(spec, prob):
        entry = spec.main if aligned(spec, prob) else spec.fallback
        g = (-(-N // tn), -(-M // tm), 1)
        _check_y(g[1], M)
        return [(entry, g)]
    calls = []
    if M >= tm and N >= tn:
        _check_y(M // tm, M)
        calls.append((spec.main, (N // tn, M // tm, 1)))
    n_edge = edge_blocks(M, N, tm, tn)
    if n_edge:
        calls.append((spec.edge, (n_edge, 1, 1)))
    return calls


def unsupported(spec: KernelSpec, prob: Problem) -> str | None:
    """Why `spec` refuses `prob` by its launch contract (an `align` without a fallback, TMA's
    16-byte row strides where the kernel does not stage K padded), or None. Pure: asked
    before anything reaches the GPU."""
    from .staging import kernel_problem
    from .tensormaps import plans
    try:
        plan(spec, prob)
        plans(spec, kernel_problem(spec, prob))
    except ShapeRefused as exc:
        return str(exc)
    return None


def persistent_grid(tiles: Grid, sms: int) -> Grid:
    """The launch grid of a persistent kernel (registry `persistent`) whose tile grid is
    `tiles`: one block per SM, fewer when there are fewer tiles. The blocks stride over the
    same tiles (tile_cover), so what C they cover does not change."""
    n = tiles[0] * tiles[1] * tiles[2]
    return (max(1, min(n, sms)), 1, 1)


def tile_cover(spec: KernelSpec, prob: Problem) -> list[tuple[int, int]]:
    """Tile origins (row0, col0) the launch covers: the Python twin of the CUDA mapping,
    used by the CPU tests to prove every element of C belongs to exactly one block."""
    tm, tn = spec.tile
    M, N = prob.M, prob.N
    out = []
    for entry, (gx, gy, _) in plan(spec, prob):
        if entry != spec.edge:
            out += [(by * tm, bx * tn) for by in range(gy) for bx in range(gx)]
            continue
        for b in range(gx):
            if N % tn:
                tiles_m = -(-M // tm)
                if b < tiles_m:
                    out.append((b * tm, (N // tn) * tn))
                    continue
                b -= tiles_m
            out.append(((M // tm) * tm, b * tn))
    return out
