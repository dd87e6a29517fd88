// 11 TF32 tensor cores through WMMA (nvcuda::wmma, 16 x 16 x 8 fragments): the step the seed's
// post names last. Where 01-10 do one FFMA per thread per multiply-add, a warp here issues
// one matrix multiply-accumulate of a 16 x 16 x 8 block (HMMA.1688.F32.TF32 in the SASS): the
// inputs are rounded to TF32 (10 mantissa bits, wmma::__float_to_tf32 = cvt.rna), the products
// summed in float32. The block tile (BM x BN, BK deep) is staged through shared memory as in
// 03-05, with plain bounds-checked loads (any M, N, K: the tail of K is zero-filled); each warp
// owns a WM x WN warp tile of (WM/16) x (WN/16) accumulator fragments, loads its A and B
// fragments from shared memory with load_matrix_sync and, at the end, stores each accumulator
// fragment to a per-warp 16 x 16 scratch in shared memory, from where the warp applies alpha
// and beta and writes C with bounds checks. No pipeline: loads and MMAs alternate with two
// barriers per K tile, which 12 removes.
// Constants (-D): BM, BN (block tile), BK (K step, multiple of 8), WM, WN (warp tile, multiples
// of 16), PAD (floats added to each shared row: bank conflicts, and ldm a multiple of 4);
// threads = 32 * (BM / WM) * (BN / WN) (256 with the defaults 128, 128, 32, 64, 32, 4).
// 148 registers, 43520 bytes of static shared memory, no spills (ptxas, sm_90).
// Measured on the H200 (gemm bench at b749d32, hot L2, % of cuBLAS TF32 measured interleaved):
// 26.32 TFLOPS at 2048 (7.2 %), 24.60 at 4096 (5.9 %), 24.36 at 8192 (5.6 %): about half of
// the FP32 SIMT 09/10 (48): the synchronous loads through registers, two barriers per K tile
// and the scalar C scratch leave the tensor cores idle most of the time.
#include <mma.h>
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
#ifndef PAD
#define PAD 4
#endif

using namespace nvcuda;
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = 32 * (BM / WM) * (BN / WN);
constexpr int FM = WM / 16, FN = WN / 16;
static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "warp tiling");
static_assert(BK % 8 == 0 && PAD % 4 == 0, "BK a multiple of 8, PAD of 4");
static_assert((BM * (BK + PAD) + BK * (BN + PAD) + (THREADS / 32) * 256) * 4 <= 48 * 1024,
              "static shared memory");

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_tf32_wmma(int M, int N, int K, float alpha, const float* __restrict__ A,
          const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(128) float As[BM][BK + PAD];
    __shared__ __align__(128) float Bs[BK][BN + PAD];
    __shared__ __align__(128) float Cs[THREADS / 32][16 * 16];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int wr = (warp / WARPS_N) * WM, wc = (warp % WARPS_N) * WN;

    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, c = i % BK, gr = row0 + r, gc = k0 + c;
            As[r][c] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : 0.0f;
        }
        for (int i = tid; i < BK * BN; i += THREADS) {
            const int r = i / BN, c = i % BN, gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa[FM];
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb[FN];
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                wmma::load_matrix_sync(fa[i], &As[wr + 16 * i][kk], BK + PAD);
#pragma unroll
                for (int t = 0; t < fa[i].num_elements; ++t) fa[i].x[t] = wmma::__float_to_tf32(fa[i].x[t]);
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                wmma::load_matrix_sync(fb[j], &Bs[kk][wc + 16 * j], BN + PAD);
#pragma unroll
                for (int t = 0; t < fb[j].num_elements; ++t) fb[j].x[t] = wmma::__float_to_tf32(fb[j].x[t]);
            }
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }
    float* cs = Cs[warp];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma::store_matrix_sync(cs, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) {
                const int r = row0 + wr + 16 * i + e / 16, c = col0 + wc + 16 * j + e % 16;
                if (r < M && c < N) {
                    float* p = &C[(size_t)r * N + c];
                    *p = gemm_epilogue(cs[e], alpha, beta, p);
                }
            }
            __syncwarp();
        }
}
