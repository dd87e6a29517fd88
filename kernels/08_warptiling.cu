// 08 Warptiling: the block tile is split into warp tiles (WM x WN, one per warp), and each warp
// tile into a grid of sub-tiles that the warp covers one after another; inside a sub-tile the 32
// lanes form a LANE_ROWS x (32 / LANE_ROWS) grid and each lane owns a 4 x 4 patch. A thread so
// owns (WM / LANE_ROWS) x (WN / (32 / LANE_ROWS)) outputs spread over the warp tile as 4 x 4
// patches. Why: in 06/07 a warp spans 2 x 16 threads of the block grid, so per k it reads 16
// contiguous 16-byte chunks of B with each LDS.128 (2 shared-memory wavefronts) and shared
// memory bandwidth, not FMA issue, bounds the kernel. With the default 4 x 8 lane grid (32 x 64
// warp tile, 2 x 2 sub-tiles of 16 x 32) each LDS.128 of a warp touches 4 (A) or 8 (B)
// contiguous 16-byte chunks: 1 wavefront, and a warp's shared traffic stays inside its slice of
// the tile. Tried and slower on the H200: BK = 16 (fewer barriers, but 40.4-41.1 TFLOPS at
// 4096/8192 against 41.9-43.1 with BK = 8), the 8 x 4 lane grid (64 x 32 warp tile), 128 threads
// with 8 x 16 per thread (WN = 64, LANE_ROWS = 8), MIN_BLOCKS = 2.
// Loads as in 07 (float4, A transposed with rows padded by PAD_A, arranged so the transposed
// stores are conflict-free); main / edge / fallback kernels and the K remainder as in 06.
// GROUP > 0 rasterizes the main grid (common.cuh block_origin) for L2 reuse.
// Constants (-D): BM, BN (block tile), BK (K step), WM, WN (warp tile), LANE_ROWS (lane rows
// in a sub-tile: 8 or 4 or 2...), PAD_A, GROUP, MIN_BLOCKS (blocks per SM asked of ptxas:
// __launch_bounds__); threads = 32 * (BM / WM) * (BN / WN)
// (256 with the defaults 128, 128, 8, 32, 64, 4, 4, 0, 1: 8 x 8 outputs per thread).
// Measured on the H200 by the suite (recorded at 1ed380e; TFLOPS, % of cuBLAS FP32 measured
// interleaved): 16.76 at 1024 (43 %), 41.55 at 2048 (82 %),
// 42.47 at 4096 (83 %), 43.14 at 8192 (84 %); 3001x2999x3003 (fallback path) 26.90 (62 %).
// Gain over 07_bank_conflict_free at 4096 / 8192: +0.0 % / +2.2 %. It stays although it only
// ties 07 at 4096: the warp-tile layout is what step 09 pipelines (+12.5 % there). Its scalar
// fallback is slower than 07's (26.90 vs 29.45 on 3001x2999x3003): not what this step optimizes.
#include "common.cuh"
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef WM
#define WM 32
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
#ifndef GROUP
#define GROUP 0
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#define LANE_COLS (32 / LANE_ROWS)
#define NTHREADS (32 * (BM / WM) * (BN / WN))
#define TM (WM / LANE_ROWS)         // outputs per thread along M (TM / 4 sub-tiles)
#define TN (WN / LANE_COLS)         // outputs per thread along N (TN / 4 sub-tiles)
#define AS_LD (BM + PAD_A)
static_assert(BM % WM == 0 && BN % WN == 0 && 32 % LANE_ROWS == 0, "warp tiles must divide the block tile");
static_assert(TM % 4 == 0 && TN % 4 == 0, "a warp tile is a grid of 4 x 4 lane patches");
static_assert(BK % 8 == 0 && PAD_A % 4 == 0, "BK a multiple of 8, rows of As 16-byte aligned");
static_assert((BM * BK / 4) % NTHREADS == 0 && (BK * BN / 4) % NTHREADS == 0,
              "every thread loads the same number of float4s of each tile");

