"""What ci/memcheck.sh's racecheck and synccheck passes run: which kernels, on which shapes (no GPU).

Kernels: those that use shared memory, read from what each kernel is built into, not from a
list: the registry's dynamic `smem` where it is above zero, else the static shared memory
ptxas reports for its entry points (nvcc -Xptxas -v with the loader's own flags, for sm_90 or
the entry's arch; gemm.explain.resources reads the report; kept in the loader's cache dir,
keyed by the source and flags). 01 and 02 use none and are left out.
racecheck also leaves out the TMA kernels (registry `tma`: 13, 14): their operand tiles are
written by the copy engine (cp.async.bulk.tensor, which racecheck attributes to no thread) and
read by wgmma (not among racecheck's tracked accesses: compute-sanitizer's
--check-warpgroup-mma covers memcheck and synccheck only), in an order kept by mbarriers whose
transaction counts racecheck has been reported not to treat as ordering across warps: a
missing wait there would go unseen, and what it could report is a false hazard. synccheck
keeps them (its wgmma sequence checks are for sm_90a).

Shapes: few and small (racecheck instruments every shared-memory access), chosen so that each
kernel launches every entry point, full tiles and both edges (the right strip, the bottom
strip) at the largest tile (128 x 256), a K remainder for K steps of 8, 32 and 64, and more K
steps than a pipeline has stages, so that a stage is reused:
  ALIGNED    136x264x108: N and K multiples of 4: a split kernel's edge entry (full tiles on
             its main path, partial ones on the checked path; geometry.plan), the one entry
             of the others; K = 13 steps of 8 + 4, 3 steps of 32 + 12 (4 K tiles for 12's
             3 stages)
  TILED      256x256x260: M and N multiples of every tile a split kernel takes (its tune
             space included): the main entry alone; K = 32 steps of 8 + 4. Few tiles: a
             `split_k` kernel (10) splits K here on the H200 (gemm/core/splitk.py; 8 tiles of
             64 x 128 for 132 SMs: 2 splits of 136 and 124, the K remainder in the last), so
             its split path and the reduction kernel run as well
  UNALIGNED  136x263x107: N and K not multiples of 4: the fallback entry, K remainder again
  TMA        136x264x584: K a multiple of 8 (bf16 rows of 16-byte multiples: no staging, the
             TMA kernels on the operands as they are),
             and not of 32 or 64: 19 K tiles of 32 (13), 10 of 64 (14), each past 8 stages (the
             most their tune spaces hold: whatever a tuned table picks, a stage is reused)
A tuned kernel's medium and large builds (its table's constants for those buckets,
gemm.core.tuning) never run at these small shapes; each distinct one runs apart, on its own
bucket's shape (`bucket` lines), under memcheck as well:
  MEDIUM     1544x1672: M x N in the medium bucket, both edges at every tile
  LARGE      6100x5700: M x N in the large bucket, 48 x 45 tiles of 128 x 128 = 16.4 waves
             of 132 blocks, so 18's stream-K (STREAM_K 1 there, from SK_FROM 16 waves)
             splits the last tiles' 10 K steps
  with K = 584 for the TMA kernels (as TMA), else 588 (a multiple of 4 with a remainder of
  4 after K steps of 8: the aligned entry and a K tail)
A bucket whose constants equal a build already run (10, 13, 14, 16: medium = large) is not
run again. synccheck takes (1, 0) as well: beta 0 is where the TMA-store epilogues (16-18)
and 18's stream-K run.
A kernel runs the shapes it needs (the TMA kernels TMA; one with a fallback entry ALIGNED and
UNALIGNED; any other ALIGNED; a split kernel TILED as well); a pass runs the union over its kernels in one process (a kernel
may run a shape it does not need: 13 and 14 run ALIGNED and UNALIGNED on copies of A and B
with K padded, registry pad_k; a kernel that refuses a shape is not a failure).
`coverage` says what a shape exercises; tests/test_ci_tools.py holds every kernel to it.

    python3 ci/sanitize_plan.py [--tools memcheck,racecheck,synccheck] [--gpu h200] [KERNEL ...]

prints, per tool, "TOOL kernels K ...", "TOOL shapes S ...", "TOOL alpha-beta A,B ...",
"TOOL bucket SHAPE K ..." (a line per bucket shape, the kernels whose build there no other
shape runs) and "TOOL skip K: why" (a line per kernel left out); memcheck: its bucket lines
only (its own shapes are ci/memcheck.sh's). KERNEL: names or prefixes (default: every
registered kernel); --gpu: whose tuned tables (default h200).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # this tree's gemm, not another

from gemm.core import geometry, registry, tuning   # noqa: E402
from gemm.core.splitk import split_k   # noqa: E402
from gemm.core.problem import Problem   # noqa: E402
from gemm.core.registry import KernelSpec, kernels_dir   # noqa: E402

TOOLS = ("memcheck", "racecheck", "synccheck")
ALIGNED, UNALIGNED, TMA, TILED = "136x264x108", "136x263x107", "136x264x584", "256x256x260"
MEDIUM, LARGE = (1544, 1672), (6100, 5700)   # M x N in the medium and large buckets
# (alpha, beta): beta != 0, so C is read as well as written; synccheck also beta 0 (TMA stores)
PAIRS = {"racecheck": ((1.5, 0.5),), "synccheck": ((1.0, 0.0), (1.5, 0.5))}
GPU = "h200"           # whose tuned constants coverage() resolves (10_autotuned's small bucket)
SMS = 132              # its SMs, for coverage()'s split-K (gemm.core.splitk)


class PlanError(RuntimeError):
    """The plan cannot be made (unknown kernel, no nvcc); one sentence."""


def shapes_for(spec: KernelSpec) -> tuple[str, ...]:
    if spec.tma:
        return (TMA,)
    return (ALIGNED,) + ((TILED,) if spec.split else ()) + ((UNALIGNED,) if spec.fallback else ())


def bucket_shape(spec: KernelSpec, m_n: tuple[int, int]) -> str:
    """MEDIUM or LARGE as `spec` runs it: K as TMA (584) or with a tail after 8s (588)."""
    return f"{m_n[0]}x{m_n[1]}x{584 if spec.tma else 588}"


def bucket_shapes(spec: KernelSpec, gpu: str = GPU) -> list[str]:
    """MEDIUM and LARGE where they launch a build of `spec` (its tuned constants there) that
    no shape before them does, each distinct build once."""
    def build(shape: str) -> tuple:
        return tuple(sorted(tuning.resolve(spec, Problem.parse(shape), gpu).defines.items()))
    seen = {build(s) for s in shapes_for(spec)}
    out = []
    for shape in (bucket_shape(spec, MEDIUM), bucket_shape(spec, LARGE)):
        if (b := build(shape)) not in seen:
            seen.add(b)
            out.append(shape)
    return out


def k_step(spec: KernelSpec) -> int | None:
    """The K a block stages per step: BK, 03's BLOCK, or the TMA box's K (13: 32, 14: 64)."""
    for name in ("BK", "BLOCK"):
        if name in spec.defines:
            return spec.defines[name]
    boxes = spec.tma_boxes()
    return boxes[0][2] if boxes else None


@dataclass(frozen=True)
class Coverage:
    shape: str
    refused: str | None          # why the kernel refuses the shape (geometry.unsupported)
    entries: tuple = ()          # entry points launched
    full_tile: bool = False      # at least one whole tile (M >= tile rows and N >= tile cols)
    edge_rows: bool = False      # a bottom strip (M not a multiple of the tile's rows)
    edge_cols: bool = False      # a right strip (N not a multiple of the tile's columns)
    k_tail: bool = False         # a K remainder (K not a multiple of the K step)
    k_steps: int = 0
    stages: int = 1              # STAGES (a pipeline's slots), 1 where there is none
    splits: int = 1              # split-K's S on the H200 (gemm.core.splitk), 1: no split


def coverage(spec: KernelSpec, shape: str, gpu: str = GPU) -> Coverage:
    """What `shape` exercises of `spec` (with the constants it runs with there)."""
    prob = Problem.parse(shape)
    run = tuning.resolve(spec, prob, gpu)
    why = geometry.unsupported(run, prob)
    if why:
        return Coverage(shape, why)
    tm, tn = run.tile
    step = k_step(run) or prob.K
    return Coverage(shape, None, tuple(dict.fromkeys(e for e, _ in geometry.plan(run, prob))),
                    prob.M >= tm and prob.N >= tn, prob.M % tm != 0, prob.N % tn != 0,
                    prob.K % step != 0, -(-prob.K // step), run.defines.get("STAGES", 1),
                    getattr(split_k(run, prob, SMS), "splits", 1))


def _nvcc() -> str:
    nvcc = shutil.which("nvcc") or shutil.which("nvcc", path=os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin"))
    if not nvcc:
        raise PlanError("nvcc is not on the PATH (nor in $CUDA_HOME/bin): the static shared "
                        "memory of each kernel comes from ptxas")
    return nvcc


def _cache_path(spec: KernelSpec, nvcc: str, options: list[str], arch: str) -> Path:
    """Where a kernel's ptxas answer is kept: keyed by its source (the .cu file and what it
    includes), the flags, the arch and the nvcc binary; next to the loader's cubin cache."""
    from gemm.cuda.loader import cache_dir
    from gemm.explain.build import source_hash
    st = os.stat(os.path.realpath(nvcc))
    key = hashlib.sha256(json.dumps([source_hash(kernels_dir(), spec), spec.file, options, arch,
                                     os.path.realpath(nvcc), st.st_size, st.st_mtime_ns])
                         .encode()).hexdigest()[:32]
    return Path(cache_dir()) / "smem" / f"{key}.json"


