"""A sweep's targets, in a process of their own: `python -m gemm.measure.worker < job.json`.

The job is a list of (target, problem) pairs; the worker runs them in order and prints each
finished one at once as one line `@@RESULT {json}`, so nothing measured is lost if a later
one crashes. A kernel that crashes poisons the CUDA context: the worker then exits, and
gemm.measure.sweep starts a fresh one for the pairs left. All of a sweep's targets share one
process (its context, stream, and one cuBLAS handle and checker per baseline), so a sweep
pays one start-up (about 1.5 s: context, cuBLAS, checker), not one per kernel; each kernel's
own start is its load (about 0.25 s, in its first record's wall["open_s"]).

Per problem: `check_problem` (fresh random operands, every (alpha, beta) pair, kernel and
baseline, on the GPU correctness path; a chosen cuBLASLt baseline that fails it falls back
to today's call, recorded in `baseline_call`), then `time_problem` (fixed-seed operands, beta = 0,
kernel and baseline interleaved under the policy); `triage` turns an exception into a status.
A target that is a cuBLAS configuration is checked and timed alone.
"""
from __future__ import annotations

import json
import sys
import time
import traceback

from ..core.policy import SUITE, Measurement, Policy
from ..core.problem import Problem
from ..core.stats import median

TAG = "@@RESULT "
INFO_TAG = "@@INFO "

EXIT_ERROR = 2          # the worker itself failed (traceback on stderr)
EXIT_CONTEXT_LOST = 3   # a launch broke the CUDA context; the problem was reported
EXIT_NO_GPU = 4         # no usable GPU: nothing can run here


def emit(tag: str, obj: dict) -> None:
    sys.stdout.write(tag + json.dumps(obj) + "\n")
    sys.stdout.flush()


def failed_record(name: str, prob: Problem, status: str, error: str) -> dict:
    """The record of a pair that never got as far as a Job's record (its target would not
    open; its worker died): what it was and why it failed."""
    return {"kernel": name, "size": prob.label, "M": prob.M, "N": prob.N, "K": prob.K,
            "flops": prob.flops, "status": status, "error": error}


def triage(exc: Exception) -> tuple[str, bool]:
    """(status, context lost?): after these errors the CUDA context is unusable."""
    text = f"{type(exc).__name__} {exc}".lower()
    lost = any(s in text for s in ("illegal", "launch failed", "misaligned", "unspecified",
                                   "launcherror", "launch timeout", "hardware stack"))
    return ("launch_error" if lost else "error"), lost


class Worker:
    """What a worker process holds for all the targets of its job: the device, stream and
    clocks, and one baseline (cuBLAS handle) and one checker per baseline, opened when a
    target first needs them. `init_s` says where the start-up went, phase by phase."""

    def __init__(self, job: dict) -> None:
        t = time.perf_counter()
        self.init_s: dict = {}

        def lap(phase: str) -> None:
            nonlocal t
            now = time.perf_counter()
            self.init_s[phase] = now - t
            t = now
        from ..cuda import device
        lap("imports")
        self.drv = device.cuda()
        self.info = device.info()
        lap("context")
        self.policy = Policy.from_dict(job["policy"]) if job.get("policy") else SUITE
        self.ab_pairs = [tuple(x) for x in job.get("ab", [[1.0, 0.0]])]
        self.time = job.get("time", True)
        self.defines = job.get("defines") or {}
        self.stream = self.drv.Stream()
        self.clocks = device.Clocks()
        lap("stream_nvml")
        self._baselines: dict = {}   # baseline name -> (Target, Checker)

    def baseline(self, name: str):
        """(the baseline's Target, the Checker of its operand format), opened once."""
        if name not in self._baselines:
            from ..cuda.targets import open_target
            from .check import Checker
            target = open_target(name, self.stream)
            try:
                checker = Checker(self.stream, target.fmt)
            except BaseException:
                target.close()   # not left holding a cuBLAS handle nobody will close
                raise
            self._baselines[name] = (target, checker)
        return self._baselines[name]

    def close(self) -> None:
        for target, checker in self._baselines.values():
            checker.close()
            target.close()
        self._baselines.clear()


