"""The tolerance rule on host arrays: float32 rounding passes, real mistakes and NaN do not."""
import numpy as np
import pytest

from gemm.core import tolerance
from gemm.core.tolerance import CheckStats, check_host, verdict


def operands(M, N, K, seed=1):
    rng = np.random.default_rng(seed)
    a = (rng.random((M, K), dtype=np.float32) * 2 - 1)
    b = (rng.random((K, N), dtype=np.float32) * 2 - 1)
    c = (rng.random((M, N), dtype=np.float32) * 2 - 1)
    return a, b, c


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (65, 129, 7), (64, 64, 2048), (8, 8, 16384)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (1.5, 0.5), (-1.0, 2.0)])
def test_float32_rounding_passes(M, N, K, alpha, beta):
    a, b, c = operands(M, N, K)
    # a plain float32 GEMM (numpy, other summation order than any kernel) must pass
    out = (np.float32(alpha) * (a @ b) + np.float32(beta) * c).astype(np.float32)
    v = check_host(out, a, b, c, alpha, beta, "fp32")
    assert v.ok, v
    assert v.max_err_over_tol < 1.0


def test_sequential_float32_sum_passes_at_large_k():
    """Worst ordering a simple kernel uses: one float32 accumulator, k = 0..K-1."""
    a, b, _ = operands(4, 4, 8192)
    out = np.zeros((4, 4), dtype=np.float32)
    for i in range(4):
        for j in range(4):
            acc = np.float32(0)
            for k in range(8192):
                acc = np.float32(acc + a[i, k] * b[k, j])
            out[i, j] = acc
    assert check_host(out, a, b, None, 1.0, 0.0, "fp32").ok


@pytest.mark.parametrize("K", [3, 7, 129, 2048, 8192])
def test_a_missing_k_term_fails(K):
    a, b, _ = operands(16, 16, K)
    a[5, K - 1], b[K - 1, 7] = 1.0, -1.0  # a term of ordinary size (|a|, |b| <= 1)
    out = (a @ b).astype(np.float32)
    out[5, 7] -= a[5, K - 1] * b[K - 1, 7]  # the K tail left out, as in the seed's code
    v = check_host(out, a, b, None, 1.0, 0.0, "fp32")
    assert not v.ok and v.first_bad == (5, 7) and v.bad == 1


def test_nan_never_passes():
    a, b, _ = operands(8, 8, 8)
    out = (a @ b).astype(np.float32)
    out[3, 3] = np.nan
    v = check_host(out, a, b, None, 1.0, 0.0, "fp32")
    assert not v.ok and v.nan == 1 and v.first_bad == (3, 3)


def test_wrong_beta_handling_fails():
    a, b, c = operands(32, 32, 32)
    out = (a @ b).astype(np.float32)  # forgot beta * C
    assert not check_host(out, a, b, c, 1.0, 0.5, "fp32").ok


def test_tf32_products_pass_at_tf32_only_when_rounded_as_the_reference():
    """The reference multiplies the TF32-rounded inputs: a product of the rounded inputs
    passes; one of the float32 inputs (input rounding skipped) does not, nor does the TF32
    product judged by the FP32 rule (its reference keeps the unrounded inputs)."""
    from gemm.core.precision import round_tf32
    a, b, _ = operands(64, 64, 256)
    out = (round_tf32(a).astype(np.float64) @ round_tf32(b)).astype(np.float32)
    assert check_host(out, a, b, None, 1.0, 0.0, "tf32").ok
    assert not check_host(out, a, b, None, 1.0, 0.0, "fp32").ok
    assert not check_host((a @ b).astype(np.float32), a, b, None, 1.0, 0.0, "tf32").ok


def test_tolerance_grows_with_k_and_precision():
    assert tolerance.tolerance_scale(4096, "fp32") > tolerance.tolerance_scale(64, "fp32")
    # tensor cores accumulate in float32 with truncation: one ulp per addition, not half
    assert tolerance.tolerance_scale(64, "tf32") == 2 * tolerance.tolerance_scale(64, "fp32")
    assert tolerance.tolerance_scale(64, "bf16") == tolerance.tolerance_scale(64, "tf32")


def test_an_all_zero_reference_and_output_pass_and_a_nonzero_output_fails():
    """The edge the GPU and host checks used to disagree on: a zero reference."""
    a = np.zeros((4, 3), dtype=np.float32)
    b = np.zeros((3, 5), dtype=np.float32)
    v = check_host(np.zeros((4, 5), dtype=np.float32), a, b, None, 1.0, 0.0, "fp32")
    assert v.ok and v.rel_fro_error == 0.0 and v.max_err_over_tol == 0.0
    out = np.zeros((4, 5), dtype=np.float32)
    out[1, 2] = 1e-3
    v = check_host(out, a, b, None, 1.0, 0.0, "fp32")
    assert not v.ok and v.first_bad == (1, 2) and v.rel_fro_error == float("inf")


def test_verdict_from_statistics():
    ok = verdict(CheckStats(n_cols=7, bad=0, nonfinite=0, first_bad=-1, worst=0.5,
                            sq_err=1e-12, sq_ref=1.0), "gpu")
    assert ok.ok and ok.first_bad is None and ok.rel_fro_error == pytest.approx(1e-6)
    bad = verdict(CheckStats(n_cols=7, bad=2, nonfinite=1, first_bad=15, worst=float("inf"),
                             sq_err=1.0, sq_ref=4.0), "gpu")
    assert not bad.ok and bad.first_bad == (2, 1) and bad.rel_fro_error == 0.5 and bad.nan == 1
