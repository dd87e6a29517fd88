"""Probe (not part of the suite or the gate): does the worker layout change the A/B's noise?

85c2a17 put all of a sweep's kernels in one worker process (before: one worker per kernel).
Its first calibration, on another GPU than the previous one, came out noisier on some series
(07@8192 sd 0.18 % against 0.08 %). GPU or harness? This probe measures both layouts on one
GPU, interleaved: process after process, `gemm measure` (the A/B's own path,
gemm.track.abtest.measure, under each tree's CONFIRM) with the code of NEW (default HEAD) and
of OLD (default: NEW's parent), in the order N O O N N O ..., until DEADLINE_S. Per series it
reports each layout's sd of the log values over processes, the ratio, and the tests of equal
spread (F, two-sided; Levene, robust to a tail) and of equal level (Welch), from scipy; and
the wall time of one process of each. The raw values go to $OUT/harness_pair.json after
every process, so a cut run keeps what it measured.

  python3 ci/probes/harness_pair.py        # on the GPU machine, in the repository
Env: NEW, OLD (commits), SERIES ("05 07 09@1024 2048 4096 8192"), DEADLINE_S (500).

One side's processes are A/A processes of the calibration's own kind (the A/B's path, CONFIRM),
so they can join a calibration (`gemm calibrate --pool`) as one more GPU's noise:
  python3 ci/probes/harness_pair.py --calibration RAW.json SIDE OUT_DIR "GPU identity" PCI DATE
writes OUT_DIR/h200.json from SIDE's ("new" or "old") values of the run kept in RAW.json.
"""
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from gemm.core import registry
from gemm.track import abtest

ROOT = Path(__file__).resolve().parents[2]


def sha(rev: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True,
                          text=True, check=True).stdout.strip()


def report(doc: dict) -> str:
    import numpy as np
    from scipy import stats
    lines = [f"NEW {doc['new'][:10]} ({len(doc['runs']['new'])} processes, "
             f"{np.median(doc['wall']['new']):.1f} s each), OLD {doc['old'][:10]} "
             f"({len(doc['runs']['old'])} processes, {np.median(doc['wall']['old']):.1f} s each)",
             f"{'series':34} {'sd new %':>9} {'sd old %':>9} {'ratio':>6} {'F p':>7} "
             f"{'Levene p':>9} {'level new-old %':>16} {'Welch p':>8}"]
    keys = sorted({k for run in doc["runs"]["new"] for k in run})
    for key in keys:
        a = np.log([r[key] for r in doc["runs"]["new"] if r.get(key)])
        b = np.log([r[key] for r in doc["runs"]["old"] if r.get(key)])
        if len(a) < 3 or len(b) < 3:
            continue
        sa, sb = a.std(ddof=1), b.std(ddof=1)
        f = sa ** 2 / sb ** 2
        pf = 2 * min(stats.f.cdf(f, len(a) - 1, len(b) - 1), stats.f.sf(f, len(a) - 1, len(b) - 1))
        pl = stats.levene(a, b, center="median").pvalue
        pw = stats.ttest_ind(a, b, equal_var=False).pvalue
        lines.append(f"{key:34} {100 * sa:9.3f} {100 * sb:9.3f} {sa / sb:6.2f} {pf:7.3f} "
                     f"{pl:9.3f} {100 * (math.exp(a.mean() - b.mean()) - 1):+16.3f} {pw:8.3f}")
    return "\n".join(lines)


def to_calibration(raw: str, side: str, out_dir: str, gpu: str, pci: str, date: str):
    from gemm.calibrate import runner as calibrate
    from gemm.store import calibration
    doc = json.loads(Path(raw).read_text())
    got: dict = {}
    for run in doc["runs"][side]:
        for key, v in run.items():
            got.setdefault(tuple(key.split(" ")), []).append(v)
    return calibration.save(out_dir, "h200", {
        "gpu_name": "NVIDIA H200", "device": {"name": "NVIDIA H200", "pci_bus_id": pci},
        "gpu": gpu, "processes": len(doc["runs"][side]), "date": date,
        "made_by": f"ci/probes/harness_pair.py, the {side} side ({doc[side][:10]}) of {raw}",
        "noise": calibrate.noise_rows(got)})


def main() -> int:
    if sys.argv[1:2] == ["--calibration"]:
        print(to_calibration(*sys.argv[2:8]))
        return 0
    new = sha(os.environ.get("NEW", "HEAD"))
    old = sha(os.environ.get("OLD", f"{new}^"))
    spec = os.environ.get("SERIES", "05 07 09@1024 2048 4096 8192")
    kernels, sizes = spec.split("@")
    series = {registry.get(k).name: sizes.split() for k in kernels.split()}
    deadline = time.monotonic() + float(os.environ.get("DEADLINE_S", "500"))
    out = Path(os.environ.get("OUT", ".")) / "harness_pair.json"
    doc = {"new": new, "old": old, "series": series, "runs": {"new": [], "old": []},
           "wall": {"new": [], "old": []}, "order": []}
    order = ["new", "old", "old", "new"]
    i = 0
    with abtest.trees(ROOT, [new, old]) as tree:
        while time.monotonic() < deadline:
            side = order[i % 4]
            t0 = time.monotonic()
            got = abtest.measure(tree[doc[side]], series)
            doc["wall"][side].append(time.monotonic() - t0)
            doc["runs"][side].append({f"{k} {s} {m}": v for (k, s, m), v in got.items()})
            doc["order"].append(side)
            out.write_text(json.dumps(doc))
            print(f"harness_pair: process {i + 1}: {side} in {doc['wall'][side][-1]:.1f} s",
                  flush=True)
            i += 1
    print(report(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
