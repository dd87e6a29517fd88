"""The precision axis: what each precision means for operands, baseline and rounding (no GPU).

    precision  A, B on the device        what the kernel multiplies     input u   cuBLAS baseline
    fp32       float32                   the float32 values             2^-24     cublas_fp32 (SGEMM, PEDANTIC)
    tf32       float32                   the values rounded to TF32     2^-11     cublas_tf32 (GemmEx, COMPUTE_32F_FAST_TF32)
    bf16       bfloat16 (uint16 bits)    the bfloat16 values            2^-8      cublas_bf16 (GemmEx, 16BF in, COMPUTE_32F)

C is float32 in every precision, and so is the accumulation. The float64 reference is computed
from the inputs as the kernel sees them (`round_inputs`), so the tolerance measures the
accumulation alone (gemm.core.tolerance), not the input rounding (input u above, which is what
a reference from the unrounded float32 inputs would have to allow for).

Operands the harness generates for TF32 are already TF32 numbers (rounded on the device right
after they are drawn), so a kernel whose hardware drops the low 13 bits and one that rounds them
(cvt.rna.tf32.f32) multiply the same values; host arrays given to gemm.api for a TF32 target
are rounded the same way (round to nearest, ties away from zero) before they are uploaded.

B's layout (`b_layout`, a registry field): "kn" (the default) is B as K x N row-major; "nk"
is B stored as its transpose, N x K row-major (K contiguous: what wgmma's TF32 shared-memory
operands need). The product is the same A @ B; the baseline is the cuBLAS configuration with the
matching transpose flag, named with a `_nk` suffix, so both read the same bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PRECISIONS = ("fp32", "tf32", "bf16")
B_LAYOUTS = ("kn", "nk")
INPUT_UNIT_ROUNDOFF = {"fp32": 2.0**-24, "tf32": 2.0**-11, "bf16": 2.0**-8}
INPUT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2}


def baseline_name(precision: str, b_layout: str = "kn") -> str:
    """The cuBLAS configuration a kernel of this precision and B layout is compared with."""
    if precision not in PRECISIONS or b_layout not in B_LAYOUTS:
        raise ValueError(f"no baseline for precision {precision!r}, b_layout {b_layout!r}")
    return f"cublas_{precision}" + ("" if b_layout == "kn" else f"_{b_layout}")


BASELINES = tuple(baseline_name(p, lay) for lay in B_LAYOUTS for p in PRECISIONS)


@dataclass(frozen=True)
class OperandFormat:
    """How A and B are stored for a target: element type (by precision) and B's layout."""
    precision: str = "fp32"
    b_layout: str = "kn"

    def __post_init__(self) -> None:
        baseline_name(self.precision, self.b_layout)   # validates both

    @property
    def in_bytes(self) -> int:
        return INPUT_BYTES[self.precision]

    @property
    def baseline(self) -> str:
        return baseline_name(self.precision, self.b_layout)

    def b_shape(self, K: int, N: int) -> tuple[int, int]:
        return (K, N) if self.b_layout == "kn" else (N, K)

    def host_dtype(self):
        """The numpy dtype of host A and B (ml_dtypes' bfloat16 for bf16)."""
        if self.precision == "bf16":
            import ml_dtypes
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(np.float32)


def format_of_baseline(name: str) -> OperandFormat:
    """'cublas_bf16_nk' -> OperandFormat('bf16', 'nk'); ValueError for other names."""
    for p in PRECISIONS:
        for lay in B_LAYOUTS:
            if baseline_name(p, lay) == name:
                return OperandFormat(p, lay)
    raise ValueError(f"unknown cuBLAS configuration {name!r}; known: {', '.join(BASELINES)}")


def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 -> the nearest TF32 number (10 mantissa bits), ties away from zero, as
    cvt.rna.tf32.f32 does; returned as float32. Inf and NaN pass through."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(finite, rounded, bits).astype(np.uint32).view(np.float32)


def round_inputs(x: np.ndarray, precision: str) -> np.ndarray:
    """A host operand as the kernel multiplies it, as float32 (exactly representable)."""
    if precision == "fp32":
        return np.asarray(x, dtype=np.float32)
    if precision == "tf32":
        return round_tf32(np.asarray(x, dtype=np.float32))
    if precision == "bf16":
        import ml_dtypes
        return np.asarray(x).astype(ml_dtypes.bfloat16).astype(np.float32)
    raise ValueError(f"unknown precision {precision!r}")
