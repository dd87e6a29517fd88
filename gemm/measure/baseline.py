"""`gemm baseline`'s measurement: today's cuBLAS call against cublasLt's heuristic candidates
for the same problem (gemm.cuda.cublaslt), checked and timed interleaved on one GPU.

Per configuration x size: operands as the suite times them (gemm.measure.check.Operands from
the policy's fixed timing seed, alpha = 1, beta = 0); cublasLt asked for up to n algorithms
with the workspace (for cublas_fp32, COMPUTE_32F_PEDANTIC first, then COMPUTE_32F where that
gives none; either way the check below holds the result to FP32's tolerance); today's call
and every candidate checked once against the float64 reference (gemm.measure.check: the
suite's one correctness path and tolerance); then today's call and the candidates that
passed timed by gemm.measure.timer.Timer under `policy(rounds)`: a short warm-up each, then
`rounds` rounds, each one CUDA-event-timed batch of about 4 ms per function, in turn.

A candidate's `ratio` is the median over rounds of its time / today's time in the same round
(neighbours in time, as % of cuBLAS pairs them); `verdict` is "faster" when it was faster in
every round (the whole spread of the paired ratios under 1), "slower" when slower in every
round, "same" otherwise; "wrong" (failed the check), "error" (the launch raised) and
"throttled" (every sample dropped by the floor) are never faster. `best` is the faster candidate
with the lowest ratio, or None. Nothing here changes the suite's baseline.

The document (schema gemm.baseline/1; `gemm baseline --json` writes it):
  {"schema", "date", "wall_s", "machine": {"gpu", "identity", "driver", "cuda", "arch",
   "sms", "max_sm_clock_mhz", "cublas", "cublaslt", "nvmath"},
   "settings": {"algos", "rounds", "workspace_bytes", "policy"},
   "results": [{"config", "size", "M", "N", "K", "flops", "today_call", "lt_compute",
     "heuristic_notes", "today": TIMING + {"ok", "check"}, "candidates": [{"rank", "label",
     "algo": {"id", "tile", "stages", "splitk", "reduction", "swizzle", "custom",
     "inner_shape", "cluster"}, "workspace_bytes", "waves", "ok", "check", "error"}
     + TIMING + {"ratio", "ratio_min", "ratio_max", "verdict"}], "best", "error", "wall_s"}],
   "aborted"}
  TIMING = {"ms" (median per launch), "spread" (robust sigma / median of the rounds),
    "tflops", "samples_ms", "batch", "graph", "throttled"}; "check" is the Verdict's dict.
"""
from __future__ import annotations

import time
from dataclasses import replace

from ..core import stats
from ..core.policy import SUITE, Measurement, Policy
from ..core.precision import format_of_baseline
from ..core.problem import Problem

SCHEMA = "gemm.baseline/1"
DEFAULT_CONFIGS = ("cublas_fp32", "cublas_tf32", "cublas_bf16_nk")
DEFAULT_SIZES = ("2048", "4096", "8192")
TODAY_CALL = {"fp32": "cublasSgemm, PEDANTIC math", "tf32": "cublasGemmEx, COMPUTE_32F_FAST_TF32",
              "bf16": "cublasGemmEx, BF16 in, FP32 out, COMPUTE_32F"}
VERDICTS = ("faster", "same", "slower", "wrong", "error", "throttled")


def policy(rounds: int = 5) -> Policy:
    """The suite's timer settings, shortened: 10 ms warm-up, batches of about 4 ms, exactly
    `rounds` kept samples per function (stopped at 1 s of GPU time with 3)."""
    return replace(SUITE, warmup_s=0.01, sample_s=0.004, min_samples=rounds,
                   max_samples=rounds, min_time_s=0.0, max_time_s=1.0,
                   min_samples_capped=min(3, rounds))


def today_call(config: str) -> str:
    fmt = format_of_baseline(config)
    return TODAY_CALL[fmt.precision] + (", B stored N x K" if fmt.b_layout == "nk" else "")


def timing(m: Measurement | None, flops: int) -> dict:
    """TIMING of the module's docstring from one function's Measurement."""
    if m is None or not m.samples_s:
        return {"ms": None, "spread": None, "tflops": None,
                "samples_ms": [], "batch": getattr(m, "batch", None),
                "graph": getattr(m, "graph", None), "throttled": getattr(m, "throttled", 0)}
    return {"ms": 1e3 * m.median_s, "spread": m.spread, "tflops": m.tflops(flops),
            "samples_ms": [1e3 * s for s in m.samples_s], "batch": m.batch, "graph": m.graph,
            "throttled": m.throttled}


