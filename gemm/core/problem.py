"""A GEMM problem and the checks that run before anything reaches the GPU.

C = alpha * A @ B + beta * C with row-major float32 A (M x K), B (K x N), C (M x N).
Every check raises ValueError or TypeError with a sentence that says what is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

# Kernels index with 32-bit ints: every matrix must have fewer elements than this.
MAX_ELEMENTS = 2**31 - 1


class ShapeRefused(ValueError):
    """A kernel's launch contract refuses this shape (alignment without a fallback, TMA's
    16-byte row strides, the grid limit): said before anything reaches the GPU, and recorded
    as "unsupported" (a skip), never as a failure. Any other error is a failure."""


class SizeClass(StrEnum):
    """The gate's size class of a problem, by its work M*N*K (how long one launch takes): what
    a series' minimum effect, carried UNRESOLVED and calibration's borrowing go by. (Not the
    buckets tuned constants are chosen by: gemm.core.tuning.tuning_bucket.)"""
    LARGE = "large"      # M*N*K >= 2048^3
    MEDIUM = "medium"    # M*N*K >= 1000^3
    SMALL = "small"

    @classmethod
    def of(cls, work: int) -> "SizeClass":
        return next(c for c, floor in _CLASS_FLOORS if work >= floor)


_CLASS_FLOORS = ((SizeClass.LARGE, 2048 ** 3), (SizeClass.MEDIUM, 1000 ** 3), (SizeClass.SMALL, 0))


@dataclass(frozen=True)
class Problem:
    M: int
    N: int
    K: int
    alpha: float = 1.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        for dim in ("M", "N", "K"):
            v = getattr(self, dim)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{dim} must be an integer, got {type(v).__name__}")
            if v < 1:
                raise ValueError(f"{dim} must be at least 1, got {v}")
        for name, (rows, cols) in (("A", (self.M, self.K)), ("B", (self.K, self.N)),
                                   ("C", (self.M, self.N))):
            if rows * cols > MAX_ELEMENTS:
                raise ValueError(
                    f"{name} would be {rows} x {cols} = {rows * cols} elements, past the "
                    f"kernels' 32-bit indexing limit of {MAX_ELEMENTS}")
        for name in ("alpha", "beta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)):
                raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
            if not np.isfinite(v):
                raise ValueError(f"{name} must be finite, got {v}")

    @property
    def flops(self) -> int:
        """2*M*N*K: the convention the seed's table and cuBLAS figures use."""
        return 2 * self.M * self.N * self.K

    @property
    def size_class(self) -> SizeClass:
        return SizeClass.of(self.M * self.N * self.K)

    @property
    def label(self) -> str:
        if self.M == self.N == self.K:
            return str(self.M)
        return f"{self.M}x{self.N}x{self.K}"

    @classmethod
    def square(cls, n: int, alpha: float = 1.0, beta: float = 0.0) -> "Problem":
        return cls(n, n, n, alpha, beta)

    @classmethod
    def parse(cls, text: str) -> "Problem":
        """'4096' (square) or 'MxNxK'."""
        parts = str(text).lower().split("x")
        try:
            dims = [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"size {text!r} is not N or MxNxK with integers") from None
        if len(dims) == 1:
            return cls.square(dims[0])
        if len(dims) == 3:
            return cls(*dims)
        raise ValueError(f"size {text!r} is not N or MxNxK")


def same_size(a, b) -> bool:
    """Do two size labels name one problem ("4096" and "4096x4096x4096")? Text that is no
    size is compared as text."""
    try:
        return Problem.parse(a).label == Problem.parse(b).label
    except (ValueError, TypeError):
        return str(a) == str(b)


def check_matrix(name: str, x: object, shape: tuple[int, int] | None = None,
                 dtype=np.float32) -> np.ndarray:
    """A host matrix must be a 2-D, C-contiguous numpy array of `dtype` (float32, or
    ml_dtypes' bfloat16 for A and B of a bf16 target), of `shape` if given."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype != np.dtype(dtype):
        raise TypeError(f"{name} must be {np.dtype(dtype).name}, got {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous row-major (transposed or strided views "
                         f"are not supported; pass np.ascontiguousarray({name}))")
    if shape is not None and x.shape != shape:
        raise ValueError(f"{name} has shape {x.shape}, expected {shape}")
    return x


def problem_for(a: object, b: object, c: object | None = None,
                alpha: float = 1.0, beta: float = 0.0, in_dtype=np.float32,
                b_layout: str = "kn") -> Problem:
    """Validate host operands and return the Problem they describe. A and B are of
    `in_dtype`; B is K x N, or N x K when b_layout is "nk" (gemm.core.precision)."""
    a = check_matrix("A", a, dtype=in_dtype)
    b = check_matrix("B", b, dtype=in_dtype)
    b_k, b_n = b.shape if b_layout == "kn" else b.shape[::-1]
    if a.shape[1] != b_k:
        raise ValueError(f"inner dimensions differ: A is {a.shape[0]} x {a.shape[1]}, "
                         f"B is {b.shape[0]} x {b.shape[1]}"
                         + ("" if b_layout == "kn" else " (stored N x K)"))
    if 0 in a.shape or 0 in b.shape:
        raise ValueError(f"every dimension must be at least 1 (A {a.shape}, B {b.shape})")
    prob = Problem(a.shape[0], b_n, a.shape[1], alpha, beta)
    if c is not None:
        check_matrix("C", c, (prob.M, prob.N))
    elif beta != 0:
        raise ValueError("beta is non-zero but no C was given")
    return prob
