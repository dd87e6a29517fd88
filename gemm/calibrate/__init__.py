"""`gemm calibrate`'s workflow: the runner's A/B noise measured (runner: A/A processes, then
detection trials on the gate's own A/B engine) or other GPUs' files pooled and joined
(pooling). It writes the calibration file the gate reads (gemm.store.calibration)."""
