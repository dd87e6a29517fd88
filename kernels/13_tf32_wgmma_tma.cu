// 13 TF32 wgmma fed by TMA: Hopper's own tensor-core path, after 12's Ampere one (mma.sync from
// registers that ldmatrix filled, every operand byte passing through the warps). Here no warp
// touches an operand at all: the copy engine (TMA, cp.async.bulk.tensor: UTMALDG) moves each K
// tile of A and B from global memory straight into shared memory, 128B-swizzled, and wgmma
// (HGMMA) reads both operands from shared memory through matrix descriptors, a warpgroup (4
// warps) issuing one m64n256k8 instruction where 12 needed 64 warp-level mma.syncs.
// wgmma takes tf32 operands K-major only, so B is stored N x K (b_layout "nk", compared with
// cuBLAS TF32 on the same layout); A (M x K row-major) is K-major already.
// Warp specialization: warpgroup 0 is the producer (one thread issues the TMA copies), the BM / 64
// consumer warpgroups each own 64 rows x BN columns of the block tile and issue the wgmmas.
// They meet at STAGES shared-memory slots through two mbarriers per slot: `full` (the producer
// arms it with the stage's byte count; the copy engine completes it) and `empty` (each consumer
// warp arrives once its wgmmas on the slot have finished). A consumer keeps one wgmma group in
// flight: it commits stage k, waits until at most one group is pending, then frees stage k - 1.
// One K tile is 32 tf32 = 128 bytes of every row (one swizzle span): the four k8 steps of a
// stage are the same descriptor advanced 32 bytes at a time (hopper.cuh).
// The accumulators are never touched by ordinary instructions inside the K loop (the first
// wgmma runs with accumulate = 0 instead of a zeroing loop): otherwise ptxas serialises the
// wgmmas (its C7515 note), as it did for the first draft of this file.
// Any M, N, K: the copy engine zero-fills boxes past the matrix, the epilogue checks every
// element of C. TMA needs 16-byte row strides, so K a multiple of 4; for any other K the
// launcher (registry pad_k, gemm/core/staging.py) copies A and B into buffers with K padded to
// the next multiple of 4 with zeros, inside every launch, and runs this kernel with that K (C,
// stored with ordinary stores, is never copied). C = alpha * A @ B + beta * C straight from
// the accumulators.
// Constants (-D): BM (64 or 128: 1 or 2 consumer warpgroups), BN (128 or 256: the wgmma N),
// STAGES (>= 2); threads = 128 * (1 + BM / 64) (384 with the defaults 128, 256, 4).
// Dynamic shared memory: STAGES * (BM + BN) * 128 + 1024 bytes (197632; the 1024 realigns the
// buffer to the 1024 bytes of a swizzle atom). 154 registers, no spills (ptxas, sm_90a).
// Measured on the H200 (gemm bench on branch wgmma, hot L2, % of cuBLAS TF32 with B stored
// N x K, interleaved): 349.36 TFLOPS at 2048 (101.0 %), 356.84 at 4096 (98.6 %), 342.42 at 8192
// (96.8 %; spread 4.6 % there): 3.1x 12 (mma.sync) at 4096. Tried (same run kind, 4096 /
// 8192): BN = 128, STAGES = 6: 311.91 / 271.95 TFLOPS (85.0 / 76.2 %).
#include "hopper.cuh"
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef STAGES
#define STAGES 4
#endif

constexpr int BK = 32;                       // tf32 elements in one 128-byte swizzle span
constexpr int CONSUMERS = BM / 64;
constexpr int THREADS = 128 * (1 + CONSUMERS);
constexpr int A_BYTES = BM * BK * 4, B_BYTES = BN * BK * 4, STAGE_BYTES = A_BYTES + B_BYTES;
static_assert(BM == 64 || BM == 128, "BM: one or two consumer warpgroups of 64 rows");
static_assert(BN == 128 || BN == 256, "BN: the wgmma N");
static_assert(STAGES >= 2, "STAGES");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
sgemm_tf32_wgmma_tma(const __grid_constant__ TmaMap map_a, const __grid_constant__ TmaMap map_b, int M,
               int N, int K, float alpha, const float* __restrict__ A,
               const float* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    extern __shared__ unsigned char smem_raw[];
    const uint32_t tiles = (smem_addr(smem_raw) + 1023) & ~1023u;   // stage s: A, then B
    const int wg = threadIdx.x / 128;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int ktiles = (K + BK - 1) / BK;

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), CONSUMERS * 4);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {                            // producer
        if (threadIdx.x == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
            for (int kt = 0; kt < ktiles; ++kt) {
                const int s = kt % STAGES;
                mbar_wait(smem_addr(&empty[s]), ((kt / STAGES) & 1) ^ 1);
                const uint32_t bar = smem_addr(&full[s]), dst = tiles + s * STAGE_BYTES;
                mbar_arrive_expect_tx(bar, STAGE_BYTES);
                tma_load_2d(dst, &map_a, bar, kt * BK, row0);
                tma_load_2d(dst + A_BYTES, &map_b, bar, kt * BK, col0);
            }
        }
        return;
    }

    const int cw = wg - 1;                    // consumer: rows 64 * cw .. of the block tile
    float acc[BN / 2];                        // set by the first wgmma (accumulate = 0)
    for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        mbar_wait(smem_addr(&full[s]), (kt / STAGES) & 1);
        const uint32_t sa = tiles + s * STAGE_BYTES;
        const uint64_t da = desc_kmajor_sw128(sa + cw * 64 * 128);
        const uint64_t db = desc_kmajor_sw128(sa + A_BYTES);
        fence_regs(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 8; ++kk)
            wgmma_tf32<BN>(acc, da + 2 * kk, db + 2 * kk, kt > 0 || kk > 0);
        wgmma_commit();
        wgmma_wait<1>();                      // the group of stage kt - 1 has finished
        fence_regs(acc);
        if (kt > 0 && threadIdx.x % 32 == 0) mbar_arrive(smem_addr(&empty[(kt - 1) % STAGES]));
    }
    wgmma_wait<0>();
    fence_regs(acc);
    store_accumulator<BN>(acc, C, M, N, row0 + 64 * cw, col0, alpha, beta);
}
