// 15 BF16 wgmma + TMA, ping-pong consumers.
// 14's skeleton (persistent grid, grouped tile order, a producer warpgroup issuing TMA loads
// into 128B-swizzled stages with full / empty mbarriers, setmaxnreg), but its two consumer
// warpgroups no longer split one 128x256 tile between them: each owns a whole BM x BN tile
// (default 128x128: two m64n128k16 row blocks sharing the B tile) and they take turns on the
// tensor cores. In 14 a block's math stops while both consumers store their halves of the
// finished tile (128 KB of C, a few % of a tile's time at 4096, more at 2048, where 14 trails
// cuBLASLt most); here consumer 0 stores its tile while consumer 1 runs the main loop of the
// next one, and the other way round, so the stores hide behind the math.
// - Tile ownership: the block's tiles in its local order j = 0, 1, 2, ... are 14's
//   (blockIdx.x + j * gridDim.x, so the tiles in flight over all SMs stay consecutive in the
//   grouped raster); consumer w takes j = w, w + 2, w + 4, ... The producer fills every K
//   tile of every local tile in that order (fill g = j * ktiles + kt, stage g % STAGES, phase
//   (g / STAGES) & 1), which alternates between the consumers tile by tile.
// - Ordering barrier: two named barriers (ids 1, 2; 256 threads: one consumer syncs, the
//   other arrives). Consumer w waits on barrier 1 + w before the main loop of each of its
//   tiles except the block's first, and arrives on the other's barrier once it has issued the
//   last wgmma of a tile, if the block has a next tile (so every arrive meets exactly one sync
//   and none is pending at exit); then it waits for its wgmmas, frees the last stage and
//   stores. Only one warpgroup issues wgmma at a time (the next one's first group queues
//   behind the previous one's last), and a consumer never waits on a full barrier for a fill
//   whose predecessor in that stage (STAGES fills earlier) nobody has seen complete: the
//   parity waits need that.
// - Each stage is read by exactly one consumer: `empty` expects 4 arrivals (lane 0 of each of
//   that consumer's 4 warps, after its wgmma_wait), not 14's 8; `full` expects 1 (the
//   producer's expect_tx) plus the bytes.
// Constants (-D): BM (64 or 128: one or two m64 row blocks per consumer tile), BN (128, 192
// or 256, the wgmma N; at most 192 accumulators per thread, BM / 64 * BN / 2, so 128x256 is
// refused), STAGES (>= 2), GROUP_M (>= 1), PRODUCER_REGS, CONSUMER_REGS (setmaxnreg counts,
// multiples of 8, 128 * (PRODUCER_REGS + 2 * CONSUMER_REGS) <= 65536). Defaults 128, 128, 4,
// 16, 40, 232 (4 stages: 14's tune log had its 128x128 tile faster with 4 than with 6).
// Threads: 384 (a producer and two consumer warpgroups, whatever the tile).
// Dynamic shared memory: STAGES * (BM + BN) * 128 + 1024 bytes (132096 with the defaults: 4
// stages of 32 KB; 14 has 4 of 48 KB). Any M, N, K >= 1 as 14: boxes past the matrix are
// zero-filled, every C element is checked, and a K that is not a multiple of 8 is padded by
// the launcher (registry pad_k).
// ptxas (nvcc 13.0, sm_90a): 168 registers at entry (the cap of 384 threads), 0 bytes stack,
// 0 spill stores / loads; in the SASS the consumer part (after USETMAXREG.TRY_ALLOC 232) uses
// up to R188 and the producer part (after USETMAXREG.DEALLOC 40) up to R16. 128x192 and
// 64x256 (5 stages) build clean too, up to R228 in the consumers. ptxas counts 16 named
// barriers because the ordering barrier's id is a register (one block per SM either way).
// SASS it must contain: HGMMA.64x128x16.F32.BF16 (64xBNx16 for other BN), UTMALDG.2D,
// USETMAXREG, BAR.SYNC with a register id and BAR.ARV (the ordering barrier), SYNCS.* (the
// mbarriers).
// Measured on the H200 (GPU-cb6e8584, 2026-12-01; gemm bench with 14 in one process, the
// defaults 128x128, 4 stages, before tuning): 568 / 634 / 653 TFLOPS, 89.5 / 92.9 / 92.7 % of
// the cuBLASLt baseline at 2048 / 4096 / 8192, where 14 ran 88.1 / 91.3 / 94.3 %; 61.5 % at
// 1024 (64 tiles: a block has one, and its second consumer idles), 390.6 % at 3001x2999x3003.
// The hidden epilogue bought 1.5 % at 2048 and 4096 and lost 1.6 % at 8192, where 14's
// 128x256 tile reads a third less from L2 per flop and the GPU is power-bound. Every check
// passed at the first launch (the watchdog build too), memcheck and synccheck clean. gemm tune
// (11 candidates, 56 s; kernels/tuned/h200-15_bf16_pingpong.json): 64x128, 6 stages at 1024
// (86.0 %), 128x128, 4 stages at 2048 (92.7 %), 128x128, 6 stages at 4096 and up (91.7 %);
// every 128x192 and 64x192 candidate lost. The recorded figures: README and docs/kernels.md.
// Next (untried): 14's 128x256 per consumer pair with the store overlapped through shared
// memory and TMA stores instead (cooperative, as 14, plus a TMA-store epilogue), and 2x1
// clusters with multicast of A (branch k15 multicast B and was slower).
#include "hopper.cuh"
#include "pingpong.cuh"
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
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
constexpr int HALVES = BM / 64;              // m64 row blocks of one consumer's tile
constexpr int CONSUMERS = 2;                 // ping and pong
constexpr int THREADS = 128 * (1 + CONSUMERS);
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int ORDER_BAR = 1;                 // named barriers 1, 2: "consumer 0 / 1 may issue"
static_assert(BM == 64 || BM == 128, "BM: one consumer's tile is one or two m64 row blocks");
static_assert(BN == 128 || BN == 192 || BN == 256, "BN: the wgmma N (128, 192 or 256)");
static_assert(HALVES * BN / 2 <= 192,
              "one consumer's accumulators (BM / 64 * BN / 2 floats per thread) must leave "
              "room for its addressing under setmaxnreg: 128 x 256 does not fit");
