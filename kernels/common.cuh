// Shared helpers for the SGEMM kernels: the BLAS epilogue, the edge-block map and the
// block-tile K step of kernels 04 and 05.
// Every kernel computes C = alpha * A @ B + beta * C on row-major float32 matrices,
// A is M x K, B is K x N, C is M x N. As in BLAS, C is not read when beta == 0.
#pragma once

__device__ __forceinline__ float gemm_epilogue(float acc, float alpha, float beta, const float* c) {
    return beta == 0.0f ? alpha * acc : alpha * acc + beta * (*c);
}

// Split kernels launch their main entry over the full tiles (grid N/tile_n x M/tile_m) when the
// tiles divide M and N, and otherwise their edge entry alone over the ceil grid: one launch in
// which each block takes the main code path when its tile is full and the bounds-checked path
// when it is partial (a block-uniform branch). gemm/core/geometry.py plans the same launches.
__device__ __forceinline__ bool tile_is_full(int M, int N, int tile_m, int tile_n, int row0,
                                             int col0) {
    return row0 + tile_m <= M && col0 + tile_n <= N;
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

// ---- Helpers for the vectorized kernels (06 onward) -------------------------------------
// Each of them instantiates one templated block body three ways:
//   MODE_MAIN      full tiles, no bounds checks, 128-bit loads and stores;
//   MODE_EDGE      a partial tile (the edge entry's blocks that full_tile refuses), 128-bit
//                  loads and stores with bounds checks at 4-float granularity;
//   MODE_FALLBACK  any shape (ceil grid), scalar loads and stores, every element checked.
// MAIN and EDGE rely on the registry's `align = 4` contract (N % 4 == 0 and K % 4 == 0): every
// row of A, B and C then starts 16-byte aligned and every remainder is a multiple of 4, so a
// float4 is either wholly inside the matrix or wholly outside.
enum { MODE_MAIN = 0, MODE_EDGE = 1, MODE_FALLBACK = 2 };

// Compile-time flag passed to a generic lambda (the K step): ktail<true>{} is the K remainder.
template <bool V>
struct ktail {
    static constexpr bool value = V;
};

// Four consecutive floats of one row: g points at element (r, c). CHECK_R / CHECK_C test
// r < r_left / c < c_left; what fails reads as zero. SCALAR loads them one at a time and
// checks each column (no alignment assumed).
template <bool CHECK_R, bool CHECK_C, bool SCALAR>
__device__ __forceinline__ float4 load4(const float* __restrict__ g, int r, int r_left, int c,
                                        int c_left) {
    const bool row_ok = !CHECK_R || r < r_left;
    if constexpr (SCALAR) {
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = (row_ok && (!CHECK_C || c + i < c_left)) ? g[i] : 0.0f;
        return make_float4(v[0], v[1], v[2], v[3]);
    } else {
        if (row_ok && (!CHECK_C || c < c_left)) return __ldg(reinterpret_cast<const float4*>(g));
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}

// C[r, c .. c+3] = alpha * acc + beta * C (C not read when beta == 0); p points at C[r, c].
// CHECK skips what lies outside rows_left x cols_left; SCALAR stores one float at a time.
template <bool CHECK, bool SCALAR>
__device__ __forceinline__ void store4(float* __restrict__ p, float4 acc, float alpha, float beta,
                                       int r, int rows_left, int c, int cols_left) {
    if constexpr (SCALAR) {
        const float v[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (!CHECK || (r < rows_left && c + i < cols_left))
                p[i] = gemm_epilogue(v[i], alpha, beta, p + i);
    } else {
        if (CHECK && !(r < rows_left && c < cols_left)) return;
        float4 out = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
        if (beta != 0.0f) {
            const float4 old = *reinterpret_cast<const float4*>(p);
            out.x += beta * old.x; out.y += beta * old.y; out.z += beta * old.z; out.w += beta * old.w;
        }
        *reinterpret_cast<float4*>(p) = out;
    }
}

// Block origin: blockIdx.y, blockIdx.x times the tile. kGroup > 0 rasterizes the grid of the
// main and edge entries for L2 reuse: blocks launched one after another walk down kGroup row
// tiles of one column tile before moving right, so the blocks resident at a time share fewer
// distinct tiles of A and B. The map is a permutation of the (gridDim.x, gridDim.y) grid, so
// the launch geometry does not change (the fallback is never rasterized).
template <int MODE, int kGroup = 0>
__device__ __forceinline__ void block_origin(int M, int N, int tile_m, int tile_n, int& row0,
                                             int& col0) {
    if constexpr (MODE != MODE_FALLBACK && kGroup > 0) {
        const int gx = gridDim.x, gy = gridDim.y;
        const int pid = blockIdx.y * gx + blockIdx.x;
        const int per_group = kGroup * gx;
        const int first_m = (pid / per_group) * kGroup;
        const int group_m = min(gy - first_m, kGroup);
        const int in_group = pid % per_group;
        row0 = (first_m + in_group % group_m) * tile_m;
        col0 = (in_group / group_m) * tile_n;
    } else {
        row0 = blockIdx.y * tile_m;
        col0 = blockIdx.x * tile_n;
    }
}

// The edge entry's branch: does this block's tile (block_origin's map) lie wholly inside C?
template <int kGroup = 0>
__device__ __forceinline__ bool full_tile(int M, int N, int tile_m, int tile_n) {
    int row0, col0;
    block_origin<MODE_MAIN, kGroup>(M, N, tile_m, tile_n, row0, col0);
    return tile_is_full(M, N, tile_m, tile_n, row0, col0);
}

// cp.async (sm_80+, LDGSTS in SASS): copy global memory straight into shared memory without
// passing through registers. With CHECK, ok == false copies nothing and zero-fills the
// destination (src-size 0); the source is then replaced by `safe` (any valid address), so no
// out-of-bounds address is ever formed into a request.
template <bool CHECK>
__device__ __forceinline__ void cp_async4(float* smem, const float* g, bool ok, const float* safe) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    if constexpr (CHECK)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(ok ? g : safe),
                     "r"(ok ? 4 : 0));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(g));
}
template <bool CHECK>
__device__ __forceinline__ void cp_async16(float* smem, const float* g, bool ok, const float* safe) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    if constexpr (CHECK)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(ok ? g : safe),
                     "r"(ok ? 16 : 0));
    else
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(g));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
