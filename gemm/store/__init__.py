"""What is stored between runs, read and written without a GPU: asv's recorded results read
back as series over commits (history), and the gate's kept verdicts (verdicts). The gate,
the site, the plots and the CLI read them; only gemm.record and gemm regress write them."""
