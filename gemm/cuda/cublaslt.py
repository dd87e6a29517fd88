"""cuBLASLt through nvmath-python's bindings (nvmath.bindings.cublasLt): the problem today's
baseline call solves, the heuristic's candidate algorithms for it, and a launcher per candidate.

The problem is gemm.cuda.cublas's, operand for operand (row-major C = A @ B as column-major
C^T = op(B) A^T): Lt's "A" is our B buffer, N x K column-major with ld N and TRANSA = N for
b_layout "kn", or K x N with ld K and TRANSA = T for "nk"; Lt's "B" is our A buffer, K x M
with ld K, TRANSB = N; C = D = the output, N x M, ld N, float32; alpha = 1, beta = 0 as host
float32 scalars. A and B are float32 (fp32, tf32) or bfloat16 (bf16). Compute types:

  fp32  COMPUTE_32F_PEDANTIC   (today: cublasSgemm with PEDANTIC math)
  tf32  COMPUTE_32F_FAST_TF32  (today: cublasGemmEx, COMPUTE_32F_FAST_TF32)
  bf16  COMPUTE_32F            (today: cublasGemmEx, BF16 in, COMPUTE_32F)

The heuristic is asked with a workspace limit (MAX_WORKSPACE_BYTES; 32 MiB by default, as
frameworks give cuBLAS on Hopper) and each launch passes that workspace. `recreate` builds a
recorded algorithm again from its configuration (the suite's baseline where a choice file
names one: gemm.cuda.basecall). Every binding call is through `self.lt`, so a test can hand
in a fake module with the same names.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CUDA_R_32F, CUDA_R_16BF = 0, 14                    # cudaDataType_t
OP_N, OP_T = 0, 1                                  # cublasOperation_t
COMPUTE_IDS = {"COMPUTE_32F": 68, "COMPUTE_32F_PEDANTIC": 69, "COMPUTE_32F_FAST_TF32": 77}
COMPUTE_OF = {"fp32": "COMPUTE_32F_PEDANTIC", "tf32": "COMPUTE_32F_FAST_TF32",
              "bf16": "COMPUTE_32F"}
WORKSPACE_BYTES = 32 << 20
# MatmulAlgoConfigAttribute members read for each candidate, and the key they are recorded as
CONFIG_ATTRS = (("ID", "id"), ("TILE_ID", "tile"), ("STAGES_ID", "stages"),
                ("SPLITK_NUM", "splitk"), ("REDUCTION_SCHEME", "reduction"),
                ("CTA_SWIZZLING", "swizzle"), ("CUSTOM_OPTION", "custom"),
                ("INNER_SHAPE_ID", "inner_shape"), ("CLUSTER_SHAPE_ID", "cluster"))
# enum ids turned into names where the bindings know them: TILE_128x256 -> "128x256"
ENUM_NAMES = {"tile": ("MatmulTile", "TILE_"), "stages": ("MatmulStages", "STAGES_"),
              "cluster": ("ClusterShape", "SHAPE_")}


def bindings():
    """nvmath.bindings.cublasLt, or GPUUnavailable with why."""
    from .device import GPUUnavailable
    try:
        from nvmath.bindings import cublasLt
    except Exception as exc:
        raise GPUUnavailable(f"nvmath-python's cuBLASLt bindings are not usable ({exc})") from None
    return cublasLt


class RecreateError(RuntimeError):
    """A recorded algorithm that cannot be built again here; says why in one sentence."""


@dataclass
class Candidate:
    """One heuristic answer: its rank, its configuration (CONFIG_ATTRS' keys; None where not
    readable), workspace and waves as the heuristic reported them, and where its algo struct
    lives (inside the LtMatmul's results buffer, alive while the LtMatmul is)."""
    rank: int
    algo: dict = field(default_factory=dict)
    workspace_bytes: int = 0
    waves: float | None = None
    ptr: int = 0

    def label(self) -> str:
        a = self.algo
        parts = [f"algo {a.get('id')}"]
        for key, name in (("tile", "tile"), ("stages", "stages"), ("splitk", "splitK"),
                          ("cluster", "cluster")):
            if a.get(key) is not None:
                parts.append(f"{name} {a[key]}")
        return " ".join(parts)

    def as_dict(self) -> dict:
        return {"rank": self.rank, "algo": dict(self.algo), "workspace_bytes": self.workspace_bytes,
                "waves": self.waves}


class LtMatmul:
    """The descriptors of one problem (M, N, K, precision, B layout) in cuBLASLt, on a handle of
    its own; `candidates(n)` asks the heuristic, `launcher(c)` runs one candidate."""

    def __init__(self, precision: str, b_layout: str, M: int, N: int, K: int, workspace: int,
                 workspace_bytes: int = WORKSPACE_BYTES, compute: str | None = None,
                 lt=None) -> None:
        if precision not in COMPUTE_OF or b_layout not in ("kn", "nk"):
            raise ValueError(f"no cuBLASLt problem for precision {precision!r}, "
                             f"b_layout {b_layout!r}")
        self.lt = lt if lt is not None else bindings()
        self.compute = compute or COMPUTE_OF[precision]
        self.M, self.N, self.K = M, N, K
        self.workspace, self.workspace_bytes = int(workspace), int(workspace_bytes)
        self.precision = precision
        self._results = None
        self._recreated: list = []        # the algo structs of recreate()
        self.handle = self.desc = self.pref = None
        self.layouts: list = []
        try:
            self._build(precision, b_layout)
        except BaseException:
            self.close()
            raise

    def _set(self, setter, dtype_of, obj, attr, value) -> None:
        buf = np.array([value], dtype=dtype_of(attr))
        setter(obj, int(attr), buf.ctypes.data, buf.itemsize)

    def _build(self, precision: str, b_layout: str) -> None:
        lt, M, N, K = self.lt, self.M, self.N, self.K
        t_in = CUDA_R_16BF if precision == "bf16" else CUDA_R_32F
        self.handle = lt.create()
        self.desc = lt.matmul_desc_create(COMPUTE_IDS[self.compute], CUDA_R_32F)
        trans_a = OP_N if b_layout == "kn" else OP_T
        for attr, value in ((lt.MatmulDescAttribute.TRANSA, trans_a),
                            (lt.MatmulDescAttribute.TRANSB, OP_N)):
            self._set(lt.matmul_desc_set_attribute, lt.get_matmul_desc_attribute_dtype,
                      self.desc, attr, value)
        # Lt's A: our B as stored; Lt's B: our A (K x M, ld K); C = D: N x M, ld N
        a_rows, a_cols = (N, K) if b_layout == "kn" else (K, N)
        for spec in ((t_in, a_rows, a_cols, a_rows), (t_in, K, M, K), (CUDA_R_32F, N, M, N)):
            self.layouts.append(lt.matrix_layout_create(*spec))
        self.pref = lt.matmul_preference_create()
        self._set(lt.matmul_preference_set_attribute, lt.get_matmul_preference_attribute_dtype,
                  self.pref, lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                  self.workspace_bytes)

    def candidates(self, n: int) -> list[Candidate]:
        """Up to n heuristic answers, best first (those the heuristic marks failed are left
        out). The error of the heuristic call itself (e.g. NOT_SUPPORTED) is raised."""
        lt = self.lt
        dtype = np.dtype(lt.matmul_heuristic_result_dtype)
        res = np.zeros(max(int(n), 1), dtype=dtype)
        count = np.zeros(1, dtype=np.int32)
        la, lb, lc = self.layouts
        lt.matmul_algo_get_heuristic(self.handle, self.desc, la, lb, lc, lc, self.pref,
                                     int(n), res.ctypes.data, count.ctypes.data)
        self._results = res                 # the algo structs the launchers point into
        algo_offset = dtype.fields["algo"][1]
        out = []
        for i in range(min(int(count[0]), len(res))):
            if int(res[i]["state"]) != 0:   # CUBLAS_STATUS_SUCCESS
                continue
            ptr = res.ctypes.data + i * dtype.itemsize + algo_offset
            out.append(Candidate(rank=i, algo=self.config_of(ptr),
                                 workspace_bytes=int(res[i]["workspace_size"]),
                                 waves=float(res[i]["waves_count"]), ptr=ptr))
        return out

    def config_of(self, algo_ptr: int) -> dict:
        """The algo's configuration attributes by CONFIG_ATTRS' keys (None where unreadable);
        tile, stages and cluster shape as their names where the bindings' enums know them."""
        lt = self.lt
        out = {}
        written = np.zeros(1, dtype=np.uint64)
        for member, key in CONFIG_ATTRS:
            try:
                attr = getattr(lt.MatmulAlgoConfigAttribute, member)
                buf = np.zeros(1, dtype=lt.get_matmul_algo_config_attribute_dtype(attr))
                lt.matmul_algo_config_get_attribute(algo_ptr, int(attr), buf.ctypes.data,
                                                    buf.itemsize, written.ctypes.data)
                value = int(buf[0])
            except Exception:
                out[key] = None
                continue
            out[key] = value
            if key in ENUM_NAMES:
                enum_name, prefix = ENUM_NAMES[key]
                try:
                    out[key] = getattr(lt, enum_name)(value).name.removeprefix(prefix)
                except Exception:
                    pass
        return out

    def recreate(self, algo: dict) -> Candidate:
        """The algorithm `algo` (CONFIG_ATTRS' keys, enums by name or id) built anew for this
        problem: cublasLtMatmulAlgoInit, each attribute set, cublasLtMatmulAlgoCheck; then read
        back. RecreateError where a value is unknown, the check refuses it, it needs more
        workspace than this problem has, or an attribute reads back different."""
        lt = self.lt
        dtype = np.dtype(lt.matmul_heuristic_result_dtype)
        res = np.zeros(2, dtype=dtype)          # [0]: the algo's storage, [1]: the check's
        ptr = res.ctypes.data + dtype.fields["algo"][1]
        t_in = CUDA_R_16BF if self.precision == "bf16" else CUDA_R_32F
        try:
            lt.matmul_algo_init(self.handle, COMPUTE_IDS[self.compute], CUDA_R_32F, t_in, t_in,
                                CUDA_R_32F, CUDA_R_32F, int(algo["id"]), ptr)
            for member, key in CONFIG_ATTRS[1:]:
                if algo.get(key) is None:
                    continue
                attr = getattr(lt.MatmulAlgoConfigAttribute, member)
                self._set(lt.matmul_algo_config_set_attribute,
                          lt.get_matmul_algo_config_attribute_dtype, ptr, attr,
                          self._enum_id(key, algo[key]))
            la, lb, lc = self.layouts
            lt.matmul_algo_check(self.handle, self.desc, la, lb, lc, lc, ptr,
                                 res.ctypes.data + dtype.itemsize)
        except RecreateError:
            raise
        except Exception as exc:
            raise RecreateError(f"cuBLASLt refused it ({type(exc).__name__}: {exc})") from None
        needs = int(res[1]["workspace_size"])
        if needs > self.workspace_bytes:
            raise RecreateError(f"it needs {needs} bytes of workspace, {self.workspace_bytes} "
                                f"given")
        got = self.config_of(ptr)
        differ = [k for k, v in algo.items() if v is not None and got.get(k) != v]
        if differ:
            raise RecreateError("it reads back different: " + ", ".join(
                f"{k} {got.get(k)!r} for {algo[k]!r}" for k in differ))
        self._recreated.append(res)
        return Candidate(rank=-1, algo=got, workspace_bytes=needs, ptr=ptr)

    def _enum_id(self, key: str, value) -> int:
        if isinstance(value, int) or key not in ENUM_NAMES:
            return int(value)
        enum_name, prefix = ENUM_NAMES[key]
        try:
            return int(getattr(self.lt, enum_name)[prefix + str(value)])
        except Exception:
            raise RecreateError(f"these bindings know no {enum_name} {value!r}") from None

    def launcher(self, cand: Candidate, alpha: float = 1.0, beta: float = 0.0):
        """launch(a, b, out, stream=None) like gemm.cuda.cublas's: C = alpha A @ B + beta C
        into `out`."""
        lt, h, desc = self.lt, self.handle, self.desc
        la, lb, lc = self.layouts
        scal = np.array([alpha, beta], dtype=np.float32)   # host pointers, kept by the closure
        pa = scal.ctypes.data
        pb = pa + scal.itemsize
        ws, ws_bytes, algo = self.workspace, self.workspace_bytes, cand.ptr

        def launch(a, b, out, stream=None, _keep=(scal, self._results, self._recreated)):
            s = 0 if stream is None else int(stream.handle)
            lt.matmul(h, desc, pa, int(b), la, int(a), lb, pb, int(out), lc, int(out), lc,
                      algo, ws, ws_bytes, s)
        return launch

    def version(self) -> int | None:
        try:
            return int(self.lt.get_version())
        except Exception:
            return None

    def close(self) -> None:
        """Destroy the descriptors and the handle (each once; errors ignored: a lost context
        must not hide the error that brought us here)."""
        lt = self.lt
        for fn, obj in ([(lt.matrix_layout_destroy, x) for x in self.layouts]
                        + [(lt.matmul_preference_destroy, self.pref),
                           (lt.matmul_desc_destroy, self.desc), (lt.destroy, self.handle)]):
            if obj is not None:
                try:
                    fn(obj)
                except Exception:
                    pass
        self.layouts, self.pref, self.desc, self.handle = [], None, None, None
