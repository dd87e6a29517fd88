// 07 Bank-conflict-free shared memory, on top of step 06 (same 128 x 128 x 8 tile, 256 threads,
// 8 x 8 outputs per thread, float4 global loads and stores, transposed A, LDS.128).
// Two conflicts of step 06 go away:
//  - the transposed stores of A: with a row stride of BM floats the two K halves a warp writes
//    land in the same banks (2-way conflict); the A tile's rows are padded to BM + PAD_A floats
//    (PAD_A = 4: the halves fall 16 banks apart), which keeps every row 16-byte aligned for LDS.128;
//  - the LDS.128 reads of B: in 06 a thread's 8 columns are contiguous, so the 8 threads of a
//    quarter-warp read 16 bytes each at a 32-byte stride and share banks (2-way). Here each
//    thread owns two 4-wide column groups BN/2 apart (and two 4-tall row groups BM/2 apart), so
//    neighbouring threads read neighbouring 16-byte chunks: conflict-free.
// Main / edge / fallback kernels and the K remainder as in 06.
// Constants (-D): BM, BN (block tile), BK (K step), TM, TN (outputs per thread, multiples of 4),
// PAD_A, PAD_B (floats of padding per shared row of A and B, multiples of 4);
// threads = BM * BN / (TM * TN) (256 with the defaults 128, 128, 8, 8, 8, 4, 0).
// Measured on the H200 by the suite (recorded at 1ed380e; TFLOPS, % of cuBLAS FP32 measured
// interleaved): 15.21 at 1024 (39 %), 41.21 at 2048 (82 %),
// 42.45 at 4096 (83 %), 42.23 at 8192 (83 %); 3001x2999x3003 (fallback path) 29.45 (68 %).
// Gain over 06_vectorized at 4096 / 8192: +10.4 % / +10.0 %.
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
#ifndef PAD_A
#define PAD_A 4
#endif
#ifndef PAD_B
#define PAD_B 0
#endif
#define AS_LD (BM + PAD_A)
#define BS_LD (BN + PAD_B)
#define NTHREADS (BM * BN / (TM * TN))
static_assert(BM % TM == 0 && BN % TN == 0 && TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0 &&
              PAD_A % 4 == 0 && PAD_B % 4 == 0,
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
        As[(k + 0) * AS_LD + r] = v.x;
        As[(k + 1) * AS_LD + r] = v.y;
        As[(k + 2) * AS_LD + r] = v.z;
        As[(k + 3) * AS_LD + r] = v.w;
    }
#pragma unroll
    for (int i = 0; i < BK * BN / 4 / NTHREADS; ++i) {
        const int idx = (int)threadIdx.x + i * NTHREADS;
        const int k = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
        *reinterpret_cast<float4*>(&Bs[k * BS_LD + c]) =
            load4<KTAIL, EDGE, SCALAR>(b + (size_t)k * N + c, k, k_left, c, cols_left);
    }
}

// The block tile in shared memory, at file scope so that the edge entry's two block bodies
// (full and partial tile) share it.
__shared__ __align__(16) float As[BK * AS_LD];
__shared__ __align__(16) float Bs[BK * BS_LD];

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
            for (int i = 0; i < TM; i += 4)  // row group i/4 starts at (i/4) * BM/(TM/4)
                *reinterpret_cast<float4*>(&rm[i]) = *reinterpret_cast<const float4*>(
                    &As[dot * AS_LD + i * (BM / TM) + thread_row * 4]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&rn[j]) = *reinterpret_cast<const float4*>(
                    &Bs[dot * BS_LD + j * (BN / TN) + thread_col * 4]);
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
        const int r = (i / 4) * 4 * (BM / TM) + thread_row * 4 + i % 4;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int c = j * (BN / TN) + thread_col * 4;
            store4<MODE != MODE_MAIN, MODE == MODE_FALLBACK>(
                C + (size_t)(row0 + r) * N + col0 + c,
                make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), alpha, beta, r,
                rows_left, c, cols_left);
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_nobank_main(int M, int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_nobank_edge(int M, int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
    if (full_tile(M, N, BM, BN))
        block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);
    else
        block_tile<MODE_EDGE>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_nobank_fallback(int M, int N, int K, float alpha, const float* __restrict__ A,
                   const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile<MODE_FALLBACK>(M, N, K, alpha, A, B, beta, C);
}
