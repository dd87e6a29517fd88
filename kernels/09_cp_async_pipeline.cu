// 09 Multistage pipeline, on top of step 08's warp tiling: the K tiles move from global to
// shared memory with cp.async (LDGSTS: no round trip through registers, no extra instructions to
// store them), STAGES tiles in flight: while the warps compute on one stage, the copies of the
// next STAGES - 1 tiles are already under way, so global latency hides behind the FMAs of
// several tiles instead of stalling every K step as in 06-08. A keeps its transposed layout in
// shared memory: it is copied with 4-byte cp.async, a warp covering 4 rows x 8 k per copy
// (32-byte sectors, bank-conflict-free stores with PAD_A = 4); B with 16-byte cp.async. The
// register fragments are double-buffered: the loads for k + 1 are issued before the FMAs of k,
// and the first fragments of the next stage are read as soon as it has landed, so only one
// barrier per K tile remains (08: two). Main / edge / fallback kernels and the K remainder as in
// 06 (cp.async src-size 0 zero-fills what lies outside); the fallback copies A and B with 4-byte
// checked cp.async. GROUP > 0 rasterizes the main grid (common.cuh block_origin).
// Constants (-D): BM, BN (block tile), BK (K step), WM, WN (warp tile), LANE_ROWS (lane rows in a
// sub-tile), PAD_A, STAGES (>= 2), GROUP, MIN_BLOCKS (blocks per SM asked of ptxas:
// __launch_bounds__), SPLIT_K_OK (1: split-K over gridDim.z, step 10 only; 0 here);
// threads = 32 * (BM / WM) * (BN / WN)
// (256 with the defaults 128, 256, 8, 64, 64, 4, 4, 3, 0, 1: a 128 x 256 block tile, 8 warps
// of 64 x 64, 16 x 8 outputs per thread as 4 x 2 sub-tiles of 16 x 32, 245 registers, one block
// per SM). Tried on the H200 (% of cuBLAS at 4096 / 8192): 128 x 128 with 128 threads and the
// 8 x 4 lane grid 88.5 / 89.8, the same with 4 x 8 lanes 89.2-90.3 / 90.3-91.0, 128 x 256 with
// 8 x 4 lanes 92.1-92.6 / 92.7-93.3, 256 x 128 (4 x 8 lanes) 91.4 / 91.7, 2 x 16 lanes 82.5 /
// 82.8, 256 threads of 8 x 8 at 128 x 128: 87.4 / 87.7 (MIN_BLOCKS = 2: 80.9 / 81.1, spills);
// STAGES 3, 4, 5 within 0.7 %; GROUP = 8 rasterization 1-3 % slower.
// Static shared memory STAGES * BK * (BM + PAD_A + BN) * 4 bytes must stay <= 48 KB.
// Measured on the H200 by the suite (recorded at 1ed380e; TFLOPS, % of cuBLAS FP32 measured
// interleaved): 11.75 at 1024 (30 %), 47.25 at 2048 (94 %),
// 47.79 at 4096 (93 %), 48.01 at 8192 (94 %); 3001x2999x3003 (fallback path) 30.57 (70 %).
// Gain over 08_warptiling at 4096 / 8192: +12.5 % / +11.3 %.
#include "common.cuh"
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 8
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef LANE_ROWS
#define LANE_ROWS 4
#endif
#ifndef PAD_A
#define PAD_A 4
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef GROUP
#define GROUP 0
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#ifndef SPLIT_K_OK
#define SPLIT_K_OK 0
#endif
#define LANE_COLS (32 / LANE_ROWS)
#define NTHREADS (32 * (BM / WM) * (BN / WN))
#define TM (WM / LANE_ROWS)         // outputs per thread along M (TM / 4 sub-tiles)
#define TN (WN / LANE_COLS)         // outputs per thread along N (TN / 4 sub-tiles)
#define AS_LD (BM + PAD_A)
static_assert(BM % WM == 0 && BN % WN == 0 && 32 % LANE_ROWS == 0, "warp tiles must divide the block tile");
static_assert(TM % 4 == 0 && TN % 4 == 0, "a warp tile is a grid of 4 x 4 lane patches");
static_assert(BK % 8 == 0 && PAD_A % 4 == 0 && STAGES >= 2, "BK a multiple of 8, As rows 16-byte aligned");
static_assert((BM * BK) % NTHREADS == 0 && (BK * BN / 4) % NTHREADS == 0,
              "every thread copies the same number of elements of each tile");
static_assert(STAGES * BK * (AS_LD + BN) * 4 <= 48 * 1024, "static shared memory is limited to 48 KB");

// Issue the copies of one K tile into stage buffers As / Bs. a / b point at the tile's first
// element. A element idx of this thread: k = idx % 8 + 8 * (idx / (8 * BM)), row (idx / 8) % BM.
template <int MODE, bool KTAIL>
__device__ __forceinline__ void copy_tile(float* __restrict__ As, float* __restrict__ Bs,
                                          const float* __restrict__ a, const float* __restrict__ b,
                                          int K, int N, int rows_left, int cols_left, int k_left,
                                          const float* A, const float* B) {
    constexpr bool EDGE = MODE != MODE_MAIN, SCALAR = MODE == MODE_FALLBACK;
#pragma unroll
    for (int i = 0; i < BM * BK / NTHREADS; ++i) {
        const int idx = (int)threadIdx.x + i * NTHREADS;
        const int k = idx % 8 + 8 * (idx / (8 * BM)), r = (idx / 8) % BM;
        const bool ok = (!EDGE || r < rows_left) && (!KTAIL || k < k_left);
        cp_async4<EDGE || KTAIL>(&As[k * AS_LD + r], a + (size_t)r * K + k, ok, A);
    }
#pragma unroll
    for (int i = 0; i < BK * BN / 4 / NTHREADS; ++i) {
        const int idx = (int)threadIdx.x + i * NTHREADS;
        const int k = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
        const float* g = b + (size_t)k * N + c;
        const bool row_ok = !KTAIL || k < k_left;
        if constexpr (SCALAR) {
#pragma unroll
            for (int j = 0; j < 4; ++j) cp_async4<true>(&Bs[k * BN + c + j], g + j, row_ok && c + j < cols_left, B);
        } else {
            cp_async16<EDGE || KTAIL>(&Bs[k * BN + c], g, row_ok && (!EDGE || c < cols_left), B);
        }
    }
}

