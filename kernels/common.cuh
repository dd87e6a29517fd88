// Shared helpers for the SGEMM kernels: the BLAS epilogue, the edge-block map and the
// block-tile K step of kernels 04 and 05.
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

// One K step of the block-tile skeleton (kernels 04 and 05): stage the kBM x kBK tile of A at
// column k0 (a points at the block's first row, leading dimension K) and the kBK x kBN tile of
// B at row k0 (b points at the block's first column, leading dimension N) in shared memory,
// __syncthreads, run compute() over them, __syncthreads so the next step may overwrite the
// tiles. EDGE checks rows of A against rows_left and columns of B
// against cols_left. KTAIL is the K remainder (k_left < kBK): the loads past k_left read as
// zero, and the closing barrier is left out since no step follows. The main loop and the tail
// are the same step: the tail is one more call with KTAIL set.
template <int kBM, int kBN, int kBK, int kThreads, bool EDGE, bool KTAIL, typename Compute>
__device__ __forceinline__ void block_k_step(float* __restrict__ As, float* __restrict__ Bs,
                                             const float* __restrict__ a, const float* __restrict__ b,
                                             int k0, int K, int N, int rows_left, int cols_left,
                                             int k_left,
                                             Compute&& compute) {
    load_tile_strided<kBM, kBK, kThreads, EDGE, KTAIL>(As, a + k0, K, rows_left, k_left);
    load_tile_strided<kBK, kBN, kThreads, KTAIL, EDGE>(Bs, b + k0 * N, N, k_left, cols_left);
    __syncthreads();
    compute();
    if constexpr (!KTAIL) __syncthreads();
}
