"""Report of ci/probes/worker_path.py runs (CPU only): per file (one GPU's processes) and
series, the slow repetitions and how they fall on processes.

    python3 ci/probes/worker_path_report.py FILE... [--cut 0.4]

A repetition is "slow" when its kernel median lies more than --cut percent above the median of
all repetitions of that series in that file. Patterns: one character per repetition of a
process, in order ("S" slow, "." not), counted over processes: all-or-nothing patterns ("SSS",
"...") mean a per-process state, scattered ones (".S.") a per-allocation one (with KEEP=1 each
repetition's operands are new memory). Also: slow share by the timer's batch size, the SM
clock range, and the spread of the repetitions that are not slow.
"""
import json
import statistics
import sys


def report(path: str, cut: float) -> None:
    procs = [json.loads(line[len("PROBE "):]) for line in open(path) if line.startswith("PROBE ")]
    if not procs:
        print(f"{path}: no PROBE lines")
        return
    p0 = procs[0]
    print(f"{path}: {len(procs)} processes, policy {p0.get('policy')}, keep {p0.get('keep')}, "
          f"kernel {'alone' if p0.get('alone') else 'and cuBLAS in turn'}")
    for key in p0["series"]:
        reps = [[r for r in p["series"][key] if r.get("status") == "ok"] for p in procs]
        allv = [r["kernel"][0] for rs in reps for r in rs]
        if not allv:
            continue
        med = statistics.median(allv)
        patterns: dict = {}
        by_batch: dict = {}
        fast, clocks = [], []
        for rs in reps:
            d = [100 * (r["kernel"][0] / med - 1) for r in rs]
            pat = "".join("S" if x > cut else "." for x in d)
            patterns[pat] = patterns.get(pat, 0) + 1
            for r, x in zip(rs, d):
                by_batch.setdefault(r["kernel"][1], []).append(x > cut)
                if x <= cut:
                    fast.append(x)
                if len(r["kernel"]) > 3 and r["kernel"][3]:
                    clocks.append(r["kernel"][3])
        slow = sum(x for v in by_batch.values() for x in v)
        n = sum(len(v) for v in by_batch.values())
        print(f"  {key}: median {1e6 * med:.2f} us; slow (> +{cut} %) {slow} of {n} repetitions")
        print("    patterns: " + ", ".join(f"{k} {v}" for k, v in sorted(patterns.items(),
                                                                        key=lambda kv: -kv[1])))
        print("    by batch: " + ", ".join(f"{b}: {sum(v)}/{len(v)} slow"
                                         for b, v in sorted(by_batch.items())))
        if clocks:
            print(f"    SM clock: {min(clocks):.0f}-{max(clocks):.0f} MHz")
        if len(fast) > 1:
            print(f"    not slow: sd {statistics.stdev(fast):.3f} %")


def main(argv) -> int:
    cut = 0.4
    if "--cut" in argv:
        i = argv.index("--cut")
        cut = float(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    for path in argv:
        report(path, cut)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