def static_smem(spec: KernelSpec, nvcc: str) -> dict[str, int] | str:
    """{entry: static shared memory, bytes} as ptxas reports it (cached), or nvcc's error."""
    from gemm.cuda.loader import nvcc_options, target_arch
    from gemm.explain.resources import parse_ptxas
    options, arch = nvcc_options(spec), target_arch(spec, "sm_90")
    cached = _cache_path(spec, nvcc, options, arch)
    try:
        got = json.loads(cached.read_text())
        if set(got) == set(spec.entries):
            return got
    except (OSError, ValueError):
        pass
    with tempfile.TemporaryDirectory(prefix="gemm-smem-") as tmp:
        out = subprocess.run([nvcc, "--cubin", "-arch", arch, *options, f"-I{kernels_dir()}",
                              "-Xptxas", "-v", "-o", os.path.join(tmp, "k.cubin"),
                              str(spec.path)], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return (out.stderr.strip().splitlines() or ["nvcc failed"])[-1]
    report = parse_ptxas(out.stderr + out.stdout)
    got = {e: report.get(e, {}).get("smem", 0) for e in spec.entries}
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp_file = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp_file.write_text(json.dumps(got))
        tmp_file.replace(cached)
    except OSError:
        pass
    return got


def shared_memory(specs: list[KernelSpec]) -> dict[str, str | None]:
    """{kernel: how it uses shared memory, or None where it uses none}: the registry's dynamic
    smem needs no compile; the others are compiled side by side."""
    out, todo = {}, []
    for s in specs:
        if s.smem > 0:
            out[s.name] = f"{s.smem} bytes dynamic (registry smem)"
        else:
            todo.append(s)
    if todo:
        nvcc = _nvcc()
        with ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 1)) as pool:
            for s, got in zip(todo, pool.map(lambda s: static_smem(s, nvcc), todo)):
                if isinstance(got, str):   # let the sanitizer's run report the compile error
                    out[s.name] = f"unknown (nvcc failed: {got})"
                elif max(got.values(), default=0) > 0:
                    out[s.name] = f"{max(got.values())} bytes static (ptxas)"
                else:
                    out[s.name] = None
    return {s.name: out[s.name] for s in specs}


