"""The gate: the screen, the rule and the A/B over gemm.store's history and kept verdicts; the
A/B reaches the GPU only through `python -m gemm measure` in each commit's own tree."""
