"""Simulation (CPU only, not part of the suite or the gate): how many of a real job's A/B
comparisons the gate's engine decides within a budget, replayed on the fake clock of
tests/test_plan.py, for the engine of this tree and of an older revision side by side.

The comparisons are those of a gate report (gemm.regress/1, e.g. docs/probes or a job's
regress.json: each row's `effects` and `open` name what it was compared with), the rows as
the report has them (screen change, minimum effect, carried). Each process measures each
target as the row's recorded value times exp(true change + noise): the noise normal with the
sd of the series' calibrated prior (its own or borrowed; 0.5 % without one), the true change
0 for every row but those whose screen change is at least TRUE_PAST (default 10 %) past zero,
which keep it (ccdb051: 04 at 3001x2999x3003, -40 %, a real slowdown). A process costs the
engine's own guesses (gemm.track.plan: START_S, and each target from the record's speeds),
so the clock is the planner's model, not the GPU's.

    python3 ci/probes/flood_sim.py REPORT.json [CALIBRATION_DIR (default calibration)] [--old REV]
Environment: BUDGETS (default "46 94 180"), OVERTIME (60), SEED; OWN=N: as if every series
had its own calibration of N dof (the borrowed priors' sd, made the series' own): what
calibrating every tracked series on the runner would buy.
"""
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

from gemm.track import abreport, abrun, calibration, plan
from gemm.track.gate import GateConfig, Row, Verdict

TRUE_PAST = float(os.environ.get("TRUE_PAST", "0.10"))
FIELDS = ("kernel", "size", "metric", "n_hist", "centre", "new", "change", "bound")


def engine(rev: str | None):
    """(gemm.track.abrun, abreport) as this tree has them, or as `rev` had them (loaded
    beside them, that report reading that engine)."""
    if rev is None:
        return abrun, abreport

    def load(name: str, src: str):
        path = os.path.join(tempfile.mkdtemp(), f"{name}_old.py")
        open(path, "w").write(src)
        spec = importlib.util.spec_from_file_location(f"gemm.track._{name}_old", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod      # its dataclasses look themselves up there
        spec.loader.exec_module(mod)
        return mod
    src = {name: subprocess.run(["git", "show", f"{rev}:gemm/track/{name}.py"], check=True,
                                capture_output=True, text=True).stdout
           for name in ("abrun", "abreport", "abtest")}
    old = load("abrun", src["abrun"])
    old.abtest = load("abtest", src["abtest"])   # the helpers it had (series_of until 5ddec72)
    return old, load("abreport", src["abreport"].replace(
        "from .abrun import", "from ._abrun_old import"))


def comparisons(report: dict) -> list[tuple[Row, str]]:
    out = []
    for d in report["rows"]:
        against = [e.get("against") for e in d.get("effects") or []] + \
                  [o.get("against") for o in d.get("open") or []]
        against = [a for a in dict.fromkeys(against) if a]
        if not against:
            continue
        r = Row(*(d.get(f) for f in FIELDS), Verdict.CANDIDATE, reference=d.get("reference"),
                anchor=d.get("anchor"), anchor_change=d.get("anchor_change"),
                min_effect=d.get("min_effect"), carried=list(d.get("carried") or []))
        out += [(r, a) for a in against]
    return out


def fresh(comps):
    rows = {}
    for r, _ in comps:
        rows.setdefault(id(r), Row(**{k: getattr(r, k) for k in r.__dataclass_fields__
                                      if k not in ("effects", "open", "against")}))
    return [(rows[id(r)], a) for r, a in comps]


def simulate(mod, comps, cal, budget: float, rng: random.Random, report=abreport) -> Counter:
    now = [0.0]
    rows = {id(r): r for r, _ in comps}
    speeds = plan.speeds(list(rows.values()))
    costs = plan.Costs(speeds)
    truth = {(r.kernel, r.size, r.metric): (r.change if r.change is not None
                                            and abs(r.change) >= TRUE_PAST else 0.0, r)
             for r in rows.values()}

    def measure(arm, what):
        walls, out = {None: plan.START_S}, {}
        now[0] += plan.START_S
        for k, sizes in what.items():
            for s in sizes:
                t = costs.target_s(arm, (k, s)) / plan.MARGIN
                walls[(k, s)] = t
                now[0] += t
                for key in ((k, s, "tflops"), (k, s, "pct_of_cublas")):
                    if key not in truth:
                        continue
                    true, r = truth[key]
                    p = cal.prior(*key) if cal is not None else None
                    sd = p.sigma if p is not None else 0.005
                    shift = true if arm == "NEW" else 0.0
                    out[key] = (r.new or 1.0) * math.exp(shift + rng.gauss(0.0, sd))
        return out, walls

    real, mod.time = mod.time, SimpleNamespace(monotonic=lambda: now[0])
    try:                              # the engine's clock, faked for this replay only
        ab = mod.ABRun(comps, GateConfig(budget_s=budget, overtime_s=float(os.environ.get(
            "OVERTIME", "60"))), "NEW", measure, lambda s: None, cal, speeds)
        ab.moved, ab.unstable = (lambda: []), (lambda: None)   # no GPU step in this replay
        ab.run()
    finally:
        mod.time = real
    report.finish(ab)
    got = Counter(str(r.verdict) for r in rows.values())
    got["elapsed_s"] = round(now[0])
    big = [r for r in rows.values() if r.change is not None and r.change <= -TRUE_PAST]
    got["big drops DROP"] = sum(str(r.verdict) == "DROP" for r in big)
    got["big drops"] = len(big)
    return got


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    old = argv[argv.index("--old") + 1] if "--old" in argv else None
    if old in args:
        args.remove(old)
    report = json.load(open(args[0]))
    cal, why = calibration.load(args[1] if len(args) > 1 else "calibration",
                                report.get("machine", "h200"), now=None)
    if cal is None:
        print(f"no calibration: {why}; noise 0.5 % everywhere")
    elif os.environ.get("OWN"):
        dof, prior = int(os.environ["OWN"]), cal.prior
        cal.prior = lambda *key: (lambda p: p and replace(p, borrowed=False, dof=max(p.dof, dof)))(
            prior(*key))
        cal.borrowed = lambda *key: False
        print(f"as if every series had its own calibration ({dof} dof or more)")
    comps = comparisons(report)
    print(f"{len(comps)} comparisons over {len({id(r) for r, _ in comps})} series "
          f"({report.get('commit', '?')[:10]})")
    seed = int(os.environ.get("SEED", "1"))
    for budget in map(float, os.environ.get("BUDGETS", "46 94 180").split()):
        for label, rev in (("this tree", None), (f"engine of {old}", old)) if old else \
                (("this tree", None),):
            mod, report = engine(rev)
            got = simulate(mod, fresh(comps), cal, budget, random.Random(seed), report)
            print(f"budget {budget:>4.0f} s, {label:>20}: " + ", ".join(
                f"{k} {v}" for k, v in sorted(got.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
