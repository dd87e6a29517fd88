// 18 BF16 wgmma + TMA, ping-pong consumers with a TMA-store epilogue: 15's schedule (each
// consumer warpgroup owns a whole 128 x 128 tile, two m64n128k16 row blocks, and the two take
// turns on the tensor cores, so one stores while the other computes) with 16's epilogue (C
// staged in 128B-swizzled shared memory, 32 columns at a time, and sent by TMA stores) in place
// of 15's st.global straight from registers. Why: ncu's source view of cuBLASLt's kernel at
// 4096 and 8192 on the H200 (nvjet_sm90_tss_112x128_64x7_1x2 / _168x128_64x5_1x2, 1,248 / 1,456
// SASS instructions) shows this very shape: one consumer warpgroup per 128-row tile (two
// HGMMA.64xNx16 accumulator sets a K step), the other waiting its turn, and an epilogue of
// STS and UTMASTG only; 15 (the same ping-pong with st.global) ran 90 % of it, and 17's pieces
// measured a K step with 8-byte global stores beside it at 2.6 times a plain one.
// - The epilogue of each consumer (per m64 row block, chunks of EPI_N columns through two 8 KB
//   buffers of its own, its own named barrier, its thread 0 owning the bulk groups) is 16's;
//   it runs while the other consumer issues its next tile's wgmmas. The ordering barriers are
//   15's (ids 1, 2), the epilogue's ids 3, 4.
// - As 16: the TMA path needs beta == 0 and a C the map can address (N % 4 == 0, C 16-byte
//   aligned); otherwise the launch stores as 15 does (store_accumulator, C read where beta != 0).
// - The main loop counts its stage and phase on (no division a K step) and keeps the barrier
//   and descriptor bases in registers (95 instructions a K step, 107 before), and a consumer
//   hands the tensor cores over with its last K step still to issue: 0.7-1.0 % less time at
//   2048-8192 together. The consumer index read by a shuffle from lane 0 puts that
//   arithmetic in uniform registers, as in cuBLASLt's kernel: 61 instructions a K step,
//   0.3-0.5 % less time at 2048-8192 (none at 1024).
// - Stages: with the 95-instruction loop 4 stages and 64-column chunks ran 3.8 % faster than
//   6 and 32 at 8192; with the uniform loop `gemm tune 18` picks 6 and 32 at 4096 (the most
//   that fit with BM = BN = 128), 5 and 64 at 2048 (docs/evidence.md).
// - Stream-K for the last wave (STREAM_K 1; 0 = every tile whole). T tiles, G = gridDim.x
//   blocks, KT = K steps a tile. Where T / G >= SK_FROM, G <= SK_SLOTS and the TMA epilogue
//   runs (beta == 0, C addressable; else every tile is whole), W = T / G - 1 waves of whole
//   tiles as above (block b: tiles b + j * G, j < W), then the other S = T - W * G tiles' I = S
//   * KT K steps (tile-major) split into G contiguous ranges, block b [b * I / G, (b + 1) * I /
//   G) (in 32 bits: b * (I / G) + b * (I % G) / G, no 64-bit division), run as jobs of one tile
//   each, highest tile first; the consumers take the jobs in turn and the producer loads them
//   in the same order, each job only its K range. A block decides once, before its jobs, where
//   its whole tiles end (all T where stream-K is off); whole tiles run the loop of STREAM_K 0,
//   the stream-K jobs a loop of their own after it, both through one K loop and one store. A
//   job holding part of a tile sums it through C itself: its leader takes a ticket, prev =
//   atomicAdd(sk_count[u], its K steps) (only the leader's prev counts: it alone issues the TMA
//   ops); prev == 0 stores alpha * acc by TMA as a whole tile does, a later one waits (its
//   warp) until sk_done[u] == prev and adds alpha * acc by TMA reductions (cp.reduce.async.bulk
//   .add). Each, once its bulk writes are complete, publishes sk_done[u] = prev + its steps
//   (release), except the one completing the tile's KT steps, which resets both counters for
//   the next launch instead. The first to finish stores, so no job waits on one still in its K
//   loop; waits follow the tickets' order, each on a job already in its epilogue: no cycle
//   (tests/test_streamk_schedule.py models the schedule and the tickets). Parts are added in
//   the order they finish, so C is not bit-for-bit the same from run to run. The counters are
//   static device memory (zero at module load): no launcher change, two launches of 18 must not
//   run at once, and an aborted launch leaves them set (its context is lost anyway). SK_FROM =
//   16 because the stream-K region's K loops run slower than whole tiles', so it pays only
//   where that region is small beside the whole waves (8192 among the suite's shapes; any value
//   from 8 to 31 chooses the same). Built only where it can run: the tuned large bucket sets
//   STREAM_K 1 (`gemm tune` keeps it, outside the search space); elsewhere fewer than 16 waves
//   leave every tile whole, and the build still costs there (3.4 % at 1024). The measurements:
//   docs/evidence.md, "Stream-K with TMA reductions in 18" and "18's stream-K decided per
//   block".
// Constants (-D): BM (64 or 128: one or two m64 row blocks per consumer tile), BN (128 or 192),
// STAGES (>= 2), GROUP_M, PRODUCER_REGS, CONSUMER_REGS (as 15), EPI_N (32 or 64, dividing BN),
// STREAM_K (0 or 1), SK_FROM (whole waves from which stream-K is on), SK_SLOTS (most blocks of
// a stream-K launch), SK_TRACE (1: clock64 marks per job for ci/probes/sk_trace.py; probes
// only). Defaults 128, 128, 6, 16, 40, 232, 32 (the tuned large bucket), 0, 16, 160, 0.
// Threads: 384. Dynamic shared memory STAGES * (BM + BN) * 128 + 1024 + EPI_N * 1024 bytes (6
// stages of 32 KB + 32 KB of staging = 230,400).
#include "hopper.cuh"
#include "pingpong.cuh"
#include "tma_store.cuh"
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 6
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
#ifndef EPI_N
#define EPI_N 32
#endif
#ifndef STREAM_K
#define STREAM_K 0
#endif
#ifndef SK_FROM
#define SK_FROM 16                           // stream-K where T / G >= SK_FROM (whole waves)
#endif
#ifndef SK_SLOTS
#define SK_SLOTS 160                         // most blocks of a stream-K launch (H200: 132 SMs)
#endif

