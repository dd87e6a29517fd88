#!/usr/bin/env python3
"""The fleet's plumbing for .github/workflows/gpu.yml (standard library only: it also runs on
GitHub's hosted runners, where gemm is not installed).

  plan     the matrices, from the fleet's list (FLEET: a JSON list of GPU models, each "h200"
           or {"gpu": "h200", "runners": 2, "machine": "h200"}; the repository variable
           GEMM_FLEET, default in the workflow): per_commit (one entry per model), backfill
           (one per model and shard: SHARDS, else the model's runners), parallel (every
           runner: the backfill's max-parallel) and gpus; written as GITHUB_OUTPUT lines.
           GEMM_MACHINE (the old single-runner override) names a one-model fleet's machine.
  row      one machine's line of the fleet summary, from the job's step outcomes and its
           gate report (out/regress.json): out/fleet-row.json, in the job's artifact.
  summary  the commit's verdict over the fleet: a table with one row per machine (a model
           whose job left no row is a failed row), each machine's own summary folded below;
           exit 1 unless every machine's job passed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

DEFAULT_FLEET = [{"gpu": "h200", "runners": 1}]
GATING = ("setup", "gate", "record", "regress", "memcheck")   # publish's failure fails nothing
MARK = {"success": "✅", "failure": "❌", "cancelled": "⛔", "skipped": "⏭️"}


def fleet(text: str | None) -> list[dict]:
    data = json.loads(text) if text and text.strip() else DEFAULT_FLEET
    if not isinstance(data, list) or not data:
        raise ValueError("the fleet is a non-empty JSON list of GPU models")
    out, seen = [], set()
    for e in data:
        e = {"gpu": e} if isinstance(e, str) else dict(e)
        gpu = str(e.get("gpu") or "")
        if not gpu or not gpu.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"a fleet entry needs a runner label 'gpu' (letters, digits, -): {e}")
        if gpu in seen:
            raise ValueError(f"GPU model {gpu} is listed twice")
        seen.add(gpu)
        runners = int(e.get("runners", 1))
        if runners < 1:
            raise ValueError(f"{gpu}: runners must be at least 1")
        out.append({"gpu": gpu, "runners": runners, "machine": str(e.get("machine") or "")})
    return out


def plan(env: dict) -> dict:
    models = fleet(env.get("FLEET"))
    if env.get("GEMM_MACHINE") and len(models) == 1 and not models[0]["machine"]:
        models[0]["machine"] = env["GEMM_MACHINE"]
    shards = int(env.get("SHARDS") or 0)
    per_commit = [{"gpu": m["gpu"], "machine": m["machine"]} for m in models]
    backfill = [{"gpu": m["gpu"], "machine": m["machine"], "shard": i, "shards": n}
                for m in models for n in [shards or m["runners"]] for i in range(n)]
    return {"per_commit": per_commit, "backfill": backfill,
            "parallel": sum(m["runners"] for m in models), "gpus": [m["gpu"] for m in models]}


def row(args) -> dict:
    stages = dict(s.split("=", 1) for s in args.stage)
    try:
        rep = json.loads(Path(args.regress).read_text())
    except (OSError, ValueError):
        rep = {}
    failed = [s for s in GATING if stages.get(s) in ("failure", "cancelled")]
    if stages.get("regress") != "success" and "regress" not in failed:
        failed.append("regress")    # no verdict is no pass
    return {"gpu": args.gpu, "machine": args.machine, "device": args.device,
            "stages": stages, "counts": rep.get("counts") or {}, "gate_exit": rep.get("exit"),
            "passed": not failed, "failed": failed}


def summary(artifacts: Path, gpus: list[str], sha: str, max_chars: int = 60000) -> tuple[str, bool]:
    rows = {}
    for f in sorted(Path(artifacts).glob("**/fleet-row.json")):
        try:
            r = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        r["_dir"] = f.parent
        rows[r.get("gpu")] = r
    lines = [f"## GPU fleet: commit `{sha[:10]}`", "",
             "| GPU model | machine | GPU | " + " | ".join(GATING) + " | gate verdicts | result |",
             "|---|---|---|" + "---|" * len(GATING) + "---|---|"]
    ok_all = True
    for gpu in list(gpus) + sorted(set(rows) - set(gpus)):
        r = rows.get(gpu)
        if r is None:
            ok_all = False
            lines.append(f"| {gpu} | ? | | " + " | ".join([""] * len(GATING))
                         + " | | ❌ no report (the job did not run to its end; see its log) |")
            continue
        ok_all &= bool(r.get("passed"))
        st = r.get("stages") or {}
        counts = ", ".join(f"{n} {v}" for v, n in sorted((r.get("counts") or {}).items()))
        res = "✅ passed" if r.get("passed") else f"❌ failed ({', '.join(r.get('failed') or [])})"
        lines.append(f"| {gpu} | `{r.get('machine') or '?'}` | {r.get('device') or ''} | "
                     + " | ".join(f"{MARK.get(st.get(s), '')} {st.get(s, '')}".strip()
                                  for s in GATING) + f" | {counts} | {res} |")
    lines += ["", "**The commit passes: every machine's gate passed** ✅" if ok_all else
              "**The commit fails: not every machine's gate passed** ❌", ""]
    for gpu in gpus:
        r = rows.get(gpu)
        md = r and (r["_dir"] / "summary.md")
        if md and md.is_file():
            lines += [f"<details><summary>{gpu} (<code>{r.get('machine')}</code>): the job's "
                      "summary</summary>", "", md.read_text().strip(), "", "</details>", ""]
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[:max_chars - 80] + "\n\n(cut: each job's artifact has its whole summary)\n"
    return text, ok_all


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ci/fleet.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("plan")
    r = sub.add_parser("row")
    r.add_argument("--gpu", required=True)
    r.add_argument("--machine", default="")
    r.add_argument("--device", default="")
    r.add_argument("--stage", action="append", default=[], help="NAME=OUTCOME")
    r.add_argument("--regress", default="out/regress.json")
    r.add_argument("--out", default="out/fleet-row.json")
    s = sub.add_parser("summary")
    s.add_argument("--artifacts", required=True)
    s.add_argument("--gpus", required=True, help="JSON list: the models that should report")
    s.add_argument("--sha", default=os.environ.get("GITHUB_SHA", ""))
    s.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.cmd == "plan":
        try:
            out = plan(dict(os.environ))
        except (ValueError, TypeError) as exc:
            print(f"fleet: {exc}", file=sys.stderr)
            return 2
        print("\n".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in out.items()))
        return 0
    if args.cmd == "row":
        doc = row(args)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(doc, indent=1))
        print(json.dumps(doc))
        return 0
    text, ok = summary(Path(args.artifacts), json.loads(args.gpus), args.sha)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
