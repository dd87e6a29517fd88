// 02 global-memory coalescing: the same work as 01, but threadIdx.x now walks along a row
// of C. A warp reads one broadcast element of A, 32 consecutive floats of B and writes 32
// consecutive floats of C, so each warp access is one or two 128-byte transactions.
// Constants (-D): BLOCK (threads per block side; a block covers a BLOCK x BLOCK tile of C).
#include "common.cuh"
#ifndef BLOCK
#define BLOCK 32
#endif

extern "C" __global__ void __launch_bounds__(BLOCK * BLOCK)
sgemm_coalesced(int M, int N, int K, float alpha, const float* __restrict__ A,
                const float* __restrict__ B, float beta, float* __restrict__ C) {
    const int row = blockIdx.y * BLOCK + threadIdx.y;
    const int col = blockIdx.x * BLOCK + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
}