class Job:
    """One target of a worker: the kernel (loaded here) or cuBLAS configuration, with the
    worker's device, stream, clocks, policy and its baseline's handle and checker.
    `open_s`: where opening it went, phase by phase."""

    def __init__(self, worker: Worker, name: str) -> None:
        from ..core.registry import BASELINES, get
        from ..cuda.loader import CompileError, Unsupported, load
        from ..cuda.targets import open_target
        t0 = time.perf_counter()
        w = worker
        self.drv, self.info, self.stream, self.clocks = w.drv, w.info, w.stream, w.clocks
        self.policy, self.ab_pairs, self.time = w.policy, w.ab_pairs, w.time
        self.alone = name in BASELINES
        self.spec = None if self.alone else get(name)
        if self.spec is not None and w.defines:
            self.spec = self.spec.with_defines(**w.defines)
        self.compile_error = None
        self.unsupported = None      # built for an arch this GPU cannot run: a skip
        if self.spec is not None:
            try:
                load(self.spec)
            except Unsupported as exc:
                self.unsupported = str(exc)
            except CompileError as exc:
                self.compile_error = str(exc)
        t1 = time.perf_counter()
        self.baseline, self.checker = w.baseline(name if self.alone else self.spec.baseline)
        t2 = time.perf_counter()
        self.kernel = (None if self.alone or self.compile_error or self.unsupported
                       else open_target(self.spec))
        self.open_s = {"kernel_load": t1 - t0 + time.perf_counter() - t2,
                       "baseline_open": t2 - t1}

    @property
    def name(self) -> str:
        return self.baseline.name if self.alone else self.spec.name

    def record(self, prob: Problem) -> dict:
        rec = {"kernel": self.name, "role": "baseline" if self.alone else "kernel",
               "size": prob.label, "M": prob.M, "N": prob.N, "K": prob.K, "flops": prob.flops,
               "baseline": self.baseline.name, "precision": self.baseline.precision
               if self.alone else self.spec.precision, "defines": {},
               "status": "ok", "error": None, "checks": []}
        if not self.alone:  # the constants this problem runs with (a tuned kernel's differ)
            from ..core.tuning import resolve
            rec["defines"] = resolve(self.spec, prob, self.info.slug).defines
        return rec


def check_problem(job: Job, prob: Problem, ops, rec: dict) -> None:
    """Every (alpha, beta) pair, kernel and baseline, against one float64 reference each."""
    who = [("baseline", job.baseline)] if job.alone else [("kernel", job.kernel),
                                                          ("baseline", job.baseline)]
    for alpha, beta in job.ab_pairs:
        p = Problem(prob.M, prob.N, prob.K, alpha, beta)
        ref = job.checker.reference(ops, p)
        try:
            for role, target in who:
                v = job.checker.check(target.launcher(p), ops, p, target.precision, ref)
                base = getattr(target, "baseline", None) if role == "baseline" else None
                if not v.ok and base is not None and base.fall_back(p, f"it failed the check: "
                                                                        f"{v}"):
                    v = job.checker.check(target.launcher(p), ops, p, target.precision, ref)
                rec["checks"].append({"who": role, "alpha": alpha, "beta": beta, **v.as_dict()})
                if not v.ok and rec["status"] == "ok":
                    wrong = "wrong" if role == "kernel" or job.alone else "baseline_wrong"
                    rec.update(status=wrong, error=f"{role} alpha={alpha} beta={beta}: {v}")
        finally:
            for buf in ref:
                buf.free()
    base = getattr(job.baseline, "baseline", None)
    if base is not None:   # which call the baseline ran (gemm.cuda.basecall), fallback and why
        rec["baseline_call"] = base.describe(prob).as_dict()


