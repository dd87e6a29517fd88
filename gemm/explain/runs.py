"""Each side of an explanation run on the GPU with its own tree's code, as the gate's A/B runs a
commit (`python -m gemm ...` with the tree as the working directory and first on PYTHONPATH):
a timed run, with the machine sampled through NVML while it runs, then one launch of the
kernel's main entry point profiled with ncu (`--clock-control none`). Old sides first, then new,
for each step.

How a tree launches its kernel: `python -m gemm.measure.once` where the tree has it (this
version and later); else `python -m gemm bench -k KERNEL --sizes SIZE`, which every tree has
(it also runs cuBLAS and the correctness check; ncu counts only the entry point's launches,
and the machine is sampled where the GPU was busy), but which cannot take --old-define /
--new-define: such a side says so instead. Nothing here raises for a side that cannot run: its
SideRun says why.
"""
from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..machine import nvml
from . import ncu as _ncu
from .build import Build
from .gpureport import Counters, GpuReport, SideRun

ONCE = "gemm.measure.once"
BENCH = "gemm bench"
SKIP = 3               # launches of the entry point before the profiled one
TAG = "@@ONCE "


@dataclass(frozen=True)
class GpuOptions:
    counters: bool = True          # profile with ncu where it is on the PATH
    seconds: float = 1.0           # the timed run's batches
    timeout_s: float = 150.0       # each process (timed, profiled)
    ncu_output: str | None = None  # append each ncu run's command and output to this file


@dataclass
class Side:
    """What a side runs: its checkout, its build, the defines given on the command line."""
    name: str                      # "old" / "new"
    root: Path | None
    build: Build
    overrides: dict
    size: str


def env_for(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GEMM_KERNELS_DIR", "GEMM_INJECT_DELAY")}
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in env.get("PYTHONPATH", "")
                                                       .split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def has_once(root: Path) -> bool:
    return (Path(root) / "gemm" / "measure" / "once.py").is_file()


def profiled_entry(b: Build) -> str | None:
    """The entry point with the most blocks at the size (the main one, for aligned shapes)."""
    if not b.launch.entries:
        return None
    return max(b.launch.entries, key=lambda eg: eg[1][0] * eg[1][1] * eg[1][2])[0]


def cannot(s: Side) -> str:
    """Why a side cannot run on the GPU at all ('' where it can)."""
    if s.root is None:
        return "no checkout to run (the kernels of an installed package)"
    if s.build.launch.refused:
        return f"the kernel refuses the shape: {s.build.launch.refused}"
    if s.overrides and not has_once(s.root):
        return (f"its tree predates {ONCE}, and its `gemm bench` cannot take the defines "
                f"given ({' '.join(f'{k}={v}' for k, v in s.overrides.items())})")
    return ""


def app(s: Side, launches: int, seconds: float, json_path: str | None = None) -> list[str]:
    if has_once(s.root):
        return [sys.executable, "-m", ONCE, s.build.kernel, "--size", s.size,
                *(f"--define={k}={v}" for k, v in s.overrides.items()),
                "--launches", str(launches), "--seconds", str(seconds)]
    return [sys.executable, "-m", "gemm", "bench", "-k", s.build.kernel, "--sizes", s.size,
            *(["--json", json_path] if json_path else [])]


def _in_tree(doc: dict, root: Path) -> str:
    """'' where the document's package (the gemm that ran) is the tree's, else why not."""
    pkg = doc.get("package")
    if pkg and Path(root).resolve() not in Path(pkg).resolve().parents:
        return f"the run imported gemm from {pkg}, not from {root}"
    return ""


def once_doc(stdout: str) -> dict | None:
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(TAG)), None)
    try:
        return json.loads(line[len(TAG):]) if line else None
    except ValueError:
        return None


def bench_ms(doc: dict, kernel: str) -> float | None:
    """The kernel's median seconds per launch in a gemm.measure/1 document, in ms."""
    for r in doc.get("records") or []:
        if r.get("kernel") == kernel and r.get("role", "kernel") == "kernel":
            samples = (r.get("kernel_time") or {}).get("samples_s") or []
            if samples:
                return 1e3 * statistics.median(samples)
    return None


def _tail(text: str, n: int = 300) -> str:
    return " ".join((text or "").strip().splitlines()[-3:])[-n:]


