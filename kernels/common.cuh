// Shared helpers for the SGEMM kernels: the BLAS epilogue and the edge-block map.
// Every kernel computes C = alpha * A @ B + beta * C on row-major float32 matrices,
// A is M x K, B is K x N, C is M x N. As in BLAS, C is not read when beta == 0.
#pragma once

__device__ __forceinline__ float gemm_epilogue(float acc, float alpha, float beta, const float* c) {
    return beta == 0.0f ? alpha * acc : alpha * acc + beta * (*c);
}

// Split kernels launch a main kernel over the full tiles (grid N/tile_n x M/tile_m) and an
// edge kernel with a 1-D grid over the rest: first the right strip (when N % tile_n != 0),
// one block per row tile including the corner, then the bottom strip (when M % tile_m != 0),
// one block per full column tile. gemm/launch.py computes the same count.
__device__ __forceinline__ void edge_tile_origin(int M, int N, int tile_m, int tile_n,
                                                 int& row0, int& col0) {
    int b = blockIdx.x;
    const int full_n = N / tile_n;
    if (N % tile_n) {
        const int tiles_m = (M + tile_m - 1) / tile_m;
        if (b < tiles_m) { row0 = b * tile_m; col0 = full_n * tile_n; return; }
        b -= tiles_m;
    }
    row0 = (M / tile_m) * tile_m;
    col0 = b * tile_n;
}

// Cooperative strided load of a ROWS x COLS tile of a row-major matrix (leading dimension ld,
// g points at the tile's first element) into shared memory s, laid out row-major. NT threads
// (1-D block) each copy every NT-th element. With CHECK_ROWS / CHECK_COLS false the loads carry
// no bounds test at all; with them true, elements past rows_left / cols_left read as zero.
template <int ROWS, int COLS, int NT, bool CHECK_ROWS, bool CHECK_COLS>
__device__ __forceinline__ void load_tile_strided(float* __restrict__ s, const float* __restrict__ g,
                                                  int ld, int rows_left, int cols_left) {
#pragma unroll
    for (int off = 0; off < ROWS * COLS; off += NT) {
        const int idx = off + (int)threadIdx.x;
        if ((ROWS * COLS) % NT != 0 && idx >= ROWS * COLS) break;
        const int r = idx / COLS, c = idx % COLS;
        const bool ok = (!CHECK_ROWS || r < rows_left) && (!CHECK_COLS || c < cols_left);
        s[idx] = ok ? g[r * ld + c] : 0.0f;
    }
}
