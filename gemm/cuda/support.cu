// Support kernels for the harness (not GEMM kernels): device-side random operands, float64
// widening for the cuBLAS DGEMM reference, and the elementwise tolerance check of
// gemm/core/tolerance.py done on the GPU, so a sweep never moves large matrices through the host.
// Two are on a kernel's own launch path: sgemm_stage_pad_k_b32 / _b16, the padded staging of
// a `pad_k` kernel (gemm/core/staging.py), and sgemm_split_k_reduce, the sum of a `split_k`
// kernel's partial products (gemm/core/splitk.py), named sgemm_ so that compute-sanitizer's
// filter in ci/memcheck.sh instruments them with the GEMM kernels.
#include <stdint.h>

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// x[i] = uniform in [-1, 1), a counter-based hash of (seed, i): same seed, same matrix.
extern "C" __global__ void fill_uniform(float* x, long long n, unsigned long long seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint64_t h = splitmix64(seed ^ splitmix64((uint64_t)i));
        x[i] = (float)(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;  // 24 random bits
    }
}

// y = x and ay = |x| in float64.
extern "C" __global__ void widen(const float* x, double* y, double* ay, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        double v = (double)x[i];
        y[i] = v;
        ay[i] = fabs(v);
    }
}

// ref += beta * c and mag += |beta| * |c|  (C's share of the reference and its magnitude).
extern "C" __global__ void add_beta_c(const float* c, double* ref, double* mag, double beta, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        double v = (double)c[i];
        ref[i] += beta * v;
        mag[i] += fabs(beta) * fabs(v);
    }
}

// The elementwise check of gemm/core/tolerance.py: ratio = |out - ref| / (scale * mag + 1e-30)
// in float64 (inf where out is not finite); bad when !(ratio <= 1). stats: [0] bad count,
// [1] non-finite count, [2] first bad index (min), [3] max ratio as float64 bits (non-negative
// doubles order like their bits); sums: [0] sum (out - ref)^2, [1] sum ref^2 over finite outputs.
extern "C" __global__ void compare(const float* out, const double* ref, const double* mag,
                                   double scale, long long n, unsigned long long* stats,
                                   double* sums) {
    unsigned long long bad = 0, nonfinite = 0, first = ~0ull;
    double worst = 0.0, se = 0.0, sr = 0.0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const double o = (double)out[i], r = ref[i];
        const bool fin = isfinite(o);
        const double ratio = fin ? fabs(o - r) / (scale * mag[i] + 1e-30) : __longlong_as_double(0x7ff0000000000000ll);
        if (!(ratio <= 1.0)) { bad++; if ((unsigned long long)i < first) first = i; }
        if (!fin) nonfinite++;
        else { se += (o - r) * (o - r); sr += r * r; }
        worst = fmax(worst, ratio);
    }
    for (int off = 16; off > 0; off >>= 1) {
        bad += __shfl_down_sync(0xffffffff, bad, off);
        nonfinite += __shfl_down_sync(0xffffffff, nonfinite, off);
        const unsigned long long f2 = __shfl_down_sync(0xffffffff, first, off);
        first = f2 < first ? f2 : first;
        worst = fmax(worst, __shfl_down_sync(0xffffffff, worst, off));
        se += __shfl_down_sync(0xffffffff, se, off);
        sr += __shfl_down_sync(0xffffffff, sr, off);
    }
    if ((threadIdx.x & 31) == 0) {
        if (bad) atomicAdd(&stats[0], bad);
        if (nonfinite) atomicAdd(&stats[1], nonfinite);
        if (first != ~0ull) atomicMin(&stats[2], first);
        atomicMax(&stats[3], (unsigned long long)__double_as_longlong(worst));
        atomicAdd(&sums[0], se);
        atomicAdd(&sums[1], sr);
    }
}