#ifndef SK_TRACE
#define SK_TRACE 0                           // 1: each consumer job's clock64 marks (probe only)
#endif

constexpr int BK = 64;                       // bf16 elements in one 128-byte swizzle span
constexpr int HALVES = BM / 64;              // m64 row blocks of one consumer's tile
constexpr int CONSUMERS = 2;                 // ping and pong
constexpr int THREADS = 128 * (1 + CONSUMERS);
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int ORDER_BAR = 1;                 // named barriers 1, 2: "consumer 0 / 1 may issue"
constexpr int EPI_BAR = 3;                   // named barriers 3, 4: consumer 0's / 1's epilogue
using Epilogue = TmaStoreEpilogue<BN, EPI_N>;   // tma_store.cuh
constexpr int EPI_BYTES = Epilogue::EPI_BYTES;   // one staging buffer
static_assert(BM == 64 || BM == 128, "BM: one consumer's tile is one or two m64 row blocks");
static_assert(BN == 128 || BN == 192, "BN: the wgmma N (128 or 192)");
static_assert(EPI_N % BOX_N == 0 && BN % EPI_N == 0, "EPI_N: a multiple of 32 dividing BN");
static_assert(BOX_BYTES % 1024 == 0, "staging boxes 1024-byte aligned (the swizzle atom)");
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

#if STREAM_K
// Per stream-K tile u (fewer than 2 G): K steps ticketed so far, and K steps whose writes are
// done; both back to 0 when the tile is complete.
__device__ unsigned int sk_count[2 * SK_SLOTS], sk_done[2 * SK_SLOTS];

