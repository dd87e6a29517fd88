"""What is stored between runs, read and written without a GPU: asv's recorded results read
back as series over commits (history), the gate's kept verdicts (verdicts) and the runners'
calibration files (calibration). The gate, the site, the plots and the CLI read them; only
gemm.record, gemm regress and gemm calibrate write them."""
