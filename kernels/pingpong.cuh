// Ping-pong consumers' building blocks (15, 18): two consumer warpgroups that take turns on the
// tensor cores. The stage wait with an optional watchdog, the ordering barrier between the two
// warpgroups, and the m64n192 wgmma their tune spaces use.
#pragma once
#include "hopper.cuh"

constexpr int PINGPONG_ORDER_THREADS = 256;   // both consumer warpgroups meet at the barrier

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
// barrier of the two consumer warpgroups. PINGPONG_ORDER_THREADS threads in all meet at barrier `id`:
// the 128 that sync wait until the other 128 have arrived; those that arrive do not wait.
__device__ __forceinline__ void order_wait(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(PINGPONG_ORDER_THREADS) : "memory");
}
__device__ __forceinline__ void order_signal(int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(PINGPONG_ORDER_THREADS) : "memory");
}

// wgmma m64n192k16 (hopper.cuh has n128 and n256).
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

