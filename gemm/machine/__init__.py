"""The GPU as seen from outside any CUDA context: NVML's SM clock, power, temperature and
power cap, sampled in a thread while other processes measure (the gate's A/B, gemm explain's
timed runs). Imports only core; pynvml lazily, so it answers "no samples" without a GPU."""