def timed(s: Side, run: SideRun, opts: GpuOptions) -> None:
    """The timed run, sampled: run.time_ms and run.machine (else run.machine_why); run.error
    where the side would not run (then it is not profiled either)."""
    once = has_once(s.root)
    run.launcher = ONCE if once else BENCH
    with tempfile.TemporaryDirectory(prefix="gemm-explain-run-") as tmp:
        path = os.path.join(tmp, "bench.json")
        with nvml.Sampler() as sampler:
            try:
                out = _ncu.run_group(app(s, SKIP, opts.seconds, path), opts.timeout_s,
                                     s.root, env_for(s.root))
            except subprocess.TimeoutExpired:
                run.error = f"the timed run took over {opts.timeout_s:.0f} s"
                return
            except OSError as exc:
                run.error = f"the timed run could not start: {exc}"
                return
        if once:
            doc = once_doc(out.stdout)
        else:
            try:
                doc = json.loads(Path(path).read_text())
            except (OSError, ValueError):
                doc = None
    if not isinstance(doc, dict):
        run.error = f"{run.launcher} failed (exit {out.returncode}): {_tail(out.stderr)}"
        return
    wrong = _in_tree(doc, s.root)
    if wrong:
        run.error = wrong
        return
    run.time_ms = doc.get("ms") if once else bench_ms(doc, s.build.kernel)
    run.machine = sampler.summary(doc.get("busy") if once else None)
    if run.machine is None:
        run.machine_why = sampler.why or "no NVML sample while it ran"


def missing(values: dict, extra: dict, stalls: dict, dropped: list) -> list[str]:
    """What was asked for and not reported, by metric name."""
    out = [" | ".join(cands) for key, _, cands in _ncu.QUANTITIES if values.get(key) is None]
    out += [n for n, k in ((_ncu.DURATION, "duration_ms"), (_ncu.CLOCK, "sm_mhz"))
            if extra.get(k) is None]
    if not stalls:
        out.append("warp stall reasons (smsp__average_warps_issue_stalled_*, "
                   f"section {_ncu.SECTION})")
    return out + [f"{n} (refused by ncu)" for n in dropped]


def profiled(s: Side, ncu_path: str, known: set, opts: GpuOptions) -> Counters:
    entry = profiled_entry(s.build)
    if entry is None:
        return Counters("", error="no entry point is launched at this size")
    p = _ncu.profile(ncu_path, app(s, SKIP + 1, 0.0), entry, SKIP, known, cwd=s.root,
                     env=env_for(s.root), timeout=opts.timeout_s)
    line = shlex.join(str(x) for x in p.command)
    if opts.ncu_output:
        with open(opts.ncu_output, "a") as f:
            f.write(f"==== gemm explain: the {s.name} side ({s.build.rev}), in {s.root}:\n"
                    f"{line}\n{p.output}\n")
    if p.row is None:
        return Counters(entry, error=p.why, command=line)
    values, extra, stalls = _ncu.read(p.row)
    return Counters(entry, values, stalls, extra["duration_ms"], extra["sm_mhz"],
                    extra["metric"], missing(values, extra, stalls, p.dropped), command=line)


def measure(old: Side, new: Side, opts: GpuOptions, log=lambda msg: None) -> GpuReport:
    """Both sides on the GPU: timed (old, new), then profiled (old, new)."""
    ok, name = nvml.gpu_here()
    if not ok:
        return GpuReport(why=f"no GPU answers here ({name})")
    rep = GpuReport(device=name, old=SideRun(), new=SideRun(),
                    tensor=any(e.mix.get("tensor") for b in (old.build, new.build)
                               for e in b.entries.values()))
    ncu_path = _ncu.find() if opts.counters else None
    if not opts.counters:
        rep.counters_why = "not asked for (--no-counters)"
    elif not ncu_path:
        rep.counters_why = "ncu (Nsight Compute) is not on the PATH"
    sides = ((old, rep.old), (new, rep.new))
    for s, run in sides:
        run.error = cannot(s)
        if not run.error:
            log(f"explain: timing the {s.name} side ({s.build.rev}) on {name}")
            timed(s, run, opts)
            if run.error:
                log(f"explain: the {s.name} side did not run: {run.error}")
    if ncu_path:
        rep.ncu = _ncu.version(ncu_path) or "version unknown"
        known = _ncu.query(ncu_path)
        for s, run in sides:
            if not run.error:
                log(f"explain: profiling the {s.name} side's {profiled_entry(s.build)} with "
                    f"ncu {rep.ncu}")
                run.counters = profiled(s, ncu_path, known, opts)
    return rep
