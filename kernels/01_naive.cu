// 01 naive: one thread per output element, the K loop straight from global memory.
// Why: the baseline every later step is measured against. threadIdx.x walks down a column
// of C, so a warp's 32 loads of A and stores of C hit 32 different rows (uncoalesced).
// Constants (-D): BLOCK (threads per block side; a block covers a BLOCK x BLOCK tile of C).
#include "common.cuh"
#ifndef BLOCK
#define BLOCK 32
#endif

extern "C" __global__ void __launch_bounds__(BLOCK * BLOCK)
sgemm_naive(int M, int N, int K, float alpha, const float* __restrict__ A,
            const float* __restrict__ B, float beta, float* __restrict__ C) {
    const int row = blockIdx.y * BLOCK + threadIdx.x;
    const int col = blockIdx.x * BLOCK + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
}
