"""TMA tensor maps encoded with the driver (cuda.bindings' cuTensorMapEncodeTiled) from the
plans of gemm.core.tensormaps, as the 128 bytes a kernel takes by value. A map of C that cannot
address C (gemm.core.tensormaps.addressable) is 128 zero bytes: the kernel stores C directly
then, and never reads it."""
from __future__ import annotations

import struct

from ..core.tensormaps import addressable

_SWIZZLE = {"none": "CU_TENSOR_MAP_SWIZZLE_NONE", "32B": "CU_TENSOR_MAP_SWIZZLE_32B",
            "64B": "CU_TENSOR_MAP_SWIZZLE_64B", "128B": "CU_TENSOR_MAP_SWIZZLE_128B"}
_DTYPE = {"float32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
          "bfloat16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"}


def encode(p, address: int) -> bytes:
    """One map: `p` a gemm.core.tensormaps.MapPlan, `address` the operand's device pointer."""
    if p.operand == "C" and not addressable(p, address):
        return bytes(128)
    from cuda.bindings import driver as d
    if address % 16:
        raise ValueError(f"TMA needs {p.operand}'s address 16-byte aligned, got {address:#x}")
    u32, u64 = d.cuuint32_t, d.cuuint64_t   # the bindings take these, not plain ints, in lists
    err, tmap = d.cuTensorMapEncodeTiled(
        getattr(d.CUtensorMapDataType, _DTYPE[p.dtype]), 2, address, [u64(x) for x in p.dims],
        [u64(p.row_stride)], [u32(x) for x in p.box], [u32(1), u32(1)],
        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(d.CUtensorMapSwizzle, _SWIZZLE[p.swizzle]),
        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != d.CUresult.CUDA_SUCCESS:
        raise ValueError(f"cuTensorMapEncodeTiled refused {p}: {err}")
    return struct.pack("<16Q", *[int(w) for w in tmap.opaque])


class TensorMaps:
    """The maps of one launcher; `encode(a, b)` returns their bytes, cached per pointer pair
    (`encode(a, b, c)` where a map of C is planned: per pointer triple)."""

    def __init__(self, plans) -> None:
        self.plans = plans
        self._cache: dict = {}

    def encode(self, a: int, b: int, c: int | None = None) -> tuple:
        key = (a, b) if c is None else (a, b, c)
        if key not in self._cache:
            ptr = {"A": a, "B": b, "C": c}
            if any(p.operand == "C" for p in self.plans) and c is None:
                raise ValueError("a map of C is planned: encode(a, b, c)")
            self._cache = {key: tuple(encode(p, ptr[p.operand]) for p in self.plans)}
        return self._cache[key]