// Stage a BM x BK tile of A (transposed, rows of As padded) and a BK x BN tile of B. The i-th
// float4 of A a thread loads: row (idx / 2) % BM, k quad idx % 2 + 2 * (idx / (2 * BM)): a warp
// writes 16 rows x 2 k-quads per store, which with PAD_A = 4 hit 32 distinct banks.
template <int MODE, bool KTAIL>
__device__ __forceinline__ void load_tiles(float* __restrict__ As, float* __restrict__ Bs,
                                           const float* __restrict__ a, const float* __restrict__ b,
                                           int K, int N, int rows_left, int cols_left, int k_left) {
    constexpr bool EDGE = MODE != MODE_MAIN, SCALAR = MODE == MODE_FALLBACK;
#pragma unroll
    for (int i = 0; i < BM * BK / 4 / NTHREADS; ++i) {
        const int idx = (int)threadIdx.x + i * NTHREADS;
        const int r = (idx / 2) % BM, k = 4 * (idx % 2 + 2 * (idx / (2 * BM)));
        const float4 v = load4<EDGE, KTAIL, SCALAR>(a + (size_t)r * K + k, r, rows_left, k, k_left);
        As[(k + 0) * AS_LD + r] = v.x;
        As[(k + 1) * AS_LD + r] = v.y;
        As[(k + 2) * AS_LD + r] = v.z;
        As[(k + 3) * AS_LD + r] = v.w;
    }
#pragma unroll
    for (int i = 0; i < BK * BN / 4 / NTHREADS; ++i) {
        const int idx = (int)threadIdx.x + i * NTHREADS;
        const int k = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
        *reinterpret_cast<float4*>(&Bs[k * BN + c]) =
            load4<KTAIL, EDGE, SCALAR>(b + (size_t)k * N + c, k, k_left, c, cols_left);
    }
}

// The block tile in shared memory, at file scope so that the edge entry's two block bodies
// (full and partial tile) share it.
__shared__ __align__(16) float As[BK * AS_LD];
__shared__ __align__(16) float Bs[BK * BN];

template <int MODE>
__device__ __forceinline__ void block_tile(int M, int N, int K, float alpha, const float* __restrict__ A,
                                           const float* __restrict__ B, float beta, float* __restrict__ C) {
    int row0, col0;
    block_origin<MODE, GROUP>(M, N, BM, BN, row0, col0);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // this thread's first row / column inside the block tile; sub-tiles follow at strides
    // LANE_ROWS * 4 and LANE_COLS * 4
    const int m_base = (warp / (BN / WN)) * WM + (lane / LANE_COLS) * 4;
    const int n_base = (warp % (BN / WN)) * WN + (lane % LANE_COLS) * 4;
    const float* a = A + (size_t)row0 * K;
    const float* b = B + col0;
    const int rows_left = M - row0, cols_left = N - col0;
    float acc[TM][TN] = {};

    auto step = [&](auto tail, int k0) {
        load_tiles<MODE, decltype(tail)::value>(As, Bs, a + k0, b + (size_t)k0 * N, K, N, rows_left,
                                                cols_left, K - k0);
        __syncthreads();
#pragma unroll
        for (int dot = 0; dot < BK; ++dot) {
            float rm[TM], rn[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&rm[i]) = *reinterpret_cast<const float4*>(
                    &As[dot * AS_LD + m_base + (i / 4) * LANE_ROWS * 4]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&rn[j]) = *reinterpret_cast<const float4*>(
                    &Bs[dot * BN + n_base + (j / 4) * LANE_COLS * 4]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += rm[i] * rn[j];
        }
        __syncthreads();
    };
    int k0 = 0;
    for (; k0 + BK <= K; k0 += BK) step(ktail<false>{}, k0);
    if (k0 < K) step(ktail<true>{}, k0);  // K remainder: the same step, zero-padded

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
sgemm_warptile_main(int M, int N, int K, float alpha, const float* __restrict__ A,
                    const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
sgemm_warptile_edge(int M, int N, int K, float alpha, const float* __restrict__ A,
                    const float* __restrict__ B, float beta, float* __restrict__ C) {
    if (full_tile<GROUP>(M, N, BM, BN))
        block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);
    else
        block_tile<MODE_EDGE>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
sgemm_warptile_fallback(int M, int N, int K, float alpha, const float* __restrict__ A,
                        const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile<MODE_FALLBACK>(M, N, K, alpha, A, B, beta, C);
}
