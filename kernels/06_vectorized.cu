// 06 Bigger block tiles and vectorized memory: a 128 x 128 block tile, 256 threads, each
// computing an 8 x 8 patch of C (the 2D scheme of step 05, scaled up so each block reuses every
// loaded element of A and B 128 times instead of 64). All global traffic is 128-bit: A and B are
// read with float4 loads (LDG.E.128) and C is written with float4 stores (STG.E.128). The A tile
// is stored transposed in shared memory (As[k][m]), so a thread's 8 values of A for one k are
// contiguous and the inner loop reads both operands with 128-bit shared loads (LDS.128): 4 shared
// loads per 64 FMAs. Main kernel over full tiles without checks; edge kernel over every tile
// when some are partial, the main path on full ones and float4-granular checks on partial ones
// (the `align = 4` contract: N and K multiples of 4); fallback kernel for
// any other shape (scalar, every element checked). A K remainder (K % BK) is one more call of
// the same K step, zero-padded, in all three.
// Constants (-D): BM, BN (block tile), BK (K step), TM, TN (outputs per thread, multiples of 4);
// threads = BM * BN / (TM * TN) (256 with the defaults 128, 128, 8, 8, 8).
// Measured on the H200 by the suite (recorded at 1ed380e; TFLOPS, % of cuBLAS FP32 measured
// interleaved): 14.51 at 1024 (37 %), 37.13 at 2048 (74 %),
// 38.45 at 4096 (75 %), 38.39 at 8192 (75 %); 3001x2999x3003 (fallback path) 25.45 (59 %).
// Gain over 05_2d_blocktiling at 4096 / 8192: +30.7 % / +23.6 %.
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
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#define NTHREADS (BM * BN / (TM * TN))
static_assert(BM % TM == 0 && BN % TN == 0 && TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0,
              "the thread patch must divide the block tile, in float4 steps");
static_assert((BM * BK / 4) % NTHREADS == 0 && (BK * BN / 4) % NTHREADS == 0,
              "every thread loads the same number of float4s of each tile");

// Stage one BM x BK tile of A (transposed) and one BK x BN tile of B. a / b point at the tile's
// first element. KTAIL: k_left < BK, rows of k past it read as zero.
template <int MODE, bool KTAIL>
__device__ __forceinline__ void load_tiles(float* __restrict__ As, float* __restrict__ Bs,
                                           const float* __restrict__ a, const float* __restrict__ b,
                                           int K, int N, int rows_left, int cols_left, int k_left) {
    constexpr bool EDGE = MODE != MODE_MAIN, SCALAR = MODE == MODE_FALLBACK;
#pragma unroll
    for (int i = 0; i < BM * BK / 4 / NTHREADS; ++i) {
        const int idx = (int)threadIdx.x + i * NTHREADS;
        const int r = idx / (BK / 4), k = (idx % (BK / 4)) * 4;
        const float4 v = load4<EDGE, KTAIL, SCALAR>(a + (size_t)r * K + k, r, rows_left, k, k_left);
        As[(k + 0) * BM + r] = v.x;
        As[(k + 1) * BM + r] = v.y;
        As[(k + 2) * BM + r] = v.z;
        As[(k + 3) * BM + r] = v.w;
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
__shared__ __align__(16) float As[BK * BM];
__shared__ __align__(16) float Bs[BK * BN];

template <int MODE>
__device__ __forceinline__ void block_tile(int M, int N, int K, float alpha, const float* __restrict__ A,
                                           const float* __restrict__ B, float beta, float* __restrict__ C) {
    int row0, col0;
    block_origin<MODE>(M, N, BM, BN, row0, col0);
    const int thread_col = threadIdx.x % (BN / TN);
    const int thread_row = threadIdx.x / (BN / TN);
    const float* a = A + (size_t)row0 * K;
    const float* b = B + col0;
    const int rows_left = M - row0, cols_left = N - col0;
    float acc[TM][TN] = {};

    auto step = [&](auto ktail, int k0) {
        load_tiles<MODE, decltype(ktail)::value>(As, Bs, a + k0, b + (size_t)k0 * N, K, N, rows_left,
                                                 cols_left, K - k0);
        __syncthreads();
#pragma unroll
        for (int dot = 0; dot < BK; ++dot) {
            float rm[TM], rn[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&rm[i]) =
                    *reinterpret_cast<const float4*>(&As[dot * BM + thread_row * TM + i]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&rn[j]) =
                    *reinterpret_cast<const float4*>(&Bs[dot * BN + thread_col * TN + j]);
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
        const int r = thread_row * TM + i;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int c = thread_col * TN + j;
            store4<MODE != MODE_MAIN, MODE == MODE_FALLBACK>(
                C + (size_t)(row0 + r) * N + col0 + c,
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), alpha, beta, r,
                rows_left, c, cols_left);
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_vec_main(int M, int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_vec_edge(int M, int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
    if (full_tile(M, N, BM, BN))
        block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);
    else
        block_tile<MODE_EDGE>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_vec_fallback(int M, int N, int K, float alpha, const float* __restrict__ A,
                   const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile<MODE_FALLBACK>(M, N, K, alpha, A, B, beta, C);
}
