// 17 BF16 wgmma + TMA, persistent, each tile's C stored while the next tile's wgmmas run: 14
// with two accumulator sets per consumer. In 14 and 16 both consumers finish a tile together and
// then spend about 5,000 cycles getting its C out (12 / 6.4 / 3.2 % of a tile at 2048 / 4096 /
// 8192, clock64 on the H200) while the tensor cores idle; 16 without its C stores ran 6-13 %
// faster, and neither a cheaper epilogue nor store warps nor ping-pong consumers won that back
// (docs/evidence.md). cuBLASLt's kernels use tiles whose accumulators fit twice in a consumer's
// registers (128 x 128, 112 x 128, 168 x 128); so here: a 128 x 128 tile (two consumers of 64
// rows, 64 accumulator registers each), two sets `acc0` / `acc1` used tile by tile, and the
// previous tile's set written to C in PIECES pieces, one after each of the first PIECES K
// tiles' wgmmas are issued (they run on the tensor cores meanwhile; a piece reads only the other
// set). What is left when K has fewer than PIECES tiles is written after the main loop, and the
// block's last tile after its tile loop (hopper.cuh's store_accumulator).
// - A piece goes straight from registers: one predicated 8-byte store per pair of columns where
//   beta is 0 and N even (FAST), else element by element with C read where beta != 0. FAST and
//   the general form are two instances of the whole consumer, chosen once per launch, and each
//   thread's two row addresses are worked out once per tile, so a piece is a few instructions
//   a pair: with per-element 4-byte stores and both forms interleaved in one instance, a K step
//   with a piece took 2.6 times a plain one (ncu's stall samples: stores holding their
//   registers, instruction-cache misses), and 17 ran 76-83 % of the baseline.
// - Staging the pieces in shared memory for TMA stores (as 16) measured slower (88-91 %): the
//   staging costs a stage (6 instead of 7) and a named barrier per piece.
// Constants (-D): BM (64 or 128), BN (128: two sets of 64), STAGES (>= 2), GROUP_M,
// PRODUCER_REGS, CONSUMER_REGS (as 14), PIECES (a divisor of BN / 8). Defaults 128, 128, 7, 16,
// 40, 232, 16; threads 128 * (1 + BM / 64). Dynamic shared memory STAGES * (BM + BN) * 128 + 1024
// (230,400 bytes with the defaults).
// ptxas (nvcc 13.0, sm_90a, defaults): 168 registers at entry, no spills, no C7510-C7518
// (a form that left the previous tile's wgmmas running into the next tile's first K step, to
// keep the tensor pipe fed across tiles, made ptxas serialize every wgmma: C7514).
// Measured (H200, one gemm bench process beside 16, 2026-12-03): 599 / 616 / 637 TFLOPS at
// 2048 / 4096 / 8192, 93.5 / 94.3 / 94.8 % of the cuBLASLt baseline (16: 92.8 / 93.6 / 94.8 %);
// with the pieces' stores left out (a timing probe, wrong C) 8.6 % faster at 4096: what the
// pieces still cost.
#include "hopper.cuh"
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 7
#endif
#ifndef PIECES
#define PIECES 16
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
static_assert(BN == 128, "BN: two sets of BN / 2 accumulators must fit a consumer");
static_assert((BN / 8) % PIECES == 0, "PIECES divides the fragment's BN / 8 column groups");
constexpr int GROUPS = BN / 8 / PIECES;      // 8-column groups per piece
static_assert(STAGES >= 2 && GROUP_M >= 1, "STAGES, GROUP_M");
static_assert(PRODUCER_REGS % 8 == 0 && CONSUMER_REGS % 8 == 0 &&
                  128 * (PRODUCER_REGS + CONSUMERS * CONSUMER_REGS) <= 65536,
              "setmaxnreg counts");

