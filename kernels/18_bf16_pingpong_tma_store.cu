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
// Constants (-D): BM (64 or 128: one or two m64 row blocks per consumer tile), BN (128 or 192),
// STAGES (>= 2), GROUP_M, PRODUCER_REGS, CONSUMER_REGS (as 15), EPI_N (32 or 64, dividing BN).
// Defaults 128, 128, 6, 16, 40, 232, 32. Threads: 384. Dynamic shared memory STAGES * (BM + BN)
// * 128 + 1024 + EPI_N * 1024 bytes (6 stages of 32 KB + 32 KB of staging = 230,400).
#include "hopper.cuh"
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

constexpr int BK = 64;                       // bf16 elements in one 128-byte swizzle span
constexpr int HALVES = BM / 64;              // m64 row blocks of one consumer's tile
constexpr int CONSUMERS = 2;                 // ping and pong
constexpr int THREADS = 128 * (1 + CONSUMERS);
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int ORDER_BAR = 1;                 // named barriers 1, 2: "consumer 0 / 1 may issue"
constexpr int ORDER_THREADS = 128 * CONSUMERS;
constexpr int EPI_BAR = 3;                   // named barriers 3, 4: consumer 0's / 1's epilogue
constexpr int BOX_N = 32;                    // FP32 columns of a 128-byte swizzled row: C's box
constexpr int BOX_BYTES = 64 * BOX_N * 4;    // one 64 x 32 box (8 KB)
constexpr int SUBS = EPI_N / BOX_N;          // boxes per chunk (one bulk group)
constexpr int EPI_BYTES = SUBS * BOX_BYTES;  // one staging buffer
constexpr int CHUNKS = BN / EPI_N;           // chunks per m64 row block
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

// -DPP_WATCHDOG=CYCLES (for a draft's first runs on a GPU): an mbarrier wait still spinning
// after CYCLES clock64 cycles traps, so a protocol error fails the launch instead of hanging
// the GPU (the trap ends the whole grid, consumers held at a named barrier too).
#ifdef PP_WATCHDOG
// A count, not a switch: -DPP_WATCHDOG (nvcc makes it 1) or PP_WATCHDOG = 1 / 0 in the registry
// would trap at the first wait that does not pass at once, which looks like a protocol bug.
static_assert((long long)PP_WATCHDOG >= 100000000LL,
              "PP_WATCHDOG is the cycles a wait may spin before it traps (e.g. 4000000000, ~2 s); "
              "leave it undefined for no watchdog");
__device__ __forceinline__ void stage_wait(uint32_t bar, uint32_t parity) {
    const long long start = clock64();
    uint32_t done;
    do {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
        if (!done && clock64() - start > (long long)PP_WATCHDOG) __trap();
    } while (!done);
}
#else
__device__ __forceinline__ void stage_wait(uint32_t bar, uint32_t parity) { mbar_wait(bar, parity); }
#endif

// Named barriers (PTX bar.sync / bar.arrive with an id and a thread count): the ordering
// barrier of the two consumer warpgroups. ORDER_THREADS threads in all meet at barrier `id`:
// the 128 that sync wait until the other 128 have arrived; those that arrive do not wait.
__device__ __forceinline__ void order_wait(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(ORDER_THREADS) : "memory");
}
__device__ __forceinline__ void order_signal(int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(ORDER_THREADS) : "memory");
}

// wgmma m64n192k16 (hopper.cuh has n128 and n256; this one only here, so 13 and 14's
// sources stay as they were).
__device__ __forceinline__ void wgmma_bf16_m64n192(float (&d)[96], uint64_t da, uint64_t db,
                                                   int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
        "{"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
        "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "l"(da), "l"(db), "r"(accumulate));
}
template <int N>
__device__ __forceinline__ void wgmma_bf16_n(float (&d)[N / 2], uint64_t da, uint64_t db, int acc) {
    if constexpr (N == 192) wgmma_bf16_m64n192(d, da, db, acc);
    else wgmma_bf16<N>(d, da, db, acc);
}

