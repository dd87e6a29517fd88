"""The gate: screen, rule and A/B; the A/B measures only through each tree's `gemm measure`."""
