// 14 BF16 wgmma fed by TMA, persistent: 13's skeleton (TMA into 128B-swizzled stages, mbarrier
// full / empty slots, a producer warpgroup and BM / 64 consumer warpgroups of wgmma) in bf16
// (m64nBNk16: a 128-byte K tile is 64 bf16, four k16 steps), with what pays once the math is
// twice as fast:
// - a persistent grid (registry `persistent`: min(tiles, SMs) blocks) with a tile scheduler:
//   block b takes tiles b, b + gridDim.x, ...; the producer runs ahead into the next tile's K
//   tiles while the consumers store the last one, so the copies never stop at a tile boundary
//   and no block is launched per tile. Tiles are visited GROUP_M row tiles at a time down a
//   column of tiles (L2 reuse: the tiles in flight together share A rows and B columns);
// - setmaxnreg: the producer warpgroup gives its registers back (PRODUCER_REGS) and the
//   consumers take CONSUMER_REGS, so the 128 accumulators per thread of m64n256 and the
//   addressing fit without spills at 384 threads.
// B is stored N x K (b_layout "nk", K-major like A, no transpose in the wgmma; compared with
// cuBLAS BF16 on the same layout). Any M, N, K: boxes past the matrix are zero-filled, the
// epilogue checks every element of C; C = alpha * A @ B + beta * C in float32. TMA needs
// 16-byte rows, so K a multiple of 8; for any other K the launcher (registry pad_k,
// gemm/core/staging.py) copies A and B into buffers with K padded to the next multiple of 8
// with zeros, inside every launch, and runs this kernel with that K (C is never copied).
// Constants (-D): BM (64 or 128), BN (128 or 256), STAGES (>= 2), GROUP_M (>= 1),
// PRODUCER_REGS, CONSUMER_REGS (setmaxnreg counts, multiples of 8, within 64K per SM);
// threads = 128 * (1 + BM / 64) (384 with the defaults 128, 256, 4, 16, 40, 232).
// Dynamic shared memory: STAGES * (BM + BN) * 128 + 1024 bytes (197632). 168 registers at
// entry (the cap of 384 threads), no spills; SASS: HGMMA.64x256x16.F32.BF16, UTMALDG.2D,
// USETMAXREG.
// Measured on the H200 (gemm bench on branch wgmma, hot L2, % of cuBLAS BF16 with B stored
// N x K, interleaved): 601.40 TFLOPS at 2048 (93.1 %), 635.15 at 4096 (97.9 %), 674.20 at 8192
// (101.6 %). Tried (same run kind, 4096 / 8192): GROUP_M = 8: 647.92 / 669.39 TFLOPS (98.2 /
// 101.4 %, within the spread of the default); BN = 128, STAGES = 6: 608.01 / 612.15 (92.6 /
// 94.2 %). Not tried yet: clusters with TMA multicast of the shared operand, an epilogue that
// overlaps the next tile's wgmmas (two consumer groups on different tiles), stores through
// shared memory and TMA.
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
#ifndef GROUP_M
#define GROUP_M 16
#endif
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 40
#endif
#ifndef CONSUMER_REGS
#define CONSUMER_REGS 232
#endif

constexpr int BK = 64;                       // bf16 elements in one 128-byte swizzle span
constexpr int CONSUMERS = BM / 64;
constexpr int THREADS = 128 * (1 + CONSUMERS);
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
static_assert(BM == 64 || BM == 128, "BM: one or two consumer warpgroups of 64 rows");
static_assert(BN == 128 || BN == 256, "BN: the wgmma N");
static_assert(STAGES >= 2 && GROUP_M >= 1, "STAGES, GROUP_M");
static_assert(PRODUCER_REGS % 8 == 0 && CONSUMER_REGS % 8 == 0 &&
                  128 * (PRODUCER_REGS + CONSUMERS * CONSUMER_REGS) <= 65536,
              "setmaxnreg counts");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
sgemm_bf16_wgmma_tma(const __grid_constant__ TmaMap map_a, const __grid_constant__ TmaMap map_b, int M,
               int N, int K, float alpha, const unsigned short* __restrict__ A,
               const unsigned short* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    extern __shared__ unsigned char smem_raw[];
    const uint32_t tiles = (smem_addr(smem_raw) + 1023) & ~1023u;   // stage s: A, then B
    const int wg = threadIdx.x / 128;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int ntiles = tiles_m * tiles_n;
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
        regs_release<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
            int it = 0;                       // K tiles issued by this block so far
            for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
                int row0, col0;
                tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int s = it % STAGES;
                    mbar_wait(smem_addr(&empty[s]), ((it / STAGES) & 1) ^ 1);
                    const uint32_t bar = smem_addr(&full[s]), dst = tiles + s * STAGE_BYTES;
                    mbar_arrive_expect_tx(bar, STAGE_BYTES);
                    tma_load_2d(dst, &map_a, bar, kt * BK, row0);
                    tma_load_2d(dst + A_BYTES, &map_b, bar, kt * BK, col0);
                }
            }
        }
    } else {                                  // consumers: rows 64 * cw .. of each tile
        regs_claim<CONSUMER_REGS>();
        const int cw = wg - 1;
        const bool arrives = threadIdx.x % 32 == 0;
        float acc[BN / 2];                    // set by each tile's first wgmma (accumulate = 0)
        int it = 0;                           // K tiles consumed by this block so far
        for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
            int row0, col0;
            tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(smem_addr(&full[s]), (it / STAGES) & 1);
                const uint32_t sa = tiles + s * STAGE_BYTES;
                const uint64_t da = desc_kmajor_sw128(sa + cw * 64 * 128);
                const uint64_t db = desc_kmajor_sw128(sa + A_BYTES);
                fence_regs(acc);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
                    wgmma_bf16<BN>(acc, da + 2 * kk, db + 2 * kk, kt > 0 || kk > 0);
                wgmma_commit();
                wgmma_wait<1>();              // the group of the previous K tile has finished
                fence_regs(acc);
                if (kt > 0 && arrives) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
            }
            wgmma_wait<0>();
            fence_regs(acc);
            if (arrives) mbar_arrive(smem_addr(&empty[(it - 1) % STAGES]));
            store_accumulator<BN>(acc, C, M, N, row0 + 64 * cw, col0, alpha, beta);
        }
    }
}
