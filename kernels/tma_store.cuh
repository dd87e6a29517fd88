// The TMA-store epilogue (16, 18): a consumer warpgroup's m64 x WN FP32 fragment staged in
// shared memory, CN columns at a time through two buffers, and sent by TMA stores of 64 x 32
// boxes (C's map: box [64, 32], 128-byte swizzle), thread 0 of the warpgroup owning the bulk
// groups.
#pragma once
#include "hopper.cuh"

constexpr int BOX_N = 32;                    // FP32 columns of a 128-byte swizzled row: C's box
constexpr int BOX_BYTES = 64 * BOX_N * 4;    // one 64 x 32 box (8 KB)

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
// The same box added to the tensor's values (the map's type, FP32 here) by the copy engine.
__device__ __forceinline__ void tma_reduce_add_2d(const TmaMap* map, uint32_t src, int c0, int c1) {
    asm volatile(
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], "
        "[%3];\n" ::"l"(reinterpret_cast<uint64_t>(map)),
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

// The epilogue of an m64 x WN fragment in chunks of CN columns (a multiple of BOX_N).
template <int WN, int CN>
struct TmaStoreEpilogue {
    static constexpr int SUBS = CN / BOX_N;          // boxes per chunk (one bulk group)
    static constexpr int EPI_BYTES = SUBS * BOX_BYTES;   // one staging buffer

    // Chunk q (columns q * CN ..) of a warpgroup's m64nWN accumulator into a staging buffer,
    // as alpha * acc, in the 128B-swizzled layout of the C map's box: box s of the chunk
    // (columns s * 32 ..) at buf + s * BOX_BYTES, row r at r * 128, its 16-byte unit u at
    // (u ^ (r % 8)) * 16. Thread t (warp w, lane l) holds row 16 * w + l / 4 + 8 * h, columns
    // 8 * i + 2 * (l % 4) + {0, 1} in registers 4 * i + 2 * h + {0, 1} (hopper.cuh's
    // store_accumulator); in a box, i's 32-byte span is units 2 * (i % 4) and + 1, the lane's
    // pair is in unit 2 * (i % 4) + (l % 4) / 2 at byte 8 * (l % 2), and r % 8 = l / 4 for every
    // w and h.
    template <int Q>
    static __device__ __forceinline__ void stage_chunk(const float (&d)[WN / 2], uint32_t buf,
                                                       float alpha) {
        const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
        const uint32_t xr = l >> 2, half = (l >> 1) & 1, lo = (l & 1) << 3;
#pragma unroll
        for (int ii = 0; ii < CN / 8; ++ii) {
            const int i = Q * (CN / 8) + ii;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const uint32_t row = 16 * w + (l >> 2) + 8 * h;
                const uint32_t unit = (2 * (ii % 4) + half) ^ xr;
                const uint32_t addr = buf + (ii / 4) * BOX_BYTES + row * 128 + unit * 16 + lo;
                st_shared_v2(addr, alpha * d[4 * i + 2 * h], alpha * d[4 * i + 2 * h + 1]);
            }
        }
    }

    // One consumer's tile through the staging buffers (16's header says how). `n`: the
    // chunks this consumer has staged so far (buffer n % 2); `leader`: its thread 0, which owns
    // the bulk groups; `add`: add to C (TMA reductions) instead of storing.
    template <int Q>
    static __device__ __forceinline__ void store_chunks(const float (&d)[WN / 2], const TmaMap* map_c,
                                                        uint32_t staging, int& n, bool leader,
                                                        int bar, int N, int row, int col0,
                                                        float alpha, bool add = false) {
        if constexpr (Q < WN / CN) {
            const int col = col0 + Q * CN;
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
                        if (col + s * BOX_N < N) {
                            if (add)
                                tma_reduce_add_2d(map_c, buf + s * BOX_BYTES, col + s * BOX_N, row);
                            else
                                tma_store_2d(map_c, buf + s * BOX_BYTES, col + s * BOX_N, row);
                        }
                    bulk_commit();
                }
                ++n;
            }
            store_chunks<Q + 1>(d, map_c, staging, n, leader, bar, N, row, col0, alpha, add);
        }
    }
};
