// 12 TF32 mma.sync with ldmatrix and a cp.async multistage pipeline: 11's tensor-core math
// without WMMA's opaque fragments and without its stalls. The warp issues PTX
// mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32 directly (HMMA.1688.F32.TF32), so the fragment
// layout is known: A fragments come from shared memory with one ldmatrix.x4 per 16 x 8 block
// (four 8 x 4 tf32 sub-matrices: rows g / g + 8, k t / t + 4 of lane (g, t)), B fragments with
// two conflict-free 32-bit loads (B rows padded by PAD_B = 8 floats: k row t lands 8 banks
// apart). Every fragment is rounded with cvt.rna.tf32.f32, as 11 does. The K tiles move from
// global to shared memory with 16-byte cp.async (LDGSTS), STAGES tiles in flight, one barrier
// per K tile (09's pipeline, with BK = 32 so a stage feeds 4 mma k-steps). Any M, N, K: the
// main entry needs N and K multiples of 4 (16-byte copies, zero-filled past the edges with
// src-size 0); the fallback entry copies 4-byte elements with the same zero fill.
// Constants (-D): BM, BN (block tile), BK (K step, multiple of 8), WM, WN (warp tile: multiples
// of 16 and 8), PAD_A, PAD_B (floats added per shared row), STAGES (>= 2);
// threads = 32 * (BM / WM) * (BN / WN) (256 with the defaults 128, 128, 32, 64, 32, 4, 8, 3).
// Dynamic shared memory: STAGES * (BM * (BK + PAD_A) + BK * (BN + PAD_B)) * 4 bytes (107520).
// 121 registers (fallback 126), no spills. Measured on the H200 (gemm bench at b749d32, hot L2,
// % of cuBLAS TF32 interleaved): 117.68 TFLOPS at 2048 (32.8 %), 116.48 at 4096 (29.6 %),
// 115.77 at 8192 (28.6 %): 4.7x 11 at 4096 / 8192. Tried (same run kind, 4096 / 8192, checked
// at alpha 1, beta 0 only): BN = 256, WN = 64 (64 x 64 warp tiles, 214 registers) 130.90 /
// 127.93 TFLOPS (32.1 / 31.0 %), the best; BK = 16, STAGES = 4: 104.78 / 105.72; both: 118.11 /
// 120.34; BM = 256, WM = 128: spills (4.6 KB local), 4 TFLOPS. The defaults stay the gate-checked
// 128 x 128 until the 128 x 256 tile has passed the whole gate. mma.sync is the Ampere path: on
// Hopper only wgmma (13, 14) reaches the tensor cores' full rate.
#include "common.cuh"
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef PAD_A
#define PAD_A 4
#endif
#ifndef PAD_B
#define PAD_B 8
#endif
#ifndef STAGES
#define STAGES 3
#endif

constexpr int WARPS_N = BN / WN;
constexpr int THREADS = 32 * (BM / WM) * (BN / WN);
constexpr int MI = WM / 16, NI = WN / 8;
constexpr int LDA = BK + PAD_A, LDB = BN + PAD_B;
constexpr int STAGE_FLOATS = BM * LDA + BK * LDB;
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "warp tiling");
static_assert(BK % 8 == 0 && PAD_A % 4 == 0 && PAD_B % 4 == 0 && STAGES >= 2, "constants");
static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "whole copies");

__device__ __forceinline__ unsigned to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}

// One K tile into a stage: A (BM x BK) and B (BK x BN), zero-filled outside the matrices.
template <bool VEC>
__device__ __forceinline__ void load_stage(float* sa, float* sb, const float* __restrict__ A,
                                           const float* __restrict__ B, int M, int N, int K,
                                           int row0, int col0, int k0, int tid) {
    if constexpr (VEC) {
#pragma unroll
        for (int i = tid; i < BM * BK / 4; i += THREADS) {
            const int r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            const bool ok = row0 + r < M && k0 + c < K;
            cp_async16<true>(sa + r * LDA + c, A + (size_t)(row0 + r) * K + k0 + c, ok, A);
        }
#pragma unroll
        for (int i = tid; i < BK * BN / 4; i += THREADS) {
            const int r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            const bool ok = k0 + r < K && col0 + c < N;
            cp_async16<true>(sb + r * LDB + c, B + (size_t)(k0 + r) * N + col0 + c, ok, B);
        }
    } else {
#pragma unroll 4
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, c = i % BK;
            const bool ok = row0 + r < M && k0 + c < K;
            cp_async4<true>(sa + r * LDA + c, A + (size_t)(row0 + r) * K + k0 + c, ok, A);
        }
#pragma unroll 4
        for (int i = tid; i < BK * BN; i += THREADS) {
            const int r = i / BN, c = i % BN;
            const bool ok = k0 + r < K && col0 + c < N;
            cp_async4<true>(sb + r * LDB + c, B + (size_t)(k0 + r) * N + col0 + c, ok, B);
        }
    }
}