def summarize(entry: dict, measured: dict) -> dict:
    """Fill `entry`'s timings, ratios, verdicts and best from the Timer's Measurements
    ("today" and "#<rank>" for the candidates that were timed)."""
    flops = entry["flops"]
    today = measured.get("today")
    entry["today"].update(timing(today, flops))
    base = today.samples_s if today is not None else []
    for row in entry["candidates"]:
        m = measured.get(f"#{row['rank']}")
        row.update(timing(m, flops), ratio=None, ratio_min=None, ratio_max=None)
        if row.get("error"):
            row["verdict"] = "error"
            continue
        if not row.get("ok"):
            row["verdict"] = "wrong"
            continue
        n = min(len(base), len(m.samples_s) if m is not None else 0)
        if n == 0:
            row["verdict"] = "throttled"
            continue
        ratios = [c / b for c, b in zip(m.samples_s[:n], base[:n])]
        row.update(ratio=stats.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios))
        row["verdict"] = ("faster" if row["ratio_max"] < 1 else
                          "slower" if row["ratio_min"] > 1 else "same")
    faster = [r for r in entry["candidates"] if r["verdict"] == "faster"]
    entry["best"] = min(faster, key=lambda r: r["ratio"])["rank"] if faster else None
    return entry


def new_entry(config: str, prob: Problem) -> dict:
    return {"config": config, "size": prob.label, "M": prob.M, "N": prob.N, "K": prob.K,
            "flops": prob.flops, "today_call": today_call(config), "lt_compute": None,
            "heuristic_notes": [], "today": {"ok": None, "check": None}, "candidates": [],
            "best": None, "error": None, "wall_s": None}


def ask(open_lt, fmt, prob: Problem, n: int, entry: dict):
    """(the LtMatmul whose candidates these are, or None; its candidates). For fp32,
    COMPUTE_32F where PEDANTIC gives none; what failed goes to entry["heuristic_notes"]."""
    from ..cuda.cublaslt import COMPUTE_OF
    computes = [COMPUTE_OF[fmt.precision]] + (["COMPUTE_32F"] if fmt.precision == "fp32" else [])
    for compute in computes:
        lt = open_lt(fmt, prob, compute)
        try:
            cands = lt.candidates(n)
        except Exception as exc:
            cands = []
            entry["heuristic_notes"].append(f"{compute}: {type(exc).__name__}: {exc}")
        else:
            if not cands:
                entry["heuristic_notes"].append(f"{compute}: no candidates")
        if cands:
            entry["lt_compute"] = compute
            return lt, cands
        lt.close()
    return None, []