static_assert(STAGES >= 2 && GROUP_M >= 1, "STAGES, GROUP_M");
static_assert(STAGE_BYTES % 1024 == 0, "stages stay 1024-aligned (128B swizzle atoms)");
constexpr int ENTRY_REGS = 65536 / THREADS / 8 * 8;   // __launch_bounds__(THREADS, 1): 168
static_assert(PRODUCER_REGS % 8 == 0 && CONSUMER_REGS % 8 == 0 && PRODUCER_REGS >= 24 &&
                  CONSUMER_REGS <= 256 && PRODUCER_REGS <= ENTRY_REGS &&
                  CONSUMER_REGS >= ENTRY_REGS &&
                  128 * (PRODUCER_REGS + CONSUMERS * CONSUMER_REGS) <= THREADS * ENTRY_REGS,
              "setmaxnreg counts: the consumers can take only what the producer gives back of "
              "the block's entry registers (THREADS x 168), else setmaxnreg.inc waits forever");

extern "C" __global__ void __launch_bounds__(THREADS, 1)
sgemm_bf16_pingpong(const __grid_constant__ TmaMap map_a, const __grid_constant__ TmaMap map_b,
                    int M, int N, int K, float alpha, const unsigned short* __restrict__ A,
                    const unsigned short* __restrict__ B, float beta, float* __restrict__ C) {
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    extern __shared__ unsigned char smem_raw[];
    const uint32_t tiles = (smem_addr(smem_raw) + 1023) & ~1023u;   // stage s: A, then B
    const int wg = threadIdx.x / 128;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int ntiles = tiles_m * tiles_n;
    const int ktiles = (K + BK - 1) / BK;    // >= 1: the suite has no K = 0

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), 4);   // the 4 warps of the one consumer of a fill
        }
        mbar_init_fence();
    }
    __syncthreads();

    // The block's tiles, in its local order j = 0, 1, 2, ...: tile blockIdx.x + j * gridDim.x
    // (14's order, so the tiles in flight on all SMs at once are consecutive in the grouped
    // raster). Consumer w owns the tiles j = w, w + 2, ...; K tile kt of local tile j is the
    // block's fill number g = j * ktiles + kt, in stage g % STAGES, phase (g / STAGES) & 1.
    if (wg == 0) {                            // producer: every fill, in order g = 0, 1, ...
        regs_release<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
            int g = 0;
            for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {
                int row0, col0;
                tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
                for (int kt = 0; kt < ktiles; ++kt, ++g) {
                    const int s = g % STAGES;
                    stage_wait(smem_addr(&empty[s]), ((g / STAGES) & 1) ^ 1);
                    const uint32_t bar = smem_addr(&full[s]), dst = tiles + s * STAGE_BYTES;
                    mbar_arrive_expect_tx(bar, STAGE_BYTES);
                    tma_load_2d(dst, &map_a, bar, kt * BK, row0);
                    tma_load_2d(dst + A_BYTES, &map_b, bar, kt * BK, col0);
                }
            }
        }
    } else {                                  // consumer cw: its own tiles, whole
        regs_claim<CONSUMER_REGS>();
        const int cw = wg - 1;
        const bool arrives = threadIdx.x % 32 == 0;
        float acc[HALVES][BN / 2];            // set by each tile's first wgmma (accumulate = 0)
        for (int j = cw;; j += CONSUMERS) {
            const int t = blockIdx.x + j * gridDim.x;
            if (t >= ntiles) break;
            int row0, col0;
            tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
            int g = j * ktiles;
            // Our turn on the tensor cores: the other consumer has issued every wgmma of local
            // tile j - 1 (so it has also seen every fill before g complete: a full wait below
            // never meets a stage two phases behind).
            if (j > 0) order_wait(ORDER_BAR + cw);
            for (int kt = 0; kt < ktiles; ++kt, ++g) {
                const int s = g % STAGES;
                stage_wait(smem_addr(&full[s]), (g / STAGES) & 1);
                const uint32_t sa = tiles + s * STAGE_BYTES;
                const uint64_t db = desc_kmajor_sw128(sa + A_BYTES);
#pragma unroll
                for (int h = 0; h < HALVES; ++h) fence_regs(acc[h]);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
#pragma unroll
                    for (int h = 0; h < HALVES; ++h)
                        wgmma_bf16_n<BN>(acc[h], desc_kmajor_sw128(sa + h * 64 * 128) + 2 * kk,
                                         db + 2 * kk, kt > 0 || kk > 0);
                wgmma_commit();
                wgmma_wait<1>();              // the group of the previous K tile has finished
#pragma unroll
                for (int h = 0; h < HALVES; ++h) fence_regs(acc[h]);
                if (kt > 0 && arrives) mbar_arrive(smem_addr(&empty[(g - 1) % STAGES]));
            }
            // Hand the tensor cores over (only if the other consumer has a next tile: then it
            // syncs on this barrier exactly once more), then finish and store while it works.
            if (t + gridDim.x < ntiles) order_signal(ORDER_BAR + (1 - cw));
            wgmma_wait<0>();
#pragma unroll
            for (int h = 0; h < HALVES; ++h) fence_regs(acc[h]);
            if (arrives) mbar_arrive(smem_addr(&empty[(g - 1) % STAGES]));
#pragma unroll
            for (int h = 0; h < HALVES; ++h)
                store_accumulator<BN>(acc[h], C, M, N, row0 + 64 * h, col0, alpha, beta);
        }
    }
}
