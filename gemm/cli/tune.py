"""`gemm tune`: search a kernel's constants on this GPU and write the winners per tuning
bucket (gemm.core.tuning)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..core import registry
from .common import UsageError, _need_gpu


def add_arguments(p) -> None:
    p.add_argument("kernel", help="the kernel (name or unique prefix) whose `tune` space is "
                   "searched, e.g. 10_autotuned")
    p.add_argument("--out", default=None, help="directory (default: kernels/tuned)")


def run(args) -> int:
    import time
    import tomllib
    from ..core import tuning
    from ..measure.facts import machine_info
    from ..measure.tune import tune
    try:
        spec = registry.get(args.kernel)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not spec.tune:
        raise UsageError(f"{spec.name} declares no search space (`tune` in kernels.toml)")
    _need_gpu()
    gpu = machine_info()["machine"]
    out = Path(args.out) if args.out else tuning.tuned_dir()
    out.mkdir(parents=True, exist_ok=True)
    res = tune(spec, log=lambda s: print(s, file=sys.stderr, flush=True))
    res.update(gpu=gpu, date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    log_path = out / f"{gpu}-{spec.name}.json"
    log_path.write_text(json.dumps(res, indent=1))
    path = out / f"{gpu}.toml"
    tables = {}
    if path.exists():
        with open(path, "rb") as f:
            tables = tomllib.load(f)
    missing = [c for c, _, _ in tuning.TUNING_BUCKETS if c not in res["winners"]]
    if missing:   # keep the table as it was: a failed search must not erase earlier winners
        print(f"gemm tune: no candidate was accepted for {', '.join(missing)}; "
              f"{path} left as it was (search log: {log_path})", file=sys.stderr)
        return 1
    try:
        tables[spec.name] = tuning.keep_fixed(spec, tables.get(spec.name, {}), res["winners"])
    except ValueError as exc:
        print(f"gemm tune: a winner with the constants kept from {path} is not a valid build "
              f"({exc}); {path} left as it was (search log: {log_path})", file=sys.stderr)
        return 1
    path.write_text(tuning.render_table(gpu, tables, f"Search logs: {gpu}-<kernel>.json."))
    from .tables import table
    rows = [[bucket, w["size"], " ".join(f"{k}={v}" for k, v in w["defines"].items()),
             f"{w['tflops']:.2f}", f"{w['pct_of_cublas']:.1f} %"]
            for bucket, w in tables[spec.name].items()]
    ok = sum(r["status"] == "ok" for r in res["candidates"])
    print(f"{spec.name} on {gpu}: {len(res['candidates'])} candidates, {ok} accepted, "
          f"{res['wall_s']:.0f} s; winners written to {path}, search log {log_path}")
    print(table(["bucket", "size", "constants", "TFLOPS", "% cuBLAS"], rows, "llllr"))
    return 0 if res["winners"] else 1
