"""`gemm bench`: time kernels against cuBLAS and print the tables."""
from __future__ import annotations

import json

from ..core import shapes
from ..core.policy import POLICIES

REGIME = {"hot": "hot L2", "cold": "cold L2", "sustained": "hot L2 after 2 s of load"}
from .common import OK_STATUSES, POLICY_HELP, _need_gpu, _policy, _problems, _sweep, _targets


def add_arguments(p) -> None:
    p.add_argument("--kernel", "-k", action="append", help="kernel name or prefix (repeatable)")
    p.add_argument("--sizes", nargs="+", default=list(shapes.TRACKED), help="N (square) or MxNxK")
    p.add_argument("--mode", default="hot",
                   help="hot (default), cold L2, or sustained: hot, after 2 s of back-to-back "
                        "launches of each function")
    p.add_argument("--policy", default="suite", choices=list(POLICIES), help=POLICY_HELP)
    p.add_argument("--json", help="write the measurement document (every sample) to this file")


def run(args) -> int:
    from .tables import bench_table
    kernels = _targets(args.kernel)
    problems = _problems(args.sizes)
    policy = _policy(args.mode, args.policy)
    _need_gpu()
    doc = _sweep(kernels, problems, policy=policy)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    dev = doc.get("device") or {}
    print(f"\n{dev.get('name', '?')} ({dev.get('arch', '?')}, {dev.get('sms', '?')} SMs), "
          f"{REGIME[policy.mode]}, CUDA-event medians, {doc['wall_s']:.0f} s")
    for k in kernels:
        print(f"\n{k}\n" + bench_table(doc["records"], k))
    for line in baseline_lines(doc["records"]):
        print(line)
    bad = [r for r in doc["records"] if r["status"] not in OK_STATUSES]
    for r in bad:
        print(f"\n{r['kernel']} {r['size']}: {r['status']}: {(r.get('error') or '')[:500]}")
    return 1 if bad else 0


def baseline_lines(records) -> list[str]:
    """One line per problem whose baseline is not today's plain call: the chosen cuBLASLt
    algorithm that ran (gemm.cuda.basecall), or the fallback and why."""
    seen, out = set(), []
    for r in records:
        call = r.get("baseline_call") or {}
        key = (call.get("config"), r["size"])
        if key in seen or not (call.get("call") == "cublaslt" or call.get("fallback")):
            continue
        seen.add(key)
        what = (f"cuBLASLt {call['label']}" if call["call"] == "cublaslt"
                else f"today's call, FALLBACK: {call['fallback']}")
        out.append(f"baseline {call['config']} {r['size']}: {what}")
    return (["", "% of cuBLAS against (baselines/<gpu>-choice.toml):"] + out) if out else []
