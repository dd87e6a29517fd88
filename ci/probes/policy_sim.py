"""Simulation (CPU only, not part of the suite or the gate): what a measurement policy's stop
rule would have cost on recorded samples. Every timed function of the given sweep documents
(gemm.measure/1, e.g. the per-commit job's $OUT/sweeps/) is replayed through
gemm.core.policy's own stop rule (Measurement.done) under each candidate: its recorded samples
are fed in order until the rule stops; the GPU time spent (samples x batch) plus the warm-up
is summed. A candidate that would need more samples than were recorded is charged at the
rate of the first sample and counted as "extrapolated". A policy of several operand sets
(`allocations`) is charged that many times one set's cost (an approximation: the recorded
samples are replayed as one stream, whatever sets they came from).

    python3 ci/probes/policy_sim.py SWEEP_DIR ["field=value,..." ...]

With no candidates: the policy of the documents, the current SUITE and CONFIRM.
"""
import glob
import json
import os
import sys
from dataclasses import fields, replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from gemm.core.policy import CONFIRM, SUITE, Measurement, Policy  # noqa: E402


def cost(m: dict, p: Policy) -> tuple[float, bool]:
    """(GPU seconds the stop rule would spend on one timed function, extrapolated?)"""
    got = Measurement(batch=m["batch"])
    for s in m["samples_s"]:
        got.samples_s.append(s)
        got.gpu_time_s += s * m["batch"]
        if got.done(p):
            return got.gpu_time_s + p.warmup_s, False
    per = m["samples_s"][0] * m["batch"]
    need = max(p.min_samples, p.min_time_s / per) if per > 0 else p.min_samples
    return min(need * per, p.max_time_s) + p.warmup_s, True


def main(argv) -> int:
    docs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(argv[0], "sweep-*.json")))]
    if not docs:
        print(f"no sweep-*.json in {argv[0]}", file=sys.stderr)
        return 2
    cands = [("recorded", Policy.from_dict(docs[0]["policy"])), ("SUITE", SUITE),
             ("CONFIRM", CONFIRM)]
    kinds = {f.name: type(getattr(SUITE, f.name)) for f in fields(Policy)}
    for spec in argv[1:]:
        kv = dict(x.split("=", 1) for x in spec.split(","))
        cands.append((spec, replace(SUITE, **{k: kinds[k](v) for k, v in kv.items()})))
    print(f"{len(docs)} sweeps; GPU seconds the stop rule spends (timing only, no start-up)")
    for name, p in cands:
        total, extra, n = 0.0, 0, 0
        for d in docs:
            for r in d["records"]:
                for key in ("kernel_time", "baseline_time"):
                    m = r.get(key)
                    if m and m.get("samples_s"):
                        t, x = cost(m, p)
                        t *= p.allocations     # each operand set under the whole rule
                        total, extra, n = total + t, extra + x, n + 1
        print(f"  {name:<40} {total:7.1f} s over {n} functions ({extra} extrapolated)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
