"""History and gate, without a GPU: the recorded results read back as series, the gate's rule,
the kept verdicts, the A/B that re-measures commits, and the workflow of one commit's
judgement (judge). The A/B reaches the GPU only through the stable measuring entry point
(`python -m gemm measure`) run in each commit's own tree, and samples the machine meanwhile
through NVML (gemm.machine)."""