def select(names: list[str] | None = None) -> list[KernelSpec]:
    if not names:
        return list(registry.registry().values())
    out = []
    for n in names:
        try:
            spec = registry.get(n)
        except ValueError as exc:
            raise PlanError(str(exc)) from None
        if spec not in out:
            out.append(spec)
    return out


def plan(tool: str, specs: list[KernelSpec], smem: dict[str, str | None], gpu: str = GPU):
    """(kernels, shapes, {left-out kernel: why}, [(bucket shape, kernels)]) of one pass;
    memcheck: every kernel, its bucket shapes only."""
    kernels, skip = [], {}
    for s in specs:
        if tool == "memcheck":
            kernels.append(s)
        elif smem[s.name] is None:
            skip[s.name] = "no shared memory (ptxas: 0 bytes static; registry smem 0)"
        elif tool == "racecheck" and s.tma:
            skip[s.name] = ("TMA + wgmma: racecheck tracks neither the copy engine's writes nor "
                            "wgmma's reads, nor mbarrier transaction ordering (docs/ci.md)")
        else:
            kernels.append(s)
    shapes = [] if tool == "memcheck" else list(dict.fromkeys(sh for s in kernels
                                                              for sh in shapes_for(s)))
    buckets: dict[str, list[str]] = {}
    for s in kernels:
        for shape in bucket_shapes(s, gpu):
            buckets.setdefault(shape, []).append(s.name)
    return [s.name for s in kernels], shapes, skip, list(buckets.items())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kernels", nargs="*", help="names or prefixes (default: every kernel)")
    p.add_argument("--tools", default=",".join(TOOLS),
                   help="comma-separated, from " + ", ".join(TOOLS))
    p.add_argument("--gpu", default=GPU, help="the machine whose tuned tables the buckets "
                   f"use (default {GPU})")
    args = p.parse_args(argv)
    tools = [t for t in args.tools.split(",") if t]
    bad = [t for t in tools if t not in TOOLS]
    try:
        if bad:
            raise PlanError(f"unknown tool {bad[0]!r} (one of {', '.join(TOOLS)})")
        specs = select(args.kernels)
        smem = shared_memory(specs) if set(tools) - {"memcheck"} else {}
    except PlanError as exc:
        print(f"sanitize_plan: {exc}", file=sys.stderr)
        return 2
    for tool in tools:
        kernels, shapes, skip, buckets = plan(tool, specs, smem, args.gpu)
        if tool != "memcheck":
            print(f"{tool} kernels {' '.join(kernels)}".rstrip())
            print(f"{tool} shapes {' '.join(shapes)}".rstrip())
            print(f"{tool} alpha-beta " + " ".join(f"{a:g},{b:g}" for a, b in PAIRS[tool]))
        for shape, names in buckets:
            print(f"{tool} bucket {shape} {' '.join(names)}")
        for name, why in skip.items():
            print(f"{tool} skip {name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