// Where a consumer's rows of a tile go, worked out once per tile: lane l of warp w holds rows
// row0 + 16 w + l / 4 (+ 8) and, in column group j, columns col0 + 8 j + 2 (l % 4) (+ 1).
struct Out {
    float* row[2];      // C at (the row, col0 + 2 (l % 4)); C itself where the row is out of C
    bool in_m[2];       // the row is in C
    int lim;            // N - col0 - 2 (l % 4): column group j is in C where 8 j < lim
};
__device__ __forceinline__ Out out_of(float* C, int M, int N, int row0, int col0) {
    const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
    Out o;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = row0 + 16 * w + l / 4 + 8 * h;
        o.in_m[h] = r < M;
        o.row[h] = o.in_m[h] ? C + static_cast<size_t>(r) * N + col0 + 2 * (l % 4) : C;
    }
    o.lim = N - col0 - 2 * (l % 4);
    return o;
}

// Piece Q of a consumer's m64nBN fragment (its column groups GROUPS * Q ..) into C. FAST (beta 0,
// N even: a row's pairs stay 8-byte aligned): one predicated 8-byte store per pair, C not read;
// else element by element, C read where beta != 0. The two forms are separate instances of the
// whole consumer, so the code a tile runs through stays short (the pieces are unrolled per Q).
template <int Q, bool FAST>
__device__ __forceinline__ void store_piece(const float (&d)[BN / 2], const Out& o, float alpha,
                                            float beta) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int g = 0; g < GROUPS; ++g) {
            const int j = Q * GROUPS + g;
            const float v0 = alpha * d[4 * j + 2 * h], v1 = alpha * d[4 * j + 2 * h + 1];
            float* p = o.row[h] + 8 * j;
            if constexpr (FAST) {
                if (o.in_m[h] && 8 * j < o.lim) *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
            } else {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const bool ok = o.in_m[h] && 8 * j + e < o.lim;
                    const float old = ok && beta != 0.0f ? p[e] : 0.0f;
                    if (ok) p[e] = (e ? v1 : v0) + beta * old;
                }
            }
        }
    }
}

// The pieces Q.. of `d` whose K tile never came (K with fewer than PIECES tiles): from `from` on.
template <int Q, bool FAST>
__device__ __forceinline__ void store_pieces_from(int from, const float (&d)[BN / 2], const Out& o,
                                                  float alpha, float beta) {
    if constexpr (Q < PIECES) {
        if (Q >= from) store_piece<Q, FAST>(d, o, alpha, beta);
        store_pieces_from<Q + 1, FAST>(from, d, o, alpha, beta);
    }
}

struct Tile {                                 // what a consumer's K loop needs of its block
    uint32_t tiles;                           // the stages' base
    uint64_t* full;
    uint64_t* empty;
    int ktiles, cw;
    bool arrives;
};

// One K tile: wait for its stage, issue its wgmmas into `cur`, then (piece Q >= 0) write piece
// Q of the previous tile's set while they run; release the stage of the K tile before.
template <int Q, bool HAS_PREV, bool FAST>
__device__ __forceinline__ void k_step(const Tile& b, int kt, int& it, float (&cur)[BN / 2],
                                       const float (&prev)[BN / 2], const Out& o, float alpha,
                                       float beta) {
    const int s = it % STAGES;
    mbar_wait(smem_addr(&b.full[s]), (it / STAGES) & 1);
    const uint32_t sa = b.tiles + s * STAGE_BYTES;
    const uint64_t da = desc_kmajor_sw128(sa + b.cw * 64 * 128);
    const uint64_t db = desc_kmajor_sw128(sa + A_BYTES);
    fence_regs(cur);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
        wgmma_bf16<BN>(cur, da + 2 * kk, db + 2 * kk, kt > 0 || kk > 0);
    wgmma_commit();
    if constexpr (Q >= 0 && HAS_PREV) store_piece<Q, FAST>(prev, o, alpha, beta);
    wgmma_wait<1>();                          // the group of the previous K tile has finished
    fence_regs(cur);
    if (kt > 0 && b.arrives) mbar_arrive(smem_addr(&b.empty[(it - 1) % STAGES]));
    ++it;
}