// A block's stream-K jobs: the K steps [lo, hi) of the stream-K region (its tiles from
// whole_end on, tile-major), one job per tile they touch, highest tile first.
struct SkPlan {
    int lo, hi;       // this block's K steps of the region
    int top;          // region tile (from whole_end) of its highest K step
    int jobs;         // dp + the region tiles its range touches (jobs dp .. jobs - 1)
};
struct SkJob {
    int tile;         // tile index in the grouped order
    int kb, ke;       // its K steps kb .. ke - 1
    int g0;           // the block's fill number of K step kb (the producer's order)
    int u;            // region tile (from whole_end)
};
// Tiles below it run whole on every block: dp = T / G - 1 waves where stream-K runs, else T.
__device__ __forceinline__ int sk_whole_end(int g, int ntiles, bool on) {
    const int waves = ntiles / g;
    return on && g <= SK_SLOTS && waves >= SK_FROM ? (waves - 1) * g : ntiles;
}
// b * iters / g in 32 bits (no 64-bit division): with iters = q g + r, b r < g g.
__device__ __forceinline__ int sk_lo(int b, int iters, int g) {
    const int q = iters / g, r = iters - q * g;
    return b * q + b * r / g;
}
__device__ __forceinline__ SkPlan sk_plan(int b, int g, int ntiles, int ktiles, int whole_end) {
    SkPlan p;
    const int iters = (ntiles - whole_end) * ktiles;   // 0 where stream-K is off
    p.lo = sk_lo(b, iters, g);
    p.hi = sk_lo(b + 1, iters, g);
    p.top = p.hi > p.lo ? (p.hi - 1) / ktiles : 0;
    p.jobs = whole_end / g + (p.hi > p.lo ? p.top - p.lo / ktiles + 1 : 0);
    return p;
}
__device__ __forceinline__ SkJob sk_job(const SkPlan& p, int j, int dp, int whole_end, int ktiles) {
    SkJob r;
    r.u = p.top - (j - dp);
    const int first = r.u * ktiles;
    const int seg_lo = max(p.lo, first), seg_hi = min(p.hi, first + ktiles);
    r.tile = whole_end + r.u;
    r.kb = seg_lo - first;
    r.ke = seg_hi - first;
    r.g0 = dp * ktiles + (p.hi - seg_hi);       // the jobs before it: from hi down to seg_hi
    return r;
}
__device__ __forceinline__ int sk_ctaid() {   // blockIdx.x, read again where it is used
    int b;
    asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(b));
    return b;
}
__device__ __forceinline__ unsigned int ld_acquire_gpu(const unsigned int* f) {
    unsigned int v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(f) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_gpu(unsigned int* f, unsigned int v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(f), "r"(v) : "memory");
}
__device__ __forceinline__ void sk_wait_for(const unsigned int* f, unsigned int v) {
#ifdef PP_WATCHDOG
    const long long start = clock64();
    while (!__all_sync(0xffffffffu, ld_acquire_gpu(f) == v))
        if (clock64() - start > (long long)PP_WATCHDOG) __trap();
#else
    while (!__all_sync(0xffffffffu, ld_acquire_gpu(f) == v)) {
    }
#endif
}
// Global memory between the async proxy (TMA stores and reductions) and generic accesses.
__device__ __forceinline__ void fence_async_global() {
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
#endif

#if SK_TRACE
// Per block and job (first 16): clock64 when its consumer got the tensor cores, when its K
// loop's wgmmas were done, when its epilogue was issued, and (tile << 32 | kb << 16 | ke);
// per block and consumer: globaltimer at its first job's start and after its last job.
constexpr int SK_TRACE_JOBS = 16;
__device__ unsigned long long sk_trace[SK_SLOTS * SK_TRACE_JOBS * 4];
__device__ unsigned long long sk_gtrace[SK_SLOTS * 4];
__device__ __forceinline__ unsigned long long sk_gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define SK_MARK(j, w, v)                                                                   \
    do {                                                                                   \
        if (leader && (j) < SK_TRACE_JOBS && blockIdx.x < SK_SLOTS)                        \
            sk_trace[(blockIdx.x * SK_TRACE_JOBS + (j)) * 4 + (w)] = (v);                  \
    } while (0)
#define SK_GMARK(w)                                                                        \
    do {                                                                                   \
        if (leader && blockIdx.x < SK_SLOTS) sk_gtrace[blockIdx.x * 4 + (w)] = sk_gtime(); \
    } while (0)
#else
#define SK_MARK(j, w, v) do {} while (0)
#define SK_GMARK(w) do {} while (0)
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1)
sgemm_bf16_pingpong_tma_store(const __grid_constant__ TmaMap map_a,
                              const __grid_constant__ TmaMap map_b,
                              const __grid_constant__ TmaMap map_c, int M, int N, int K,
                              float alpha, const unsigned short* __restrict__ A,
                              const unsigned short* __restrict__ B, float beta,
                              float* __restrict__ C) {
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    extern __shared__ unsigned char smem_raw[];
    const uint32_t tiles = (smem_addr(smem_raw) + 1023) & ~1023u;   // stage s: A, then B
    const int wg = threadIdx.x / 128;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int ntiles = tiles_m * tiles_n;
    const int ktiles = (K + BK - 1) / BK;    // >= 1: the suite has no K = 0
    // 16's test (gemm.core.tensormaps.addressable, plus beta): uniform over the launch
    const bool via_tma = beta == 0.0f && (N & 3) == 0 &&
                         (reinterpret_cast<uintptr_t>(C) & 15) == 0;
#if STREAM_K
    const int whole_end = sk_whole_end(gridDim.x, ntiles, via_tma);   // tiles run whole below
#else
    const int whole_end = ntiles;
#endif

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
            // K steps kb .. ke - 1 of tile t, fills g on
            auto load = [&](int t, int kb, int ke) {
                int row0, col0;
                tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
                for (int kt = kb; kt < ke; ++kt, ++g) {
                    const int s = g % STAGES;
                    stage_wait(smem_addr(&empty[s]), ((g / STAGES) & 1) ^ 1);
                    const uint32_t bar = smem_addr(&full[s]), dst = tiles + s * STAGE_BYTES;
                    mbar_arrive_expect_tx(bar, STAGE_BYTES);
                    tma_load_2d(dst, &map_a, bar, kt * BK, row0);
                    tma_load_2d(dst + A_BYTES, &map_b, bar, kt * BK, col0);
                }
            };
            for (int t = blockIdx.x; t < whole_end; t += gridDim.x) load(t, 0, ktiles);
#if STREAM_K
            if (whole_end < ntiles) {        // then the stream-K jobs, in the consumers' order
                const int dp = whole_end / gridDim.x;
                const SkPlan plan = sk_plan(blockIdx.x, gridDim.x, ntiles, ktiles, whole_end);
                for (int j = dp; j < plan.jobs; ++j) {
                    const SkJob job = sk_job(plan, j, dp, whole_end, ktiles);
                    load(job.tile, job.kb, job.ke);
                }
            }
#endif
        }
    } else {                                  // consumer cw: its own tiles, whole
        regs_claim<CONSUMER_REGS>();
        // Read from lane 0, ptxas knows it is one value per warp and keeps the main loop's
        // tile, stage and descriptor arithmetic in uniform registers (no R2UR per wgmma).
        const int cw = __shfl_sync(0xffffffffu, wg - 1, 0);
        const bool arrives = threadIdx.x % 32 == 0;
        const bool leader = threadIdx.x % 128 == 0;
        const uint32_t staging = tiles + STAGES * STAGE_BYTES + cw * 2 * EPI_BYTES;
        if (via_tma && leader) tma_prefetch_map(&map_c);
        int n = 0;                            // chunks staged by this consumer so far
        // Shared-memory addresses of the barriers and the stage ring's descriptor low word, held
        // in registers: unpinned, ptxas rebuilds them (S2R and address arithmetic) every K step.
        uint32_t full0 = smem_addr(&full[0]), empty0 = smem_addr(&empty[0]);
        uint32_t desc0 = static_cast<uint32_t>(desc_kmajor_sw128(tiles));
        asm volatile("" : "+r"(full0), "+r"(empty0), "+r"(desc0));
        constexpr uint64_t DESC_HI = (64ull << 32) | (1ull << 62); // desc_kmajor_sw128, all stages
        float acc[HALVES][BN / 2];            // set by each tile's first wgmma (accumulate = 0)
        // Local job j's K loop: steps fills from the block's fill number g0 (stage s, phase
        // ph, counted on: no division per K step). Our turn on the tensor cores first: the
        // other consumer has issued job j - 1's wgmmas up to its last K step, so it has seen
        // every fill before our first but one complete, and a full wait below never meets a
        // stage two phases behind.
        auto k_loop = [&](int j, int s, uint32_t ph, int steps, bool hand_over) {
            int last = s;
            if (j > 0) order_wait(ORDER_BAR + cw);
            if (j < CONSUMERS) SK_GMARK(cw);
            SK_MARK(j, 0, clock64());
            for (int kt = 0; kt < steps; ++kt) {
                stage_wait(full0 + 8 * s, ph);
                const uint32_t da = desc0 + s * (STAGE_BYTES >> 4), db = da + (A_BYTES >> 4);
#pragma unroll
                for (int h = 0; h < HALVES; ++h) fence_regs(acc[h]);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
#pragma unroll
                    for (int h = 0; h < HALVES; ++h)
                        wgmma_bf16_n<BN>(acc[h], DESC_HI | (da + h * (64 * 128 >> 4) + 2 * kk),
                                         DESC_HI | (db + 2 * kk), kt > 0 || kk > 0);
                wgmma_commit();
                wgmma_wait<1>();              // the group of the previous K tile has finished
#pragma unroll
                for (int h = 0; h < HALVES; ++h) fence_regs(acc[h]);
                if (kt > 0 && arrives) mbar_arrive(empty0 + 8 * last);
                // Hand the tensor cores over with one K step still to issue, so the other
                // consumer's first wgmmas queue behind our last ones instead of after a gap.
                if (hand_over && kt == steps - 2) order_signal(ORDER_BAR + (1 - cw));
                last = s;
                if (++s == STAGES) { s = 0; ph ^= 1; }
            }
            if (hand_over && steps < 2) order_signal(ORDER_BAR + (1 - cw));
            // then finish and store while the other consumer works
            wgmma_wait<0>();
            SK_MARK(j, 1, clock64());
#pragma unroll
            for (int h = 0; h < HALVES; ++h) fence_regs(acc[h]);
            if (arrives) mbar_arrive(empty0 + 8 * last);
        };
        // alpha * acc to the tile at (row0, col0): by TMA stores (reductions where add) where
        // tma, else as 15 does
        auto store = [&](int row0, int col0, bool add, bool tma) {
#pragma unroll
            for (int h = 0; h < HALVES; ++h) {
                const int row = row0 + 64 * h;
                if (!tma)
                    store_accumulator<BN>(acc[h], C, M, N, row, col0, alpha, beta);
                else if (row < M)             // rows wholly below C: nothing to store
                    Epilogue::store_chunks<0>(acc[h], &map_c, staging, n, leader, EPI_BAR + cw,
                                              N, row, col0, alpha, add);
            }
        };
        for (int j = cw;; j += CONSUMERS) {   // whole tiles: local tile j is fills j * ktiles on
            const int t = blockIdx.x + j * gridDim.x;
            if (t >= whole_end) break;
            int row0, col0;
            tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
            const int s = j * ktiles % STAGES;
            const uint32_t ph = (j * ktiles / STAGES) & 1;
            const bool hand_over = t + gridDim.x < ntiles;   // the other consumer has a next job
            k_loop(j, s, ph, ktiles, hand_over);
            store(row0, col0, false, via_tma);
            SK_MARK(j, 2, clock64());
            SK_MARK(j, 3, (static_cast<unsigned long long>(t) << 32) | ktiles);
        }
#if STREAM_K
        if (whole_end < ntiles) {            // then our stream-K jobs: j >= dp, of our parity
            const int dp = whole_end / gridDim.x;
            const SkPlan plan = sk_plan(blockIdx.x, gridDim.x, ntiles, ktiles, whole_end);
            for (int j = dp + ((dp - cw) & 1); j < plan.jobs; j += CONSUMERS) {
                const SkJob job = sk_job(plan, j, dp, whole_end, ktiles);
                const unsigned int steps = job.ke - job.kb;
                k_loop(j, job.g0 % STAGES, (job.g0 / STAGES) & 1, steps, j + 1 < plan.jobs);
                int row0, col0;
                tile_origin<BM, BN, GROUP_M>(job.tile, tiles_m, tiles_n, row0, col0);
                // part of a tile: the first to finish stores, later ones add (the header says how)
                const bool part = steps < static_cast<unsigned int>(ktiles);
                unsigned int prev = 0;
                if (part) {                   // the leader's ticket, and its warp waits on it
                    if (leader) prev = atomicAdd(&sk_count[job.u], steps);
                    prev = __shfl_sync(0xffffffffu, prev, 0);
                    if (prev > 0) {
                        sk_wait_for(&sk_done[job.u], prev);
                        fence_async_global(); // the earlier writes before our reductions
                    }
                }
                store(row0, col0, prev > 0, true);   // stream-K runs where via_tma
                if (part && leader) {
                    bulk_wait<0>();           // our writes (or additions) are done ...
                    fence_async_global();
                    if (prev + steps == static_cast<unsigned int>(ktiles)) {
                        sk_count[job.u] = 0u; // the tile is complete: ready for the next launch
                        sk_done[job.u] = 0u;
                    } else {
                        st_release_gpu(&sk_done[job.u], prev + steps);   // ... before the next's
                    }
                }
                SK_MARK(j, 2, clock64());
                SK_MARK(j, 3, (static_cast<unsigned long long>(job.tile) << 32) | (job.kb << 16) |
                                  job.ke);
            }
        }
#endif
        if (leader) bulk_wait<0>();           // every store done before the block's smem goes
        SK_GMARK(2 + cw);
    }
}
