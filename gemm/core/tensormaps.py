"""The TMA tensor maps a kernel asks for (registry `tma`), as plain numbers (no GPU).

Each map describes one operand as stored, row-major: A is M x K; B is K x N, or N x K when
b_layout = "nk". In TMA's terms dimension 0 is the contiguous one (cols), dimension 1 the rows;
the row stride in bytes must be a multiple of 16 and the base address 16-byte aligned, which
`plans` checks before anything is encoded: a shape that breaks it raises ShapeRefused (a ValueError). Tiles
that run past the matrix are zero-filled by the hardware, so any M, N, K >= 1 with aligned
strides is covered. A `pad_k` kernel is planned over gemm.core.staging.kernel_problem (K
padded, the operands staged), so K never breaks the rule there. gemm.cuda.tma encodes them
with cuTensorMapEncodeTiled.

C (M x N float32, for a kernel that stores C with TMA: 16_bf16_tma_store) is never refused:
such a kernel also has direct stores, and takes them for the whole launch where its C map
cannot address C (`addressable`: N % 4 != 0, or C's base off 16 bytes) or beta != 0. Its plan
is made for every shape; gemm.cuda.tma encodes it where C is addressable and passes 128 zero
bytes where it is not, and the kernel tests the same two facts, so it never uses a zero map.
"""
from __future__ import annotations

from dataclasses import dataclass

from .problem import Problem, ShapeRefused
from .registry import KernelSpec

TMA_STRIDE_ALIGN = 16


@dataclass(frozen=True)
class MapPlan:
    operand: str          # "A", "B" or "C"
    dtype: str            # "float32" or "bfloat16"
    dims: tuple           # (cols, rows): dimension 0 contiguous
    row_stride: int       # bytes between rows
    box: tuple            # (box cols, box rows)
    swizzle: str


def shape_of(spec: KernelSpec, operand: str, prob: Problem) -> tuple[int, int]:
    if operand == "A":
        return prob.M, prob.K
    if operand == "C":
        return prob.M, prob.N
    return (prob.K, prob.N) if spec.b_layout == "kn" else (prob.N, prob.K)


def addressable(p: MapPlan, address: int) -> bool:
    """Can a map of plan `p` address its operand at `address`: a row stride that is a multiple
    of 16 bytes and a 16-byte-aligned base. (Planned A and B always have the stride; C may
    not.)"""
    return p.row_stride % TMA_STRIDE_ALIGN == 0 and address % TMA_STRIDE_ALIGN == 0


def plans(spec: KernelSpec, prob: Problem) -> list[MapPlan]:
    elt = spec.operands.in_bytes
    dtype = "bfloat16" if spec.precision == "bf16" else "float32"
    out = []
    for op, box_rows, box_cols, swz in spec.tma_boxes():
        rows, cols = shape_of(spec, op, prob)
        if op == "C":          # float32 whatever the inputs; never refused (see above)
            out.append(MapPlan(op, "float32", (cols, rows), cols * 4, (box_cols, box_rows), swz))
            continue
        stride = cols * elt
        if stride % TMA_STRIDE_ALIGN:
            raise ShapeRefused(
                f"{spec.name}: {op} is {rows} x {cols} {dtype}; TMA needs its row stride "
                f"({stride} bytes) to be a multiple of {TMA_STRIDE_ALIGN} bytes, so its column "
                f"count a multiple of {TMA_STRIDE_ALIGN // elt}"
                + (" (registry pad_k = true would stage it padded)"
                   if spec.b_layout == "nk" and not spec.pad_k else ""))
        out.append(MapPlan(op, dtype, (cols, rows), stride, (box_cols, box_rows), swz))
    return out