template <bool VEC>
__device__ __forceinline__ void tf32_mma(int M, int N, int K, float alpha,
                                         const float* __restrict__ A, const float* __restrict__ B,
                                         float beta, float* __restrict__ C) {
    extern __shared__ __align__(128) float smem[];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int wr = (warp / WARPS_N) * WM, wc = (warp % WARPS_N) * WN;
    const int KT = (K + BK - 1) / BK;

    float acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT)
            load_stage<VEC>(smem + s * STAGE_FLOATS, smem + s * STAGE_FLOATS + BM * LDA, A, B, M,
                            N, K, row0, col0, s * BK, tid);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int next = kt + STAGES - 1;
        if (next < KT) {
            float* st = smem + (next % STAGES) * STAGE_FLOATS;
            load_stage<VEC>(st, st + BM * LDA, A, B, M, N, K, row0, col0, next * BK, tid);
        }
        cp_async_commit();
        const float* sa = smem + (kt % STAGES) * STAGE_FLOATS;
        const float* sb = sa + BM * LDA;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i) {
                const unsigned addr = (unsigned)__cvta_generic_to_shared(
                    sa + (wr + 16 * i + lane % 16) * LDA + kk + (lane / 16) * 4);
                asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                             : "=r"(a[i][0]), "=r"(a[i][1]), "=r"(a[i][2]), "=r"(a[i][3])
                             : "r"(addr));
#pragma unroll
                for (int e = 0; e < 4; ++e) a[i][e] = to_tf32(__uint_as_float(a[i][e]));
            }
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                b[j][0] = to_tf32(sb[(kk + t) * LDB + wc + 8 * j + g]);
                b[j][1] = to_tf32(sb[(kk + t + 4) * LDB + wc + 8 * j + g]);
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j)
                    asm volatile(
                        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
                        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                        : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]),
                          "+f"(acc[i][j][3])
                        : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]),
                          "r"(b[j][1]));
        }
    }
    cp_async_wait<0>();
    // accumulator (i, j): c0, c1 at row g, cols 2t, 2t + 1; c2, c3 at row g + 8
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = row0 + wr + 16 * i + g + 8 * h, c = col0 + wc + 8 * j + 2 * t;
                if (r >= M) continue;
                float* p = C + (size_t)r * N + c;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (VEC && c + 1 < N) {   // N % 4 == 0: c even, p 8-byte aligned
                    float2 o = make_float2(alpha * v0, alpha * v1);
                    if (beta != 0.0f) {
                        const float2 old = *reinterpret_cast<const float2*>(p);
                        o.x += beta * old.x;
                        o.y += beta * old.y;
                    }
                    *reinterpret_cast<float2*>(p) = o;
                } else {
                    if (c < N) *p = gemm_epilogue(v0, alpha, beta, p);
                    if (c + 1 < N) p[1] = gemm_epilogue(v1, alpha, beta, p + 1);
                }
            }
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_tf32_mma_main(int M, int N, int K, float alpha, const float* __restrict__ A,
              const float* __restrict__ B, float beta, float* __restrict__ C) {
    tf32_mma<true>(M, N, K, alpha, A, B, beta, C);
}

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_tf32_mma_fallback(int M, int N, int K, float alpha, const float* __restrict__ A,
                  const float* __restrict__ B, float beta, float* __restrict__ C) {
    tf32_mma<false>(M, N, K, alpha, A, B, beta, C);
}
