// 03 shared-memory tiling: a block stages a BLOCK x BLOCK tile of A and of B in shared
// memory, then every thread runs BLOCK multiply-adds out of it. Each global element is read
// once per block instead of once per thread: BLOCK times less global traffic than 02.
// Loads are zero-padded past the matrix edges, so one kernel covers every shape.
// Constants (-D): BLOCK (threads per side, tile side and K step).
#include "common.cuh"
#ifndef BLOCK
#define BLOCK 32
#endif

extern "C" __global__ void __launch_bounds__(BLOCK * BLOCK)
sgemm_smem(int M, int N, int K, float alpha, const float* __restrict__ A,
           const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ float As[BLOCK][BLOCK];
    __shared__ float Bs[BLOCK][BLOCK];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * BLOCK + ty;
    const int col = blockIdx.x * BLOCK + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = gemm_epilogue(acc, alpha, beta, &C[row * N + col]);
}
