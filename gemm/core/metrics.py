"""Every metric the suite records: key, label, unit, direction and formula, in one place.

A timed record holds per-sample seconds per launch for the kernel and for its cuBLAS baseline,
sampled in turn (neighbouring samples are close in time). Each metric turns those into samples
of its own; its value is the median of those samples, which is what asv records and what the
tables, the gate and the A/B compare. % of cuBLAS is paired: 100 * baseline[i] / kernel[i],
the ratio of neighbouring samples, so a drift that hits both cancels.

The asv names of the series and the benchmark versions are made here too. A version is a
fingerprint of the measuring policy and of the metric's definition, so a change in how we
measure starts new series by construction instead of reading as a step in the old ones.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Callable, NamedTuple

from . import stats


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    gated: bool                 # judged by `gemm regress` (asv judges only lower-is-better)
    formula: str                # the definition, in words; part of the version fingerprint
    fn: Callable                # (kernel seconds, baseline seconds, flops) -> samples

    def samples(self, kernel_s, baseline_s, flops: int) -> list[float]:
        return self.fn(list(kernel_s or []), list(baseline_s or []), flops)

    def definition(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "fn"}


def _paired(k, b):
    n = min(len(k), len(b))
    return k[:n], b[:n]


TFLOPS = Metric("tflops", "TFLOPS", "TFLOPS", True, True,
                "flops / kernel seconds / 1e12, per sample",
                lambda k, b, f: [f / t / 1e12 for t in k])
PCT_OF_CUBLAS = Metric("pct_of_cublas", "% of cuBLAS", "% of cuBLAS", True, True,
                       "100 * baseline seconds[i] / kernel seconds[i], neighbouring samples",
                       lambda k, b, f: [100.0 * y / x for x, y in zip(*_paired(k, b))])
SECONDS = Metric("seconds", "seconds", "seconds", False, False,
                 "kernel seconds per launch, per sample", lambda k, b, f: list(k))
TIME_RATIO = Metric("time_ratio", "time ratio", "kernel time / cuBLAS time", False, False,
                    "kernel seconds[i] / baseline seconds[i], neighbouring samples",
                    lambda k, b, f: [x / y for x, y in zip(*_paired(k, b))])

KERNEL_METRICS = (TFLOPS, PCT_OF_CUBLAS, SECONDS, TIME_RATIO)
# cuBLAS's own series: the same formulas applied to the baseline's samples
BASELINE_METRICS = (TFLOPS, SECONDS)
BY_KEY = {m.key: m for m in KERNEL_METRICS}
GATED = tuple(m for m in KERNEL_METRICS if m.gated)


def get(key: str) -> Metric:
    try:
        return BY_KEY[key]
    except KeyError:
        raise ValueError(f"unknown metric {key!r}; known: {', '.join(BY_KEY)}") from None


def by_label(label: str) -> Metric | None:
    return next((m for m in KERNEL_METRICS if m.label == label), None)


# --- values of one sweep record --------------------------------------------------------

def timed(rec: dict) -> bool:
    return (rec.get("status") == "ok" and bool((rec.get("kernel_time") or {}).get("samples_s"))
            and bool((rec.get("baseline_time") or {}).get("samples_s")))


def record_samples(rec: dict, key: str) -> list[float]:
    return get(key).samples(rec["kernel_time"]["samples_s"], rec["baseline_time"]["samples_s"],
                            rec["flops"])


def values(rec: dict) -> dict[str, float | None]:
    """{metric key: value} for one record; None everywhere if it was not timed."""
    if not timed(rec):
        return {m.key: None for m in KERNEL_METRICS}
    return {m.key: stats.median(record_samples(rec, m.key)) for m in KERNEL_METRICS}


def baseline_values(rec: dict) -> dict[str, float | None]:
    b = (rec.get("baseline_time") or {}).get("samples_s")
    if not b:
        return {m.key: None for m in BASELINE_METRICS}
    return {m.key: stats.median(m.samples(b, b, rec["flops"])) for m in BASELINE_METRICS}


def spread(samples_s) -> float | None:
    return stats.rel_spread(samples_s) if samples_s else None


# --- asv names and versions -------------------------------------------------------------

SUITE_MODULE = "bench_gemm"
KERNEL_CLASS_PREFIX = "Kernel_"
BASELINE_CLASS = "Cublas"


class Series(NamedTuple):
    target: str     # kernel name, or the cuBLAS configuration for baseline series
    size: str
    metric: str     # metric key
    baseline: bool = False


def kernel_class(kernel: str) -> str:
    return KERNEL_CLASS_PREFIX + kernel


def asv_name(cls: str, metric: Metric) -> str:
    return f"{SUITE_MODULE}.{cls}.track_{metric.key}"


def parse_asv(name: str, params: tuple) -> Series | None:
    """The series an asv benchmark name and its parameter values stand for (None: not ours)."""
    parts = name.split(".")
    if len(parts) != 3 or parts[0] != SUITE_MODULE or not parts[2].startswith("track_"):
        return None
    key = parts[2][len("track_"):]
    if key not in BY_KEY:
        return None
    if parts[1].startswith(KERNEL_CLASS_PREFIX) and len(params) == 1:
        return Series(parts[1][len(KERNEL_CLASS_PREFIX):], str(params[0]), key)
    if parts[1] == BASELINE_CLASS and len(params) == 2:
        return Series(str(params[0]), str(params[1]), key, baseline=True)
    return None


# the kernel metrics whose value moves with the baseline's algorithm
BASELINE_DEPENDENT = frozenset({PCT_OF_CUBLAS.key, TIME_RATIO.key})


def version(metric: Metric, policy, baseline: bool = False,
            baseline_call: str | None = None) -> str:
    """The asv benchmark version of a series: a fingerprint of how it is measured.
    `baseline_call`: the fingerprint of the kernel's baseline where a choice file replaces
    today's cuBLAS call (gemm.core.ltchoice.fingerprint); it enters the versions of
    BASELINE_DEPENDENT metrics only, and None leaves every version as it was."""
    what = {"policy": policy.as_dict(), "metric": metric.definition(),
            "series": "baseline measured alone" if baseline else "kernel, baseline interleaved"}
    if baseline_call is not None and not baseline and metric.key in BASELINE_DEPENDENT:
        what["baseline_call"] = baseline_call
    blob = json.dumps(what, sort_keys=True)
    return f"{metric.key}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"