def _with_delay(job: Job, launch, ops, rec: dict, share: float, source: str):
    """The kernel's launch followed by the fault-injection spin sized to `share` of its time
    (measured here first: the median of 5 timed batches of 10 warm launches)."""
    support = job.checker.support
    start, end = job.drv.Event(), job.drv.Event()
    for _ in range(3):
        launch(ops.a, ops.b, ops.out, job.stream)
    times = []
    for _ in range(5):
        start.record(job.stream)
        for _ in range(10):
            launch(ops.a, ops.b, ops.out, job.stream)
        end.record(job.stream)
        end.synchronize()
        times.append(end.time_since(start) / 1e3 / 10)
    kernel_s = sorted(times)[2]
    rate = support.cycles_per_second()
    cycles = int(round(share * kernel_s * rate))
    rec["fault_injection"] = {"share": share, "source": source, "kernel_s": kernel_s,
                              "delay_s": share * kernel_s, "cycles": cycles}
    print(f"worker: FAULT INJECTION: {rec['kernel']} at {rec['size']}: +{100 * share:g} % "
          f"({1e6 * share * kernel_s:.2f} us after every launch; {source})", file=sys.stderr)

    def launch_and_delay(a, b, c, stream=None):
        launch(a, b, c, stream)
        support.delay(cycles, stream)
    return launch_and_delay


def time_problem(job: Job, prob: Problem, ops, rec: dict) -> None:
    """Fixed-seed operands, beta = 0; kernel and baseline sampled in turn under the policy, on
    `policy.allocations` operand sets: `ops` first, then each further set freshly allocated
    while the earlier ones are held, so that it lands elsewhere in device memory. The sets'
    samples are pooled (gemm.core.policy)."""
    from ..core.faults import delay_share
    launch = None if job.alone else job.kernel.launcher(prob)
    fault = None if job.alone else delay_share(job.spec)
    sets, parts = [ops], []
    try:
        for i in range(job.policy.allocations):
            if i:   # made from the timing seed
                sets.append(job.checker.operands(prob, seed=job.policy.timing_seed))
            else:   # the checked operands, refilled from it
                ops.fill(job.checker.support, prob, job.policy.timing_seed)
            cur = sets[-1]
            if fault and i == 0:
                launch = _with_delay(job, launch, cur, rec, *fault)
            fns = {"baseline": (job.baseline.launcher(prob), cur.c)}
            if launch is not None:
                fns = {"kernel": (launch, cur.out), **fns}
            parts.append(_time_set(job, fns, cur))
    finally:   # a failing free must not hide the error that brought us here
        for extra in sets[1:]:
            try:
                extra.free()
            except Exception:
                pass
    pooled = pool(parts)
    for k, m in pooled.items():
        rec[f"{k}_time"] = m.as_dict()
    if not all(m.samples_s for m in pooled.values()):
        rec.update(status="throttled",
                   error=f"every sample was dropped: {job.policy.floor_words()}")


def _time_set(job: Job, fns: dict, ops) -> dict:
    from .timer import Timer
    timer = Timer(job.policy, job.stream, job.clocks, job.info.max_sm_clock_mhz,
                  job.info.l2_bytes)
    try:
        return timer.measure({k: (lambda f=f, out=out: f(ops.a, ops.b, out, job.stream))
                              for k, (f, out) in fns.items()})
    finally:
        timer.close()


def pool(parts: list[dict]) -> dict:
    """One Measurement per function from the per-operand-set ones (in set order): samples and
    clock readings concatenated, kernel and baseline cut to the same count within each set (so
    the i-th samples of both stay neighbours in time, as % of cuBLAS pairs them), GPU time and
    throttled and unchecked counts summed; `per_set` keeps each set's batch, sample count and median. One
    set: that set's Measurement as it is."""
    if len(parts) == 1:
        return parts[0]
    out = {k: Measurement(batch=parts[0][k].batch, graph=parts[0][k].graph) for k in parts[0]}
    for part in parts:
        n = min(len(m.samples_s) for m in part.values())
        for k, m in part.items():
            o = out[k]
            keep = n if len(part) > 1 else len(m.samples_s)
            o.samples_s += m.samples_s[:keep]
            o.clocks_mhz += m.clocks_mhz[:keep]
            o.gpu_time_s += m.gpu_time_s
            o.throttled += m.throttled
            o.unchecked += m.unchecked
            o.graph = o.graph and m.graph
            o.per_set.append({"batch": m.batch, "samples": keep,
                              "median_s": median(m.samples_s[:keep]) if keep else None})
    return out