// In place: x[i] = x[i] rounded to TF32 (10 mantissa bits, to nearest, ties away from zero:
// cvt.rna.tf32.f32), so TF32 operands are TF32 numbers whatever rounding a kernel's hardware does.
extern "C" __global__ void round_tf32(float* x, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        unsigned int r;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x[i]));
        x[i] = __uint_as_float(r & 0xffffe000u);
    }
}

// y[i] = x[i] as bfloat16 bits (round to nearest even; the inputs are finite).
extern "C" __global__ void to_bf16(const float* x, unsigned short* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const unsigned int u = __float_as_uint(x[i]);
        y[i] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

// y = x and ay = |x| in float64, from bfloat16 bits.
extern "C" __global__ void widen_bf16(const unsigned short* x, double* y, double* ay, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const double v = (double)__uint_as_float((unsigned int)x[i] << 16);
        y[i] = v;
        ay[i] = fabs(v);
    }
}

// Fault injection (gemm.core.faults; off by default): one thread spins for `cycles` SM clock
// cycles. Launched right after a kernel, it adds a chosen share of that kernel's time.
extern "C" __global__ void delay_spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}

// Padded staging (gemm/core/staging.py): dst (rows x padded) = src (rows x cols) with each row
// zero-filled from cols to padded, so that TMA can address dst's rows (16-byte strides). Bits
// are copied as they are (float32 / TF32 as 32-bit words, bfloat16 as 16-bit ones). padded
// is a multiple of 16 / sizeof(T) and dst 16-byte aligned (a fresh allocation), so each thread
// stores one 16-byte vector of dst; src rows have any alignment, so it loads elementwise
// (consecutive threads read consecutive elements: coalesced). rows * padded < 2^31
// (gemm.core.staging refuses larger), so the vector index fits 32 bits.
template <typename T>
__device__ __forceinline__ void stage_pad_k(const T* __restrict__ src, T* __restrict__ dst,
                                            int rows, int cols, int padded) {
    constexpr int V = 16 / sizeof(T);
    const unsigned int per_row = (unsigned int)padded / V;
    const unsigned int total = (unsigned int)rows * per_row;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += gridDim.x * blockDim.x) {
        const unsigned int r = i / per_row, c0 = (i - r * per_row) * V;
        const T* s = src + (long long)r * cols;
        union { uint4 u; T t[V]; } v;
#pragma unroll
        for (int j = 0; j < V; ++j) v.t[j] = c0 + j < (unsigned int)cols ? s[c0 + j] : T(0);
        reinterpret_cast<uint4*>(dst + (long long)r * padded)[c0 / V] = v.u;
    }
}

extern "C" __global__ void sgemm_stage_pad_k_b32(const unsigned int* src, unsigned int* dst,
                                                 int rows, int cols, int padded) {
    stage_pad_k(src, dst, rows, cols, padded);
}

extern "C" __global__ void sgemm_stage_pad_k_b16(const unsigned short* src, unsigned short* dst,
                                                 int rows, int cols, int padded) {
    stage_pad_k(src, dst, rows, cols, padded);
}

// Split-K's second half (gemm/core/splitk.py): C = alpha * (ws[0] + ... + ws[splits - 1]) +
// beta * C, where ws holds `splits` float32 slices of mn = M * N elements, the partial products
// the GEMM kernel's blocks wrote for their K ranges. The slices are summed in order, one thread
// per element of C (grid-stride), so the result does not depend on scheduling (no atomics).
// C is not read when beta == 0, as in BLAS.
extern "C" __global__ void sgemm_split_k_reduce(const float* __restrict__ ws, float* __restrict__ c,
                                                long long mn, int splits, float alpha, float beta) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < mn;
         i += (long long)gridDim.x * blockDim.x) {
        float s = ws[i];
        for (int z = 1; z < splits; ++z) s += ws[z * mn + i];
        c[i] = beta == 0.0f ? alpha * s : alpha * s + beta * c[i];
    }
}
