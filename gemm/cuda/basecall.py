"""A cuBLAS configuration as the suite's baseline (the % of cuBLAS denominator): today's call
(gemm.cuda.cublas), or, where this GPU model's committed choice file (gemm.core.ltchoice)
names a cuBLASLt algorithm for the problem, exactly that algorithm, re-created in this
process (gemm.cuda.cublaslt.LtMatmul.recreate) with the file's workspace.

Where the algorithm cannot be re-created (unknown to these bindings, refused by
cublasLtMatmulAlgoCheck, reads back different, needs more workspace) or fails the
correctness check (the worker calls `fall_back`), the problem runs today's call instead, and
`describe` says which algorithm ran and why: never silently. The record keeps that as
`baseline_call` (BaselineCall.as_dict).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from ..core.ltchoice import Call, Choice, ChoiceFile, for_gpu
from ..core.precision import format_of_baseline
from ..core.problem import Problem


@dataclass(frozen=True)
class BaselineCall:
    """Which call a baseline ran for one problem: `call` TODAY or CUBLASLT; the algorithm
    (its label and attributes as read back), its workspace; `fallback`: why the choice file's
    algorithm did not run, where it did not."""
    config: str
    call: Call
    choice_file: str | None = None
    algo: dict | None = None
    label: str | None = None
    workspace_bytes: int = 0
    fallback: str | None = None

    def as_dict(self) -> dict:
        return {"config": self.config, "call": self.call.value,
                "choice_file": self.choice_file, "algo": self.algo, "label": self.label,
                "workspace_bytes": self.workspace_bytes, "fallback": self.fallback}

    def line(self) -> str:
        if self.call is Call.CUBLASLT:
            return f"{self.config}: cuBLASLt {self.label}"
        why = f" (fallback: {self.fallback})" if self.fallback else ""
        return f"{self.config}: today's call{why}"


@dataclass
class _Problem:
    """What one problem resolved to: the choice, and the LtMatmul and its re-created
    algorithm where it runs."""
    choice: Choice | None
    lt: object = None
    cand: object = None
    fallback: str | None = None


class Baseline:
    """launcher(prob), describe(prob), fall_back(prob, reason), close(). `blas`: today's
    call (a gemm.cuda.cublas.Cublas); `choices`: the choice file (None: today's call
    everywhere); `open_lt(fmt, prob, choice, workspace)` an LtMatmul; `alloc(n)` device
    memory. Tests hand in fakes for all four."""

    def __init__(self, config: str, blas, choices: ChoiceFile | None, open_lt, alloc,
                 warn=None) -> None:
        self.config, self.blas, self.choices = config, blas, choices
        self.fmt = format_of_baseline(config)
        self._open_lt, self._alloc = open_lt, alloc
        self._warn = warn or (lambda s: print(s, file=sys.stderr, flush=True))
        self._problems: dict = {}
        self._workspace = None

    def _resolve(self, prob: Problem) -> _Problem:
        key = (prob.M, prob.N, prob.K)
        if key in self._problems:
            return self._problems[key]
        choice = self.choices.lookup(self.config, *key) if self.choices else None
        st = _Problem(choice)
        self._problems[key] = st
        if choice is None or choice.call is not Call.CUBLASLT:
            return st
        try:
            if self._workspace is None or self._workspace[1] < choice.workspace_bytes:
                self._workspace = (self._alloc(max(choice.workspace_bytes, 256)),
                                   choice.workspace_bytes)
            st.lt = self._open_lt(self.fmt, prob, choice, int(self._workspace[0]))
            st.cand = st.lt.recreate(choice.algo.as_dict())
        except Exception as exc:
            self._drop(st, f"the algorithm could not be re-created here: {exc}", prob)
        return st

    def _drop(self, st: _Problem, reason: str, prob: Problem) -> None:
        if st.lt is not None:
            try:
                st.lt.close()
            except Exception:
                pass
        st.lt = st.cand = None
        st.fallback = reason
        self._warn(f"baseline: {self.config} {prob.label}: {self.choices.path or 'the choice'}"
                   f"'s {st.choice.algo.label()} is not used ({reason}); today's call runs")

    def launcher(self, prob: Problem):
        st = self._resolve(prob)
        if st.cand is not None:
            return st.lt.launcher(st.cand, prob.alpha, prob.beta)
        return self.blas.launcher(prob)

    def chosen(self, prob: Problem) -> bool:
        """Whether the chosen cuBLASLt algorithm runs for this problem."""
        return self._resolve(prob).cand is not None

    def fall_back(self, prob: Problem, reason: str) -> bool:
        """Today's call from now on for this problem (e.g. the algorithm failed the
        correctness check); False where today's call already ran."""
        st = self._resolve(prob)
        if st.cand is None:
            return False
        self._drop(st, reason, prob)
        return True

    def describe(self, prob: Problem) -> BaselineCall:
        st = self._resolve(prob)
        path = self.choices.path if self.choices else None
        if st.cand is not None:
            algo = st.choice.algo
            return BaselineCall(self.config, Call.CUBLASLT, path, dict(st.cand.algo),
                                algo.label(), st.choice.workspace_bytes)
        return BaselineCall(self.config, Call.TODAY, path if st.choice else None,
                            fallback=st.fallback)

    def close(self) -> None:
        for st in self._problems.values():
            if st.lt is not None:
                try:
                    st.lt.close()
                except Exception:
                    pass
        self._problems.clear()
        if self._workspace is not None:
            self._workspace[0].free()
            self._workspace = None
        self.blas.close()


def open_baseline(config: str, stream=None) -> Baseline:
    """The configuration's baseline on this GPU (its model's choice file, if committed)."""
    from . import cublaslt, device
    from .cublas import Cublas
    drv = device.cuda()
    choices = for_gpu(device.info().slug)
    blas = Cublas(config, stream=stream)

    def open_lt(fmt, prob, choice, workspace):
        return cublaslt.LtMatmul(fmt.precision, fmt.b_layout, prob.M, prob.N, prob.K,
                                 workspace, choice.workspace_bytes, compute=choice.compute)
    return Baseline(config, blas, choices, open_lt, drv.mem_alloc)
