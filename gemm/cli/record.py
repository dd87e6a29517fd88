"""`gemm record`: record a commit's benchmarks with asv into results/."""
from __future__ import annotations

import sys
from pathlib import Path

from ..core import registry
from .common import UsageError, _need_gpu, need_modules


def add_arguments(p) -> None:
    p.add_argument("--repo", default=".", help="checkout whose code is measured (default .)")
    p.add_argument("--machine", default=None, help="machine name (default: from the GPU)")
    p.add_argument("--commit", default="HEAD",
                   help="the commit the results belong to; --repo must be checked out at it "
                   "(default HEAD)")
    p.add_argument("--results", default=None, help="results directory (default: the repo's)")
    p.add_argument("--allow-fault-injection", action="store_true",
                   help="record even with fault injection on (into a scratch history only)")
    p.add_argument("--bench", "-b", action="append", default=[],
                   help="only this kernel (name or prefix), or benchmarks matching this regex "
                   "(asv -b); judge such a run with gemm regress --kernels")


def run(args) -> int:
    from ..record.machine import write_machine
    from ..record.recorder import RecordError, record, rev_parse
    sha = rev_parse(args.repo, args.commit)
    if sha is None:
        raise UsageError(f"git cannot name commit {args.commit!r} in {args.repo}")
    at = rev_parse(args.repo)
    if at != sha:   # asv runs the tree as it is: its code must be the commit's
        raise UsageError(f"{args.repo} is at {str(at)[:10]}, not at {sha[:10]}: check the commit "
                         f"out there (e.g. git worktree add) to record it")
    tree = Path(args.repo) / "kernels" / "kernels.toml"
    if tree.is_file():   # the tree asv will measure: a broken registry is said here (exit 2)
        registry.load_registry(tree, files=True)
    faults = fault_injection_in(args.repo)
    if faults and not args.allow_fault_injection:
        raise UsageError(f"fault injection is on ({faults}): values slowed on purpose would "
                         "enter the history unmarked; record into a scratch copy with "
                         "--allow-fault-injection (the gate's drift test), or turn it off")
    need_modules("asv")   # the track extra: asv records the run
    _need_gpu()
    machine = write_machine(args.machine)
    extra = [x for b in args.bench for x in ("-b", _bench_regex(b))]
    try:
        record(args.repo, machine, sha, extra, results=args.results)
    except RecordError as exc:
        print(f"gemm record: {exc}", file=sys.stderr)
        return 1
    return 0


def fault_injection_in(repo) -> str:
    """What would slow a recorded run on purpose: $GEMM_INJECT_DELAY, or an inject_delay in
    the registry of the tree being recorded (gemm.core.faults); '' when none."""
    import os
    from ..core.faults import ENV
    found = [f"{ENV}={os.environ[ENV]}"] if os.environ.get(ENV) else []
    path = Path(repo) / "kernels" / "kernels.toml"
    if path.is_file():
        try:
            specs = registry.load_registry(path).values()
        except ValueError:
            specs = []
        found += [f"{s.name} inject_delay = {s.inject_delay}" for s in specs if s.inject_delay]
    return "; ".join(found)


def _bench_regex(name: str) -> str:
    """asv -b matches its regex against names with their parameters, so `-b 10` would also
    select every kernel at sizes containing 10: a kernel name or prefix becomes its class."""
    try:
        return rf"Kernel_{registry.get(name).name}\."
    except ValueError:
        return name   # a regex of the user's own
