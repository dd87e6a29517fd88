"""Launch geometry: which entry points of a kernel run over which grids (pure arithmetic).

Split kernels (spec.edge set) run one launch: the main entry over an (N // tile_n, M // tile_m)
grid when the tiles divide M and N, else the edge entry alone over the ceil grid, whose blocks
take the main code path on a full tile and the bounds-checked one on a partial tile
(kernels/common.cuh full_tile). Kernels with vector loads (spec.align > 1) need N and K to be
multiples of `align`; other shapes run the bounds-checked `fallback` entry over the ceil grid.
Single kernels get the ceil grid and check bounds themselves.
"""
from __future__ import annotations

from .problem import Problem, ShapeRefused
from .registry import KernelSpec

MAX_GRID_Y = 65535

Grid = tuple[int, int, int]


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
    g = (-(-N // tn), -(-M // tm), 1)
    _check_y(g[1], M)
    if not aligned(spec, prob):
        return [(spec.fallback, g)]
    if spec.split and (M % tm or N % tn):
        return [(spec.edge, g)]
    return [(spec.main, g)]


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
    """Tile origins (row0, col0) the launch covers: the Python twin of the CUDA mapping
    (blockIdx.y, blockIdx.x times the tile; GROUP's rasterization permutes the same grid),
    used by the CPU tests to prove every element of C belongs to exactly one block."""
    tm, tn = spec.tile
    return [(by * tm, bx * tn) for _, (gx, gy, _) in plan(spec, prob)
            for by in range(gy) for bx in range(gx)]
