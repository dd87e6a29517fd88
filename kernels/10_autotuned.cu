// 10 Autotuned: step 09's kernel, with its constants chosen on the GPU instead of by hand.
// `gemm tune 10_autotuned` searches the space declared in this kernel's registry entry
// (`tune`: block tile BM x BN, warp tile WM x WN; STAGES 3-5 measured within 0.7 % in 09), compiles every
// candidate, rejects those that spill or compute a wrong answer, times the rest with the suite's
// own policy, and writes the fastest per size class (by M * N: small ~1024, medium ~2048,
// large >= ~4096) to kernels/tuned/<gpu>.toml. The launcher reads that table for this GPU and
// compiles one variant per size class; on a GPU without a table the defaults below (09's) apply.
// Why: one hand-picked tile cannot suit every size. 09's 128 x 256 tile is the fastest at 2048
// and above but leaves most of the 132 SMs idle at 1024 (32 blocks) and below.
// Constants (-D): as in 09_cp_async_pipeline.cu; the code is that file's.
// Measured on the H200: (filled in from the recorded run)
#include "09_cp_async_pipeline.cu"
