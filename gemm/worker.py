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


def emit(tag: str, obj: dict) -> None:
    sys.stdout.write(tag + json.dumps(obj) + "\n")
    sys.stdout.flush()


def _context_lost(exc: Exception) -> bool:
    """After these errors the CUDA context is unusable and the process must end."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(s in text for s in ("illegal", "launch failed", "misaligned", "unspecified",
                                   "launcherror", "launch timeout", "hardware stack"))


def run_job(job: dict) -> int:
    from . import device, registry, verify
    from .baseline import Cublas
    from .data import DeviceOperands, random_operands
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
    for pd in job["problems"]:
        prob = Problem(pd["M"], pd["N"], pd["K"])
        rec = {"kernel": spec.name, "size": prob.label, "M": prob.M, "N": prob.N, "K": prob.K,
               "flops": prob.flops, "baseline": spec.baseline, "precision": spec.precision,
               "defines": spec.defines, "status": "ok", "error": None, "checks": []}
        if compile_error:
            rec.update(status="compile_error", error=compile_error)
            emit(TAG, rec)
            continue
        try:
            # correctness: fresh random inputs, output poisoned with NaN when beta == 0
            a, b, c = random_operands(prob)
            for alpha, beta in ab_pairs:
                p = Problem(prob.M, prob.N, prob.K, alpha, beta)
                ref, mag, where = verify.reference(a, b, c, alpha, beta)
                for who, launch in (("kernel", launcher(spec, p)), ("baseline", blas.launcher(p))):
                    ops = DeviceOperands(a, b, c)
                    try:
                        if beta == 0:
                            ops.poison()
                        launch(ops.a, ops.b, ops.c, stream)
                        stream.synchronize()
                        v = verify.compare(ops.get_c(), ref, mag, prob.K, spec.precision, where)
                    finally:
                        ops.free()
                    rec["checks"].append({"who": who, "alpha": alpha, "beta": beta, **v.as_dict()})
                    if not v.ok:
                        status = "wrong" if who == "kernel" else "baseline_wrong"
                        if rec["status"] == "ok":
                            rec.update(status=status, error=f"{who} alpha={alpha} beta={beta}: {v}")
                del ref, mag
            # timing: fixed-seed inputs (data values move power and clocks), beta = 0
            if job.get("time", True) and rec["status"] == "ok":
                ta, tb, _ = random_operands(prob, seed=job.get("timing_seed", 0))
                ops = DeviceOperands(ta, tb, _)
                c2 = drv.mem_alloc(prob.M * prob.N * 4)
                kl, bl = launcher(spec, prob), blas.launcher(prob)
                timer = Timer(policy, stream, clocks, info.max_sm_clock_mhz, info.l2_bytes)
                try:
                    res = timer.measure({
                        "kernel": lambda: kl(ops.a, ops.b, ops.c, stream),
                        "baseline": lambda: bl(ops.a, ops.b, c2, stream)})
                finally:
                    timer.close()
                    ops.free()
                    c2.free()
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
        emit(TAG, rec)
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
