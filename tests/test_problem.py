"""Bad input gets a clear TypeError or ValueError before anything reaches the GPU."""
import numpy as np
import pytest

from gemm import api
from gemm.core.problem import MAX_ELEMENTS, Problem, check_matrix, problem_for


def f32(*shape):
    return np.ones(shape, dtype=np.float32)


def test_a_good_problem():
    p = problem_for(f32(3, 4), f32(4, 5), f32(3, 5), 2.0, 1.0)
    assert (p.M, p.N, p.K, p.flops) == (3, 5, 4, 2 * 3 * 5 * 4)
    assert Problem.parse("4096") == Problem(4096, 4096, 4096)
    assert Problem.parse("65x129x7").label == "65x129x7"


@pytest.mark.parametrize("a,b,c,exc,msg", [
    (f32(3, 4), f32(5, 6), None, ValueError, "inner dimensions differ"),
    (f32(3, 4), f32(4, 5), f32(5, 3), ValueError, r"C has shape \(5, 3\), expected \(3, 5\)"),
    (np.ones((3, 4)), f32(4, 5), None, TypeError, "A must be float32, got float64"),
    (f32(3, 4), np.ones((4, 5), dtype=np.float16), None, TypeError, "B must be float32"),
    (f32(4, 3).T, f32(4, 5), None, ValueError, "C-contiguous"),
    (f32(3, 8)[:, ::2], f32(4, 5), None, ValueError, "C-contiguous"),
    (f32(3, 4, 1), f32(4, 5), None, ValueError, "must be 2-D"),
    ([[1.0]], f32(1, 1), None, TypeError, "numpy.ndarray"),
    (f32(0, 4), f32(4, 5), None, ValueError, "at least 1"),
    (f32(3, 0), f32(0, 5), None, ValueError, "at least 1"),
])
def test_bad_operands(a, b, c, exc, msg):
    with pytest.raises(exc, match=msg):
        problem_for(a, b, c)


def test_beta_without_c():
    with pytest.raises(ValueError, match="no C was given"):
        problem_for(f32(2, 2), f32(2, 2), None, 1.0, 0.5)


@pytest.mark.parametrize("dims,exc,msg", [
    ((0, 5, 5), ValueError, "M must be at least 1"),
    ((5, -1, 5), ValueError, "N must be at least 1"),
    ((5, 5, 2.5), TypeError, "K must be an integer"),
    ((70000, 70000, 8), ValueError, "32-bit indexing"),
    ((2**31, 1, 1), ValueError, "32-bit indexing"),
])
def test_bad_dimensions(dims, exc, msg):
    with pytest.raises(exc, match=msg):
        Problem(*dims)


def test_bad_scalars():
    with pytest.raises(ValueError, match="alpha must be finite"):
        Problem(2, 2, 2, float("nan"))
    with pytest.raises(TypeError, match="beta must be a real number"):
        Problem(2, 2, 2, 1.0, "0")


def test_bad_size_strings():
    for s in ("abc", "4x4", "1x2x3x4", "0"):
        with pytest.raises(ValueError):
            Problem.parse(s)


def test_limit_is_exact():
    Problem(MAX_ELEMENTS, 1, 1)
    with pytest.raises(ValueError):
        Problem(MAX_ELEMENTS + 1, 1, 1)


def test_api_validates_before_touching_the_gpu(monkeypatch):
    """api.gemm must reject bad input before importing or calling anything on the device."""
    import gemm.cuda.device as dev

    def boom(*a, **k):
        raise AssertionError("the GPU was reached with bad input")

    monkeypatch.setattr(dev, "cuda", boom)
    with pytest.raises(ValueError, match="inner dimensions"):
        api.gemm("05", f32(3, 4), f32(5, 6))
    with pytest.raises(ValueError, match="unknown kernel"):
        api.gemm("nope", f32(3, 4), f32(4, 6))
    with pytest.raises(TypeError):
        api.gemm("05", np.ones((3, 4)), f32(4, 6))


def test_check_matrix_returns_the_array():
    a = f32(2, 3)
    assert check_matrix("A", a, (2, 3)) is a
