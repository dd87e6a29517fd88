"""Autotuning as data: a kernel's search space (its registry entry's `tune`), the tuning
buckets, and the tuned tables, kernels/tuned/<gpu>.toml, which `gemm tune` writes and the
launcher reads.

A kernel whose entry says `tuned = true` runs, on a GPU that has a table, with the constants
that won for the problem's tuning bucket; elsewhere with its registry defaults. A tuning bucket
goes by the output size M * N and is tuned at one square size; its names (small, medium,
large) are the tables' keys. It is not the gate's size class (gemm.core.problem.SizeClass, by
the work M * N * K): 3001x2999x3003 is tuned as medium and judged as large.
"""
from __future__ import annotations

import itertools
import json
import tomllib
from functools import lru_cache
from pathlib import Path

from .problem import Problem
from .registry import KernelSpec, kernels_dir

# (name: the tables' key, smallest M * N, the size it is tuned at)
TUNING_BUCKETS = (("small", 0, "1024"), ("medium", 1536 * 1536, "2048"),
                  ("large", 3072 * 3072, "4096"))


def tuning_bucket(prob: Problem) -> str:
    """The bucket whose tuned constants `prob` runs with (the tables' key), by M * N."""
    work = prob.M * prob.N
    return [name for name, lo, _ in TUNING_BUCKETS if work >= lo][-1]


def candidates(spec: KernelSpec) -> list[dict]:
    """Every combination of the search space that makes a valid spec (block, tile)."""
    keys = sorted(spec.tune)
    out = []
    for values in itertools.product(*(spec.tune[k] for k in keys)):
        cand = dict(zip(keys, values))
        try:
            spec.with_defines(**cand)
        except (ValueError, ZeroDivisionError):
            continue
        out.append(cand)
    return out


def keep_fixed(spec: KernelSpec, before: dict, winners: dict) -> dict:
    """The search's winners per bucket, each with the constants of that bucket's entry before
    that lie outside the search space: those were set by hand on evidence the search does not
    see (18's STREAM_K in the large bucket: stream-K runs at 8192, the search times 4096). The
    search timed and checked its winners without them (the correctness gate checks the result
    at every tracked size); a combination the kernel's entry rejects raises ValueError."""
    out = {}
    for bucket, won in winners.items():
        fixed = {k: v for k, v in before.get(bucket, {}).get("defines", {}).items()
                 if k not in spec.tune}
        out[bucket] = {**won, "defines": {**won["defines"], **fixed}}
        spec.with_defines(**out[bucket]["defines"])
    return out


def tuned_dir() -> Path:
    return kernels_dir() / "tuned"


@lru_cache(maxsize=8)
def table(gpu: str) -> dict:
    """{kernel: {tuning bucket: {"defines": {...}, ...}}} for one GPU model ({} if none)."""
    path = tuned_dir() / f"{gpu}.toml"
    if not path.is_file():
        return {}
    with open(path, "rb") as f:
        return tomllib.load(f)


def resolve(spec: KernelSpec, prob: Problem, gpu: str) -> KernelSpec:
    """The spec to run `prob` with on GPU model `gpu` (a machine slug such as h200)."""
    if not spec.tuned:
        return spec
    won = table(gpu).get(spec.name, {}).get(tuning_bucket(prob))
    return spec.with_defines(**won["defines"]) if won else spec


def _toml_value(v) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


def render_table(gpu: str, tables: dict, note: str) -> str:
    """TOML for kernels/tuned/<gpu>.toml: one table per kernel and tuning bucket."""
    lines = [f"# Tuned constants for {gpu}: written by `gemm tune`, read by the launcher for",
             "# kernels whose registry entry says tuned = true. " + note, ""]
    for kernel, buckets in sorted(tables.items()):
        for bucket, won in buckets.items():
            lines.append(f"[{json.dumps(kernel)}.{bucket}]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in won.items()]
            lines.append("")
    return "\n".join(lines)