// The first PIECES K tiles, each with a piece of the previous tile's C.
template <int Q, bool HAS_PREV, bool FAST>
__device__ __forceinline__ void k_steps_with_pieces(const Tile& b, int& it, float (&cur)[BN / 2],
                                                    const float (&prev)[BN / 2], const Out& o,
                                                    float alpha, float beta) {
    if constexpr (Q < PIECES) {
        if (Q < b.ktiles) {
            k_step<Q, HAS_PREV, FAST>(b, Q, it, cur, prev, o, alpha, beta);
            k_steps_with_pieces<Q + 1, HAS_PREV, FAST>(b, it, cur, prev, o, alpha, beta);
        }
    }
}

// A whole tile into `cur` while `prev` (the tile before, HAS_PREV, going to `o`) goes to C.
template <bool HAS_PREV, bool FAST>
__device__ __forceinline__ void run_tile(const Tile& b, int& it, float (&cur)[BN / 2],
                                         float (&prev)[BN / 2], const Out& o, float alpha,
                                         float beta) {
    fence_regs(prev);                         // where ptxas may wait for prev's wgmmas: none is
    fence_regs(cur);                          // in flight yet (not after this tile's first one)
    k_steps_with_pieces<0, HAS_PREV, FAST>(b, it, cur, prev, o, alpha, beta);
    for (int kt = PIECES; kt < b.ktiles; ++kt)
        k_step<-1, false, FAST>(b, kt, it, cur, prev, o, alpha, beta);
    wgmma_wait<0>();
    fence_regs(cur);
    fence_regs(prev);                         // both sets settled here, for the compiler too
    if (b.arrives) mbar_arrive(smem_addr(&b.empty[(it - 1) % STAGES]));
    if (HAS_PREV && b.ktiles < PIECES)
        store_pieces_from<0, FAST>(b.ktiles, prev, o, alpha, beta);
}

// A consumer's tiles, t = blockIdx.x, + gridDim.x, ...: tile j accumulates in acc0 (j even) or
// acc1 (j odd) while the other set, tile j - 1's, goes to C in pieces.
template <bool FAST>
__device__ __forceinline__ void consume(const Tile& b, int tiles_m, int tiles_n, float* C, int M,
                                        int N, float alpha, float beta) {
    const int ntiles = tiles_m * tiles_n;
    float acc0[BN / 2], acc1[BN / 2];
    int it = 0;                               // K tiles consumed by this block so far
    int t = blockIdx.x;
    if (t >= ntiles) return;
    int row0, col0;
    tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
    Out o = out_of(C, M, N, row0 + 64 * b.cw, col0);
    run_tile<false, FAST>(b, it, acc0, acc1, o, alpha, beta);   // the first: nothing before it
    bool last0 = true;                        // which set holds the block's last tile
    for (t += gridDim.x; t < ntiles; t += gridDim.x) {   // then two at a time: acc1's, acc0's
        tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
        run_tile<true, FAST>(b, it, acc1, acc0, o, alpha, beta);
        o = out_of(C, M, N, row0 + 64 * b.cw, col0);
        last0 = false;
        t += gridDim.x;
        if (t >= ntiles) break;
        tile_origin<BM, BN, GROUP_M>(t, tiles_m, tiles_n, row0, col0);
        run_tile<true, FAST>(b, it, acc0, acc1, o, alpha, beta);
        o = out_of(C, M, N, row0 + 64 * b.cw, col0);
        last0 = true;
    }
    // the block's last tile (origin row0, col0): nothing left to overlap it with
    if (last0) store_accumulator<BN>(acc0, C, M, N, row0 + 64 * b.cw, col0, alpha, beta);
    else store_accumulator<BN>(acc1, C, M, N, row0 + 64 * b.cw, col0, alpha, beta);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
sgemm_bf16_acc_overlap(const __grid_constant__ TmaMap map_a, const __grid_constant__ TmaMap map_b, int M,
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
        const Tile b{tiles, full, empty, ktiles, wg - 1, threadIdx.x % 32 == 0};
        if (beta == 0.0f && (N & 1) == 0)
            consume<true>(b, tiles_m, tiles_n, C, M, N, alpha, beta);
        else
            consume<false>(b, tiles_m, tiles_n, C, M, N, alpha, beta);
    }
}