def compare_problem(config: str, prob: Problem, *, today, checker, open_lt, make_timer,
                    n_algos: int = 8, stream=None, seed: int = SUITE.timing_seed) -> dict:
    """One configuration x size (the module's docstring); never raises for a failure of its
    own: it goes to entry["error"]. `today(prob)` is today's launch; `open_lt(fmt, prob,
    compute)` an LtMatmul; `make_timer()` a gemm.measure.timer.Timer."""
    t0 = time.perf_counter()
    entry = new_entry(config, prob)
    fmt = format_of_baseline(config)
    ops = lt = None
    try:
        ops = checker.operands(prob, seed=seed, fmt=fmt)
        lt, cands = ask(open_lt, fmt, prob, n_algos, entry)
        launches = {"today": today(prob)}
        ref = checker.reference(ops, prob)
        try:
            v = checker.check(launches["today"], ops, prob, fmt.precision, ref)
            entry["today"].update(ok=v.ok, check=v.as_dict())
            for c in cands:
                row = {"rank": c.rank, "label": c.label(), **c.as_dict(), "ok": False,
                       "check": None, "error": None}
                entry["candidates"].append(row)
                try:
                    launch = lt.launcher(c)
                    v = checker.check(launch, ops, prob, fmt.precision, ref)
                except Exception as exc:   # e.g. the launch refused: reported, not timed
                    row["error"] = f"{type(exc).__name__}: {exc}"
                    continue
                row.update(ok=bool(v.ok), check=v.as_dict())
                if v.ok:
                    launches[f"#{c.rank}"] = launch
        finally:
            for buf in ref:
                buf.free()
        timer = make_timer()
        try:
            measured = timer.measure({k: (lambda f=f: f(ops.a, ops.b, ops.out, stream))
                                      for k, f in launches.items()})
        finally:
            timer.close()
        summarize(entry, measured)
    except Exception as exc:
        entry["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        for obj in (lt, ops):
            if obj is not None:
                try:
                    obj.close() if obj is lt else obj.free()
                except Exception:
                    pass
        entry["wall_s"] = time.perf_counter() - t0
    return entry


def machine(info, clocks, cublas_version, lt_version) -> dict:
    from importlib.metadata import version
    try:
        nvmath = version("nvmath-python")
    except Exception:
        nvmath = None
    return {"gpu": info.name, "identity": clocks.identity(), "driver": info.driver,
            "cuda": info.cuda, "arch": info.arch, "sms": info.sms,
            "max_sm_clock_mhz": info.max_sm_clock_mhz, "cublas": cublas_version,
            "cublaslt": lt_version, "nvmath": nvmath}


def run(configs, problems, n_algos: int = 8, rounds: int = 5, workspace_bytes: int = 32 << 20,
        budget_s: float = 300.0, log=None) -> dict:
    """Every configuration x problem on this GPU, in-process; the document. Problems left when
    `budget_s` has passed are recorded as skipped; a lost CUDA context ends the run
    (doc["aborted"] says where)."""
    from ..cuda import cublaslt, device
    from ..cuda.cublas import Cublas
    from .check import Checker
    from .timer import Timer
    t0 = time.monotonic()
    drv = device.cuda()
    info = device.info()
    lt_mod = cublaslt.bindings()
    stream = drv.Stream()
    clocks = device.Clocks()
    pol = policy(rounds)
    doc = {"schema": SCHEMA, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": None, "settings": {"algos": n_algos, "rounds": rounds,
                                         "workspace_bytes": workspace_bytes,
                                         "policy": pol.as_dict()},
           "results": [], "aborted": None, "wall_s": None}
    ws = drv.mem_alloc(max(workspace_bytes, 256))
    checker = Checker(stream)
    blas_version = None

    def open_lt(fmt, prob, compute):
        return cublaslt.LtMatmul(fmt.precision, fmt.b_layout, prob.M, prob.N, prob.K, int(ws),
                                 workspace_bytes, compute=compute, lt=lt_mod)

    def make_timer():
        return Timer(pol, stream, clocks, info.max_sm_clock_mhz, info.l2_bytes)

    try:
        for config in configs:
            blas = Cublas(config, stream=stream)
            try:
                blas_version = blas_version or blas.version()
                for prob in problems:
                    if time.monotonic() - t0 > budget_s:
                        entry = new_entry(config, prob)
                        entry["error"] = f"skipped: the run passed its budget of {budget_s:g} s"
                    else:
                        entry = compare_problem(config, prob, today=blas.launcher,
                                                checker=checker, open_lt=open_lt,
                                                make_timer=make_timer, n_algos=n_algos,
                                                stream=stream, seed=pol.timing_seed)
                    doc["results"].append(entry)
                    if log:
                        log(progress_line(entry))
                    if entry["error"] and not entry["error"].startswith("skipped"):
                        try:
                            drv.Context.synchronize()
                        except Exception as exc:
                            doc["aborted"] = (f"the CUDA context was lost at {config} "
                                              f"{prob.label}: {type(exc).__name__}: {exc}")
                            return doc
            finally:
                if doc["aborted"] is None:
                    blas.close()
    finally:
        lt_version = None
        try:
            lt_version = int(lt_mod.get_version())
        except Exception:
            pass
        doc["machine"] = machine(info, clocks, blas_version, lt_version)
        if doc["aborted"] is None:
            checker.close()
            ws.free()
        doc["wall_s"] = time.monotonic() - t0
    return doc


def progress_line(entry: dict) -> str:
    what = f"{entry['config']} {entry['size']}: "
    if entry["error"]:
        return what + entry["error"]
    today = entry["today"]
    cands = entry["candidates"]
    n_ok = sum(1 for c in cands if c.get("ok"))
    best = next((c for c in cands if c["rank"] == entry["best"]), None)
    return what + (f"today {_ms(today.get('ms'))} ms, {len(cands)} candidates ({n_ok} correct)"
                   + (f", best #{best['rank']} x{best['ratio']:.3f}" if best else
                      ", none faster in every round"))


def _ms(x) -> str:
    return "-" if x is None else f"{x:.4f}"
