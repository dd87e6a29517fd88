// 10 Autotuned: step 09's kernel, with its constants chosen on the GPU instead of by hand.
// `gemm tune 10_autotuned` searches the space declared in this kernel's registry entry
// (`tune`: block tile BM x BN, warp tile WM x WN; STAGES 3-5 measured within 0.7 % in 09), compiles every
// candidate, rejects those that spill or compute a wrong answer, times the rest with the suite's
// own policy, and writes the fastest per size class (by M * N: small ~1024, medium ~2048,
// large >= ~4096) to kernels/tuned/<gpu>.toml. The launcher reads that table for this GPU and
// compiles one variant per size class; on a GPU without a table the defaults below (09's) apply.
// Why: one hand-picked tile cannot suit every size. 09's 128 x 256 tile is the fastest at 2048
// and above but leaves most of the 132 SMs idle at 1024 (32 blocks) and below.
// Constants (-D): as in 09_cp_async_pipeline.cu; the code is that file's, with SPLIT_K_OK = 1:
// where its tiles are at most half the SMs (512: 32 tiles of 64 x 128 for 132 SMs), the
// launcher splits K over gridDim.z (S blocks per tile, each a K range, partial tiles to a
// workspace) and a second kernel sums the S partials into C (gemm/core/splitk.py).
// Measured on the H200 by the suite (recorded at 1ed380e; TFLOPS, % of cuBLAS FP32 measured
// interleaved): 38.56 at 1024 (99 %), 47.26 at 2048 (94 %),
// 47.79 at 4096 (93 %), 47.92 at 8192 (94 %); 3001x2999x3003 (fallback path) 30.60 (70 %).
// Gain over 09_cp_async_pipeline at 4096 / 8192: -0.0 % / -0.2 %.
// At 2048 and above the tuner kept 09's constants (the same compiled kernel; the
// differences from 09 are noise); at 1024 and below its 64 x 128 tile fills the GPU.
#include "09_cp_async_pipeline.cu"
