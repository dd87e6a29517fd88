"""Which records the clock floor dropped samples of, per kernel, in recorded sweep documents
(gemm.measure/1, the record's sweeps/*.json): the evidence behind gemm.record.migrate's floor
migration. Usage: python3 ci/probes/floor_drops.py SWEEP.json...
"""
import json
import sys
import time
from collections import defaultdict


def main(paths: list[str]) -> int:
    total = defaultdict(lambda: [0, 0, 0])      # kernel -> records, records with drops, drops
    print("| sweep started (UTC) | GPU bus | records | with a dropped sample |")
    print("| --- | --- | --- | --- |")
    for p in paths:
        doc = json.load(open(p))
        hit = 0
        for r in doc["records"]:
            drops = sum((r.get(k) or {}).get("throttled", 0)
                        for k in ("kernel_time", "baseline_time"))
            t = total[r["kernel"]]
            t[0] += 1
            t[1] += bool(drops)
            t[2] += drops
            hit += bool(drops)
        started = time.strftime("%Y-%m-%d %H:%M", time.gmtime(doc.get("started", 0)))
        print(f"| {started} | {doc['device'].get('pci_bus_id')} | {len(doc['records'])} | {hit} |")
    print()
    print("| kernel (record) | records | with a dropped sample | samples dropped |")
    print("| --- | --- | --- | --- |")
    for k in sorted(total):
        n, w, d = total[k]
        print(f"| {k} | {n} | {w} | {d} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
