// 05 2D block tiling (the seed's kernel): each thread owns a TM x TN patch of C. Per K step it
// pulls TM values of the A tile and TN of the B tile into registers and does their outer
// product: TM * TN multiply-adds for TM + TN shared-memory reads (0.25 per multiply-add with
// 8 x 8, against 1.125 in step 04). A 64 x 64 tile then needs only 64 threads, which fill the
// tiles with a cooperative strided loop (8 values of each tile per thread). All TM * TN
// accumulators stay in registers. Main kernel over full tiles without bounds checks; edge
// kernel over every tile when some are partial, checking only those (as in 04); a K remainder
// is one more call of the same K step (block_k_step in common.cuh), zero-padded.
// Constants (-D): BM, BN (block tile), BK (K step), TM, TN (outputs per thread);
// threads per block = BM * BN / (TM * TN) (64 with the defaults 64, 64, 8, 8, 8).
#include "common.cuh"
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
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
static_assert(BM % TM == 0 && BN % TN == 0, "the thread patch must divide the block tile");

__device__ __forceinline__ void outer_products(const float* __restrict__ As, const float* __restrict__ Bs,
                                               int thread_row, int thread_col, float (&acc)[TM * TN]) {
    float rm[TM], rn[TN];
#pragma unroll
    for (int dot = 0; dot < BK; ++dot) {
#pragma unroll
        for (int i = 0; i < TM; ++i) rm[i] = As[(thread_row * TM + i) * BK + dot];
#pragma unroll
        for (int j = 0; j < TN; ++j) rn[j] = Bs[dot * BN + thread_col * TN + j];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i * TN + j] += rm[i] * rn[j];
    }
}

// The block tile in shared memory, at file scope so that the edge entry's two block bodies
// (full and partial tile) share it.
__shared__ float As[BM * BK];
__shared__ float Bs[BK * BN];

template <bool EDGE>
__device__ __forceinline__ void block_tile_2d(int M, int N, int K, float alpha,
                                              const float* __restrict__ A, const float* __restrict__ B,
                                              float beta, float* __restrict__ C, int row0, int col0) {
    const int thread_col = threadIdx.x % (BN / TN);
    const int thread_row = threadIdx.x / (BN / TN);
    const float* a = A + row0 * K;
    const float* b = B + col0;
    const int rows_left = M - row0, cols_left = N - col0;
    float acc[TM * TN] = {0.0f};

    auto compute = [&] { outer_products(As, Bs, thread_row, thread_col, acc); };
    int k0 = 0;
    for (; k0 + BK <= K; k0 += BK)
        block_k_step<BM, BN, BK, NTHREADS, EDGE, false>(As, Bs, a, b, k0, K, N,
                                                        rows_left, cols_left, BK, compute);
    if (k0 < K)  // K remainder: the same step once more, zero-padded
        block_k_step<BM, BN, BK, NTHREADS, EDGE, true>(As, Bs, a, b, k0, K, N,
                                                       rows_left, cols_left, K - k0, compute);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int r = thread_row * TM + i, c = thread_col * TN + j;
            if (!EDGE || (r < rows_left && c < cols_left)) {
                float* out = C + (row0 + r) * N + col0 + c;
                *out = gemm_epilogue(acc[i * TN + j], alpha, beta, out);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_2d_main(int M, int N, int K, float alpha, const float* __restrict__ A,
              const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile_2d<false>(M, N, K, alpha, A, B, beta, C, blockIdx.y * BM, blockIdx.x * BN);
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_2d_edge(int M, int N, int K, float alpha, const float* __restrict__ A,
              const float* __restrict__ B, float beta, float* __restrict__ C) {
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    if (tile_is_full(M, N, BM, BN, row0, col0))
        block_tile_2d<false>(M, N, K, alpha, A, B, beta, C, row0, col0);
    else
        block_tile_2d<true>(M, N, K, alpha, A, B, beta, C, row0, col0);
}