// The stage buffers, at file scope so that the edge entry's two block bodies (full and
// partial tile) share them.
__shared__ __align__(16) float As[STAGES][BK * AS_LD];
__shared__ __align__(16) float Bs[STAGES][BK * BN];

template <int MODE>
__device__ __forceinline__ void block_tile(int M, int N, int K, float alpha, const float* __restrict__ A,
                                           const float* __restrict__ B, float beta, float* __restrict__ C) {
    int row0, col0;
    block_origin<MODE, GROUP>(M, N, BM, BN, row0, col0);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int m_base = (warp / (BN / WN)) * WM + (lane / LANE_COLS) * 4;
    const int n_base = (warp % (BN / WN)) * WN + (lane % LANE_COLS) * 4;
    const float* a = A + (size_t)row0 * K;
    const float* b = B + col0;
    const int rows_left = M - row0, cols_left = N - col0;
#if SPLIT_K_OK
    // split-K (gemm/core/splitk.py): block z of gridDim.z runs K range [z * chunk, z * chunk +
    // k_len) and stores its partial tile in slice z of the workspace the launcher passes as C
    const int chunk = ((K + (int)gridDim.z - 1) / (int)gridDim.z + BK - 1) / BK * BK;
    const int k_begin = (int)blockIdx.z * chunk, k_len = min(chunk, K - k_begin);
    a += k_begin;
    b += (size_t)k_begin * N;
    C += (size_t)blockIdx.z * M * N;
#else
    const int k_len = K;
#endif
    const int full_tiles = k_len / BK, tiles = (k_len + BK - 1) / BK;

    auto issue = [&](int t, int stage) {  // copies of K tile t (if any), then one commit group
        if (t < full_tiles)
            copy_tile<MODE, false>(As[stage], Bs[stage], a + t * BK, b + (size_t)t * BK * N, K, N,
                                   rows_left, cols_left, BK, A, B);
        else if (t < tiles)  // K remainder: the same copies, zero-padded
            copy_tile<MODE, true>(As[stage], Bs[stage], a + t * BK, b + (size_t)t * BK * N, K, N,
                                  rows_left, cols_left, k_len - t * BK, A, B);
        cp_async_commit();
    };
    auto load_frag = [&](float (&rm)[TM], float (&rn)[TN], int stage, int dot) {
#pragma unroll
        for (int i = 0; i < TM; i += 4)
            *reinterpret_cast<float4*>(&rm[i]) = *reinterpret_cast<const float4*>(
                &As[stage][dot * AS_LD + m_base + (i / 4) * LANE_ROWS * 4]);
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            *reinterpret_cast<float4*>(&rn[j]) = *reinterpret_cast<const float4*>(
                &Bs[stage][dot * BN + n_base + (j / 4) * LANE_COLS * 4]);
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s, s);

    float acc[TM][TN] = {};
    float rm[2][TM], rn[2][TN];
    int read_stage = 0, write_stage = STAGES - 1;
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    load_frag(rm[0], rn[0], 0, 0);

    for (int t = 0; t < tiles; ++t) {
#pragma unroll
        for (int dot = 0; dot < BK; ++dot) {
            if (dot == BK - 1) {  // the next tile must have landed before its fragments are read
                cp_async_wait<STAGES - 2>();
                __syncthreads();
                read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
            }
            load_frag(rm[(dot + 1) % 2], rn[(dot + 1) % 2], read_stage, (dot + 1) % BK);
            if (dot == 0) {  // the stage read during tile t - 1 is free: refill it with tile t + STAGES - 1
                issue(t + STAGES - 1, write_stage);
                write_stage = write_stage == STAGES - 1 ? 0 : write_stage + 1;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += rm[dot % 2][i] * rn[dot % 2][j];
        }
    }
    cp_async_wait<0>();  // nothing may be in flight into shared memory when the block exits

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = m_base + (i / 4) * LANE_ROWS * 4 + i % 4;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int c = n_base + (j / 4) * LANE_COLS * 4;
            store4<MODE != MODE_MAIN, MODE == MODE_FALLBACK>(
                C + (size_t)(row0 + r) * N + col0 + c,
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), alpha, beta, r,
                rows_left, c, cols_left);
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
sgemm_pipeline_main(int M, int N, int K, float alpha, const float* __restrict__ A,
                    const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
sgemm_pipeline_edge(int M, int N, int K, float alpha, const float* __restrict__ A,
                    const float* __restrict__ B, float beta, float* __restrict__ C) {
    if (full_tile<GROUP>(M, N, BM, BN))
        block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);
    else
        block_tile<MODE_EDGE>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
sgemm_pipeline_fallback(int M, int N, int K, float alpha, const float* __restrict__ A,
                        const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile<MODE_FALLBACK>(M, N, K, alpha, A, B, beta, C);
}
