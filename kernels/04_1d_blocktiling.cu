// 04 1D block tiling: each thread computes TM outputs down one column of a BM x BN block tile.
// Per K step it reads one value of the B tile into a register and reuses it TM times against
// the A tile, so shared-memory reads per multiply-add fall from 2 (step 03) to (TM + 1) / TM.
// Tiles that divide M and N run a main kernel with no bounds checks; otherwise an edge kernel
// runs every tile, a full one as main does, a partial one with zero-padded loads and guarded
// stores. A K remainder (K % BK) is one more call of the same K step (block_k_step in
// common.cuh), zero-padded, in both kernels.
// Constants (-D): BM, BN (block tile), BK (K step), TM (outputs per thread), EDGE_MIN_BLOCKS
// (blocks per SM asked of ptxas for the edge kernel: holding both paths, it took 86 registers
// and one 512-thread block per SM, and ran 3001x2999x3003 at 8.8 TFLOPS against the two
// launches' 14.6; 2 caps it at 64 registers, no spills, the main kernel's two blocks);
// threads per block = BM * BN / TM (512 with the defaults 64, 64, 8, 8).
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
#ifndef EDGE_MIN_BLOCKS
#define EDGE_MIN_BLOCKS 2
#endif
#define NTHREADS (BM * BN / TM)
static_assert(BM % TM == 0, "BM must be a multiple of TM");

__device__ __forceinline__ void column_products(const float* __restrict__ As, const float* __restrict__ Bs,
                                                int thread_row, int thread_col, float (&acc)[TM]) {
#pragma unroll
    for (int dot = 0; dot < BK; ++dot) {
        const float bv = Bs[dot * BN + thread_col];
#pragma unroll
        for (int i = 0; i < TM; ++i) acc[i] += As[(thread_row * TM + i) * BK + dot] * bv;
    }
}

// The block tile in shared memory, at file scope so that the edge entry's two block bodies
// (full and partial tile) share it.
__shared__ float As[BM * BK];
__shared__ float Bs[BK * BN];

template <bool EDGE>
__device__ __forceinline__ void block_tile_1d(int M, int N, int K, float alpha,
                                              const float* __restrict__ A, const float* __restrict__ B,
                                              float beta, float* __restrict__ C, int row0, int col0) {
    const int thread_col = threadIdx.x % BN;
    const int thread_row = threadIdx.x / BN;
    const float* a = A + row0 * K;
    const float* b = B + col0;
    const int rows_left = M - row0, cols_left = N - col0;
    float acc[TM] = {0.0f};

    auto compute = [&] { column_products(As, Bs, thread_row, thread_col, acc); };
    int k0 = 0;
    for (; k0 + BK <= K; k0 += BK)
        block_k_step<BM, BN, BK, NTHREADS, EDGE, false>(As, Bs, a, b, k0, K, N,
                                                        rows_left, cols_left, BK, compute);
    if (k0 < K)  // K remainder: the same step once more, zero-padded
        block_k_step<BM, BN, BK, NTHREADS, EDGE, true>(As, Bs, a, b, k0, K, N,
                                                       rows_left, cols_left, K - k0, compute);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = thread_row * TM + i;
        if (!EDGE || (r < rows_left && thread_col < cols_left)) {
            float* c = C + (row0 + r) * N + col0 + thread_col;
            *c = gemm_epilogue(acc[i], alpha, beta, c);
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm_1d_main(int M, int N, int K, float alpha, const float* __restrict__ A,
              const float* __restrict__ B, float beta, float* __restrict__ C) {
    block_tile_1d<false>(M, N, K, alpha, A, B, beta, C, blockIdx.y * BM, blockIdx.x * BN);
}

extern "C" __global__ void __launch_bounds__(NTHREADS, EDGE_MIN_BLOCKS)
sgemm_1d_edge(int M, int N, int K, float alpha, const float* __restrict__ A,
              const float* __restrict__ B, float beta, float* __restrict__ C) {
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    if (tile_is_full(M, N, BM, BN, row0, col0))
        block_tile_1d<false>(M, N, K, alpha, A, B, beta, C, row0, col0);
    else
        block_tile_1d<true>(M, N, K, alpha, A, B, beta, C, row0, col0);
}