// ---- the TMA store and its bulk groups (16's) --------
// One box from shared memory at src to the tensor of `map` at (c0 = column, c1 = row); the
// parts of the box outside the tensor are not written. Counted in this thread's open bulk
// group.
__device__ __forceinline__ void tma_store_2d(const TmaMap* map, uint32_t src, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
            reinterpret_cast<uint64_t>(map)),
        "r"(c0), "r"(c1), "r"(src)
        : "memory");
}
__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Until at most N of this thread's bulk groups still read their shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Until at most N of this thread's bulk groups are pending at all (writes included).
template <int N>
__device__ __forceinline__ void bulk_wait() {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// This thread's shared-memory writes (generic proxy) before later async-proxy reads (TMA).
__device__ __forceinline__ void fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void warpgroup_sync(int id) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void st_shared_v2(uint32_t addr, float x, float y) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

// Chunk q (columns q * EPI_N ..) of a warpgroup's m64nBN accumulator into a staging buffer, as
// alpha * acc, in the 128B-swizzled layout of the C map's box: box s of the chunk (columns
// s * 32 ..) at buf + s * BOX_BYTES, row r at r * 128, its 16-byte unit u at (u ^ (r % 8)) * 16.
// Thread t (warp w, lane l) holds row 16 * w + l / 4 + 8 * h, columns 8 * i + 2 * (l % 4) + {0,
// 1} in registers 4 * i + 2 * h + {0, 1} (hopper.cuh's store_accumulator); in a box, i's
// 32-byte span is units 2 * (i % 4) and + 1, the lane's pair is in unit 2 * (i % 4) + (l % 4) / 2
// at byte 8 * (l % 2), and r % 8 = l / 4 for every w and h.
template <int Q>
__device__ __forceinline__ void stage_chunk(const float (&d)[BN / 2], uint32_t buf, float alpha) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
    const uint32_t xr = l >> 2, half = (l >> 1) & 1, lo = (l & 1) << 3;
#pragma unroll
    for (int ii = 0; ii < EPI_N / 8; ++ii) {
        const int i = Q * (EPI_N / 8) + ii;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint32_t row = 16 * w + (l >> 2) + 8 * h;
            const uint32_t unit = (2 * (ii % 4) + half) ^ xr;
            const uint32_t addr = buf + (ii / 4) * BOX_BYTES + row * 128 + unit * 16 + lo;
            st_shared_v2(addr, alpha * d[4 * i + 2 * h], alpha * d[4 * i + 2 * h + 1]);
        }
    }
}

// One consumer's tile through the staging buffers (see the head of the file). `n`: the
// chunks this consumer has staged so far (buffer n % 2); `leader`: its thread 0, which owns
// the bulk groups.
template <int Q>
__device__ __forceinline__ void store_chunks(const float (&d)[BN / 2], const TmaMap* map_c,
                                             uint32_t staging, int& n, bool leader, int bar,
                                             int N, int row, int col0, float alpha) {
    if constexpr (Q < CHUNKS) {
        const int col = col0 + Q * EPI_N;
        if (col < N) {                        // chunks wholly right of C are skipped
            const uint32_t buf = staging + (n & 1) * EPI_BYTES;
            if (leader) bulk_wait_read<1>();  // the group that read this buffer is done
            warpgroup_sync(bar);              // ... and every thread knows it
            stage_chunk<Q>(d, buf, alpha);
            fence_async_shared();             // these writes before the copy engine's reads
            warpgroup_sync(bar);              // every thread's writes and fence are done
            if (leader) {
#pragma unroll
                for (int s = 0; s < SUBS; ++s)
                    if (col + s * BOX_N < N) tma_store_2d(map_c, buf + s * BOX_BYTES, col + s * BOX_N, row);
                bulk_commit();
            }
            ++n;
        }
        store_chunks<Q + 1>(d, map_c, staging, n, leader, bar, N, row, col0, alpha);
    }
}

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
        const bool leader = threadIdx.x % 128 == 0;
        const uint32_t staging = tiles + STAGES * STAGE_BYTES + cw * 2 * EPI_BYTES;
        if (via_tma && leader) tma_prefetch_map(&map_c);
        int n = 0;                            // chunks staged by this consumer so far
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
            for (int h = 0; h < HALVES; ++h) {
                const int row = row0 + 64 * h;
                if (!via_tma)
                    store_accumulator<BN>(acc[h], C, M, N, row, col0, alpha, beta);
                else if (row < M)             // rows wholly below C: nothing to store
                    store_chunks<0>(acc[h], &map_c, staging, n, leader, EPI_BAR + cw, N, row,
                                    col0, alpha);
            }
        }
        if (leader) bulk_wait<0>();           // every store done before the block's smem goes
    }
}