def _context_alive(holder) -> bool:
    """After an error the keywords of `triage` missed: does the context still synchronize?
    (`holder`: a Job or the Worker, anything with the driver as .drv)"""
    try:
        holder.drv.Context.synchronize()
        return True
    except Exception:
        return False


def tasks_of(spec: dict) -> list[tuple[str, Problem]]:
    """The job's (target, problem) pairs in order: {"tasks": [[name, {"M", "N", "K"}], ...]}."""
    return [(name, Problem(p["M"], p["N"], p["K"])) for name, p in spec["tasks"]]


def run_job(spec: dict) -> int:
    """Every (target, problem) of the job in order, one record each; a target is opened when
    its first problem comes (a target that fails to open gets that error as the record of
    each of its problems)."""
    from ..cuda.device import GPUUnavailable
    try:
        worker = Worker(spec)
    except GPUUnavailable as exc:
        print(f"worker: no GPU: {exc}", file=sys.stderr)
        return EXIT_NO_GPU
    info = worker.info
    emit(INFO_TAG, {"device": info.__dict__ | {"arch": info.arch, "slug": info.slug},
                    "init_s": worker.init_s})
    job, opened, open_error = None, None, None
    for name, prob in tasks_of(spec):
        first = name != opened
        if first:
            opened = name
            try:
                job, open_error = Job(worker, name), None
            except GPUUnavailable as exc:   # e.g. no cuBLAS (nvmath) here: nothing can run
                print(f"worker: no GPU: {exc}", file=sys.stderr)
                return EXIT_NO_GPU
            except Exception as exc:   # e.g. a kernel whose launch contract cannot be met
                job, open_error = None, f"{type(exc).__name__}: {exc}"
        if job is None:
            emit(TAG, failed_record(name, prob, "error", f"opening {name}: {open_error}"))
            if not _context_alive(worker):
                return EXIT_CONTEXT_LOST
            continue
        rec = job.record(prob)
        if first:
            rec["wall"] = {"open_s": job.open_s}
        code = run_problem(job, prob, rec)
        if code is not None:
            return code
    worker.close()
    return 0


def run_problem(job: Job, prob: Problem, rec: dict) -> int | None:
    """Check and time one problem and emit its record; an exit code when the context is lost."""
    if job.compile_error or job.unsupported:
        rec.update(status="compile_error" if job.compile_error else "unsupported",
                   error=job.compile_error or job.unsupported)
        emit(TAG, rec)
        return None
    if job.spec is not None:   # a shape the kernel refuses by contract: not a failure
        from ..core.geometry import unsupported
        why = unsupported(job.spec, prob)
        if why:
            rec.update(status="unsupported", error=why)
            emit(TAG, rec)
            return None
    ops = None
    try:
        if job.kernel is not None:
            from ..core.tuning import resolve
            from ..cuda.loader import resources
            rec["resources"] = resources(resolve(job.spec, prob, job.info.slug))
        t0 = time.perf_counter()
        ops = job.checker.operands(prob)
        rec["seed"] = ops.seed
        check_problem(job, prob, ops, rec)
        t1 = time.perf_counter()
        rec["wall"] = {**rec.get("wall", {}), "check_s": t1 - t0}   # where a sweep's time
        if job.time and rec["status"] == "ok":   # goes (with the sweep's per-worker ready_s)
            time_problem(job, prob, ops, rec)
            rec["wall"]["time_s"] = time.perf_counter() - t1
    except Exception as exc:
        status, lost = triage(exc)
        if not lost and not _context_alive(job):
            status, lost = "launch_error", True
        rec.update(status=status, error=f"{type(exc).__name__}: {exc}")
        if not lost:
            rec["traceback"] = traceback.format_exc(limit=4)
        emit(TAG, rec)
        return EXIT_CONTEXT_LOST if lost else None
    finally:
        if ops is not None:
            try:
                ops.free()
            except Exception:
                pass
    emit(TAG, rec)
    return None


def main() -> int:
    job = json.load(sys.stdin)
    try:
        return run_job(job)
    except Exception as exc:  # reported by the parent from stderr
        traceback.print_exc()
        print(f"worker failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
