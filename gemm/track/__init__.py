"""The gate, without a GPU: the screen, the rule, the A/B that re-measures commits, and the
workflow of one commit's judgement (judge), over the history and kept verdicts of gemm.store.
The A/B reaches the GPU only through the stable measuring entry point (`python -m gemm
measure`) run in each commit's own tree, and samples the machine meanwhile through NVML
(gemm.machine)."""
