"""One kernel's share of a sweep, in its own process: `python -m gemm.worker < job.json`.

A kernel that crashes poisons its CUDA context; running each kernel in a separate process
keeps that from taking the rest of the sweep with it (gemm.sweep restarts the worker for
the problems left). Each finished problem is printed at once as one line
`@@RESULT {json}`, so nothing measured is lost if a later one crashes.
"""
from __future__ import annotations

import json
import sys
import traceback

from .problem import Problem

TAG = "@@RESULT "
INFO_TAG = "@@INFO "

EXIT_CONTEXT_LOST = 3
TIMING_SEED = 20261130


def emit(tag: str, obj: dict) -> None:
    sys.stdout.write(tag + json.dumps(obj) + "\n")
    sys.stdout.flush()


def _context_lost(exc: Exception) -> bool:
    """After these errors the CUDA context is unusable and the process must end."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(s in text for s in ("illegal", "launch failed", "misaligned", "unspecified",
                                   "launcherror", "launch timeout", "hardware stack"))


def run_job(job: dict) -> int:
    from . import device, registry
    from .baseline import Cublas
    from .data import NAN_BITS
    from .gpucheck import GpuChecker, fresh_seed
    from .launch import launcher
    from .loader import CompileError
    from .timing import Policy, Timer

    drv = device.cuda()
    info = device.info()
    emit(INFO_TAG, {"device": info.__dict__ | {"arch": info.arch, "slug": info.slug}})
    spec = registry.get(job["kernel"])
    if job.get("defines"):
        spec = spec.with_defines(**job["defines"])
    policy = Policy(**job.get("policy", {}))
    ab_pairs = job.get("ab", [[1.0, 0.0]])
    stream = drv.Stream()
    clocks = device.Clocks()

    compile_error = None
    try:
        from .loader import load
        load(spec)
    except CompileError as exc:
        compile_error = str(exc)

    blas = Cublas(spec.baseline, stream=stream)
    checker = GpuChecker(stream)
    for pd in job["problems"]:
        prob = Problem(pd["M"], pd["N"], pd["K"])
        rec = {"kernel": spec.name, "size": prob.label, "M": prob.M, "N": prob.N, "K": prob.K,
               "flops": prob.flops, "baseline": spec.baseline, "precision": spec.precision,
               "defines": spec.defines, "status": "ok", "error": None, "checks": []}
        if compile_error:
            rec.update(status="compile_error", error=compile_error)
            emit(TAG, rec)
            continue
        bufs = []
        try:
            # correctness: fresh random operands on the device (the seed is recorded), the
            # output poisoned with NaN when beta == 0, every element checked on the GPU
            seed = fresh_seed()
            rec["seed"] = seed
            a = checker.random_matrix(prob.M, prob.K, seed)
            b = checker.random_matrix(prob.K, prob.N, seed + 1)
            c = checker.random_matrix(prob.M, prob.N, seed + 2)
            out = drv.mem_alloc(prob.M * prob.N * 4)
            bufs += [a, b, c, out]
            for alpha, beta in ab_pairs:
                p = Problem(prob.M, prob.N, prob.K, alpha, beta)
                ref, mag = checker.reference(a, b, c, p)
                try:
                    for who, launch in (("kernel", launcher(spec, p)), ("baseline", blas.launcher(p))):
                        if beta == 0:
                            drv.memset_d32_async(out, NAN_BITS, prob.M * prob.N, stream)
                        else:
                            drv.memcpy_dtod_async(out, c, prob.M * prob.N * 4, stream)
                        launch(a, b, out, stream)
                        stream.synchronize()
                        v = checker.compare(out, ref, mag, p, spec.precision)
                        rec["checks"].append({"who": who, "alpha": alpha, "beta": beta, **v.as_dict()})
                        if not v.ok and rec["status"] == "ok":
                            status = "wrong" if who == "kernel" else "baseline_wrong"
                            rec.update(status=status, error=f"{who} alpha={alpha} beta={beta}: {v}")
                finally:
                    ref.free()
                    mag.free()
            # timing: fixed-seed operands (data values move power and clocks), beta = 0
            if job.get("time", True) and rec["status"] == "ok":
                ts = job.get("timing_seed", TIMING_SEED)
                checker.fill(a, prob.M * prob.K, ts)
                checker.fill(b, prob.K * prob.N, ts + 1)
                stream.synchronize()
                kl, bl = launcher(spec, prob), blas.launcher(prob)
                timer = Timer(policy, stream, clocks, info.max_sm_clock_mhz, info.l2_bytes)
                try:
                    res = timer.measure({"kernel": lambda: kl(a, b, out, stream),
                                         "baseline": lambda: bl(a, b, c, stream)})
                finally:
                    timer.close()
                rec["kernel_time"] = res["kernel"].as_dict()
                rec["baseline_time"] = res["baseline"].as_dict()
                if not res["kernel"].samples_s or not res["baseline"].samples_s:
                    rec.update(status="throttled", error="every sample ran under the clock floor")
        except Exception as exc:
            lost = _context_lost(exc)
            rec.update(status="launch_error" if lost else "error",
                       error=f"{type(exc).__name__}: {exc}")
            if not lost:
                rec["traceback"] = traceback.format_exc(limit=4)
            emit(TAG, rec)
            if lost:
                return EXIT_CONTEXT_LOST
            continue
        finally:
            for buf in bufs:
                try:
                    buf.free()
                except Exception:
                    pass
        emit(TAG, rec)
    checker.close()
    blas.close()
    return 0


def main() -> int:
    job = json.load(sys.stdin)
    try:
        return run_job(job)
    except Exception as exc:  # reported by the parent from stderr
        traceback.print_exc()
        print(f"worker failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
