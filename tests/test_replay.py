"""The gate's decisions replayed on CPU and pinned to a golden digest
(tests/data/replay_golden.json), so that a refactor of gemm/track can be shown to decide
exactly as before (docs/gate-history.md, "The size of gemm/track").

What is replayed, on the recorded inputs as committed at the golden's `data_commit` (results/,
verdicts/h200, calibration/h200.json, extracted with git archive: later recordings do not
move it):

- regress: `gemm regress --no-confirm` (gemm.track.judge.judge, the screen, the carry, the
  code-changed rule and the kept verdicts) on every recorded commit under the default
  settings, on the newest commits plus a sample of older ones under five other settings, and
  on the newest two with their runs of 17 and 18 re-recorded 1 % slower (kept verdicts void);
- kept: every A/B round set kept in verdicts/h200 (an effect's `values`) through the mean rule
  (with and without the prior, with and without the pairs test), the trimmed rule (Yuen), the
  gate's choice of rule, the A/A control (over minimum effects around the series' own),
  overtime's reach, rounds_needed and effect_for;
- calibration: each series' prior, borrowed or own, its robust prior and minimum effect;
- simulated: seeded A/Bs through gemm.track.confirm.decide on a fake clock (stand-in arms whose
  values depend only on the arm, target and process: budgets, overtime, heavy tails, a GPU
  step, a noisier new code, failures, kept rounds).

Each case is a digest of the decision (verdicts, series, floats to 6 significant digits;
notes and other text apart, in their own digest). After an intended change of a decision:

    python3 -m tests.test_replay --write     # rewrites the golden (the same replay)

and say in the commit why the digests moved. `--check` runs the comparison without pytest.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, is_dataclass
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

from .stubrepo import git

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "replay_golden.json"
MACHINE = "h200"
INPUTS = ("results", f"verdicts/{MACHINE}", f"calibration/{MACHINE}.json")
NOTE_KEYS = frozenset({"note", "anchor_source", "calibration_note", "empty", "why", "log"})

# the settings replayed (gemm regress's options as GateConfig / Request fields); "default" on
# the newest ALL recorded commits (every one today) and every 4th older one, the others on the
# newest NEWEST commits and every STRIDE-th older one
SETTINGS = {
    "default": ({}, {}),
    "tight": ({"window": 5, "min_effect": {"large": 0.005, "medium": 0.02, "small": 0.03}}, {}),
    "wide-strict": ({"min_effect": {"large": 0.02, "medium": 0.05, "small": 0.1},
                     "alpha": 1e-2, "max_rounds": 5, "strict": True, "carry_commits": 2}, {}),
    "no-anchor": ({"window": 3}, {"use_anchor": False}),
    "uncalibrated": ({"robust": False, "max_rounds": 12, "alpha": 1e-4}, {"calibration": None}),
    "narrowed": ({}, {"kernels": ("07", "14"), "sizes": ("1000", "2048", "4096", "8192")}),
    # the newest runs of 17 and 18 re-recorded 1 % slower: their kept verdicts no longer apply
    "rerecorded": ({}, {"results": "results-rerecorded"}),
}
RERECORDED = 0.99, ("bench_gemm.Kernel_17_", "bench_gemm.Kernel_18_")
ALL, NEWEST, STRIDE = 80, 6, 8
AA_SCALES = (0.5, 0.75, 1, 1.5, 2, 3)   # the kept A/Bs' A/A control at these x minimum effect
SIMULATED = 30


# --- canonical digests ------------------------------------------------------------------------

def canon(x):
    """x as plain JSON with floats as 6 significant digits (text), enums as their value."""
    if isinstance(x, Enum):
        x = x.value
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return "0" if x == 0 else f"{x:.6g}"
    if is_dataclass(x) and not isinstance(x, type):
        x = asdict(x)
    if isinstance(x, dict):
        return {str(canon(k)): canon(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        items = [canon(v) for v in x]
        return sorted(items, key=repr) if isinstance(x, (set, frozenset)) else items
    return repr(x)


def split_notes(x):
    """(x without its text fields, the text fields) of a canonical document."""
    if isinstance(x, dict):
        keep, notes = {}, {}
        for k, v in x.items():
            if k in NOTE_KEYS:
                notes[k] = v
            else:
                keep[k], sub = split_notes(v)
                if sub not in (None, {}, []):
                    notes[k] = sub
        return keep, notes
    if isinstance(x, list):
        pairs = [split_notes(v) for v in x]
        subs = [s for _, s in pairs]
        return [k for k, _ in pairs], (subs if any(s not in (None, {}, []) for s in subs) else None)
    return x, None


def unplaced(doc, data: Path):
    """The document with the inputs' temporary directory named as "<inputs>" (notes say paths)."""
    return json.loads(json.dumps(doc).replace(str(data), "<inputs>"))


def digest(x, n: int = 16) -> str:
    text = json.dumps(x, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:n]


# --- the pinned inputs --------------------------------------------------------------------------

def data_commit() -> str:
    """The newest commit that changed the replay's inputs (what --write pins)."""
    return git(ROOT, "log", "-1", "--format=%H", "--", *INPUTS)


@contextlib.contextmanager
def pinned(commit: str):
    """The inputs as committed at `commit`, extracted under build/ (inside the checkout, so
    that gemm.store.history orders the runs by git as `gemm regress` does)."""
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="replay-", dir=ROOT / "build") as tmp:
        archive = subprocess.run(["git", "archive", "--format=tar", commit, *INPUTS],
                                 cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        (Path(tmp) / "no-calibration").mkdir()
        yield Path(tmp)


@contextlib.contextmanager
def fixed_world(now: float):
    """The calibration's age read at `now`; no NVML (the stand-in arms run on no GPU); the
    recorded runs and kept verdicts read once per path (the readers as they are, memoized)."""
    import gemm.machine.nvml as nvml
    import gemm.store.calibration as calfile
    import gemm.store.history as history
    import gemm.store.verdicts as verdicts
    import gemm.track.judge  # noqa: F401  (its names are patched below where they are bound)
    import gemm.track.plan as plan

    runs_memo, kept_memo = {}, {}
    real_runs, real_kept = history.load_runs, verdicts.load

    def load_runs(results_dir, machine):
        key = (str(Path(results_dir).resolve()), machine)
        if key not in runs_memo:
            runs_memo[key] = real_runs(results_dir, machine)
        return runs_memo[key]

    def load_kept(root, machine, commit):
        key = (str(Path(root).resolve()), machine, commit)
        if key not in kept_memo:
            kept_memo[key] = real_kept(root, machine, commit)
        return {k: dict(v) for k, v in kept_memo[key].items()}

    def no_nvml():
        raise RuntimeError("no NVML in the replay")

    clock = SimpleNamespace(time=lambda: now, strptime=time.strptime, gmtime=time.gmtime,
                            strftime=time.strftime)
    with contextlib.ExitStack() as stack:
        for mod in [m for name, m in list(sys.modules.items())
                    if name == "gemm" or name.startswith("gemm.")]:
            for attr, real, fake in (("load_runs", real_runs, load_runs),
                                     ("load", real_kept, load_kept)):
                if getattr(mod, attr, None) is real:
                    stack.enter_context(mock.patch.object(mod, attr, fake))
        stack.enter_context(mock.patch.object(calfile, "time", clock))
        stack.enter_context(mock.patch.object(nvml, "_nvml", no_nvml))
        # tests/conftest.py zeroes the planner's nvcc guess for the other tests; not here
        stack.enter_context(mock.patch.object(plan, "COMPILE_S", COMPILE_S))
        yield


def _real_compile_s() -> float:
    import gemm.track.plan as plan
    return plan.COMPILE_S


COMPILE_S = _real_compile_s()   # read at import, before any fixture patches it


# --- regress: gemm regress --no-confirm on the recorded commits --------------------------------

def anchor_at(commit: str) -> str | None:
    """The anchor the commit's own tree named (anchor.toml), as its job judged it."""
    import tomllib
    try:
        text = git(ROOT, "show", f"{commit}:anchor.toml")
    except subprocess.CalledProcessError:
        return None
    return str(tomllib.loads(text).get("commit") or "") or None


def regress_cases(commits: list[str]) -> list[tuple[str, str]]:
    """(commit, setting) replayed: the newest commits always (the comment above SETTINGS)."""
    def sample(newest: int, stride: int) -> set:
        return set(commits[-newest:]) | set(commits[:-newest][::-1][::stride])
    every, some = sample(ALL, 4), sample(NEWEST, STRIDE)
    return [(c, s) for s in SETTINGS for c in commits
            if c in {"default": every, "rerecorded": set(commits[-2:])}.get(s, some)]


def rerecord(data: Path, commits: list[str], factor: float, kernels: tuple) -> None:
    """A copy of the results, results-rerecorded, with the runs of `commits` recorded again
    `factor` times as fast (the TFLOPS and % of cuBLAS of the benchmarks named `kernels*`)."""
    import shutil
    src, dst = data / "results", data / "results-rerecorded"
    shutil.copytree(src, dst)
    for path in (dst / MACHINE).glob("*.json"):
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("commit_hash") not in commits:
            continue
        col = doc["result_columns"].index("result")
        for name, row in doc["results"].items():
            if name.startswith(kernels) and name.endswith(
                    ("track_tflops", "track_pct_of_cublas")):
                row[col] = json.loads(json.dumps(row[col]),
                                      parse_float=lambda x: float(x) * factor)
        path.write_text(json.dumps(doc))


def replay_regress(data: Path) -> dict:
    """Every case of regress_cases judged; on two processes where there are two cores (forked:
    the replay's patches come along), as the cases are independent."""
    import concurrent.futures
    import multiprocessing
    import os
    from gemm.store.history import load_runs

    runs, _ = load_runs(data / "results", MACHINE)
    commits = list(dict.fromkeys(r.commit for r in runs))
    anchors = {c: anchor_at(c) for c in commits}
    cases = regress_cases(commits)
    rerecord(data, [c for c, s in cases if s == "rerecorded"], *RERECORDED)
    workers = min(2, os.cpu_count() or 1)
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return _judged(data, cases, anchors)
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("fork")) as pool:
        parts = list(pool.map(_judged, [data] * workers,
                              [cases[i::workers] for i in range(workers)], [anchors] * workers))
    got = {k: v for part in parts for k, v in part.items()}
    return {f"{c[:10]}/{s}": got[f"{c[:10]}/{s}"] for c, s in cases}


def _judged(data: Path, cases: list, anchors: dict) -> dict:
    """`gemm regress --no-confirm` on each (commit, setting), as its digests."""
    from gemm.track.gate import GateConfig
    from gemm.track.judge import Request, judge

    out = {}
    for commit, name in cases:
        cfg_kw, req_kw = SETTINGS[name]
        req_kw = dict(req_kw)
        cal = req_kw.pop("calibration", "calibration")
        results = req_kw.pop("results", "results")
        cal_dir = data / ("no-calibration" if cal is None else "calibration")
        anchor = anchors[commit]
        if not anchor:
            req_kw.setdefault("use_anchor", False)
        req = Request(results=str(data / results), machine=MACHINE, commit=commit,
                      config=GateConfig(confirm=False, **cfg_kw), anchor=anchor,
                      calibration=str(cal_dir), repo=str(ROOT),
                      verdicts=str(data / "verdicts"), same_build=None, **req_kw)
        rep = judge(req, log=lambda line: None)
        doc = unplaced(canon(rep.to_json()), data)
        doc.pop("config", None)    # the settings, not a decision (the case's name says them)
        decision, notes = split_notes(doc)
        kernels = {}
        for row in decision.get("rows") or []:
            kernels.setdefault(row.get("kernel"), []).append(row)
        out[f"{commit[:10]}/{name}"] = {
            "exit": doc.get("exit"), "counts": doc.get("counts") or {},
            "decision": digest(decision), "notes": digest(notes),
            "kernels": {k: digest(v, 6) for k, v in sorted(kernels.items())},
            "_rows": decision.get("rows") or []}
    return out


# --- kept: every kept A/B's rounds through both rules and the helpers ------------------------

def _try(fn):
    try:
        return canon(fn())
    except Exception as exc:   # noqa: BLE001  (an error is a replayed outcome too)
        return f"error {type(exc).__name__}"


def replay_kept(data: Path, cal) -> dict:
    from gemm.store import verdicts
    from gemm.track import abrun, decision
    from gemm.track.gate import GateConfig

    cfg = GateConfig()
    out = {}
    for path in sorted((data / "verdicts" / MACHINE).glob("*.json")):
        commit = path.stem
        kept = verdicts.load(data / "verdicts", MACHINE, commit)
        with_values = [(key, e) for key, row in sorted(kept.items())
                       for e in row.get("effects") or [] if e.get("values")]
        family = decision.family_size(max(1, len(with_values)), cfg.min_rounds, cfg.max_rounds)
        for n, (key, e) in enumerate(with_values):
            vals = e["values"]
            refs, news, ks = abrun.carried(vals)
            complete = bool(refs)
            if not complete:     # as kept, an incomplete or failed round included
                first, last = vals.get("first") or [], vals.get("last") or []
                new = vals.get("new") or []
                refs = [list(p) for p in zip(first, last)]
                news = [new[2 * j:2 * j + 2] for j in range(len(refs))]
                ks = list(vals.get("k") or [])
            prior, robust = cal.prior(*key), cal.robust_prior(*key)
            own = decision.Noise(prior.sigma, prior.dof) if prior is not None else None
            delta = cfg.effect_for(key[1], prior)
            mean = _try(lambda: decision.effect_rounds(refs, news, delta, cfg.alpha, family,
                                                       prior, ks))
            res = {
                "complete": complete, "delta": canon(delta), "mean": mean,
                "mean_no_prior": _try(lambda: decision.effect_rounds(
                    refs, news, delta, cfg.alpha, family, None)),
                "mean_no_pairs": _try(lambda: decision.effect_rounds(
                    refs, news, delta, cfg.alpha, family, prior)),
                "trimmed": _try(lambda: decision.effect_trimmed(
                    refs, news, delta, cfg.alpha, family, robust)),
                "trimmed_own": _try(lambda: decision.effect_trimmed(
                    refs, news, delta, cfg.alpha, family, own)),
                "gate": _try(lambda: cfg.decide(refs, news, delta, family, prior, robust, ks)),
                "gate_mean_rule": _try(lambda: GateConfig(robust=False).decide(
                    refs, news, delta, family, prior, robust, ks)),
            }
            # the A/A control at the A/B's family and alone, over minimum effects around the
            # series' own (its margin, a quarter of it, is where a moved GPU is told apart)
            for f in (family, 1):
                for scale in AA_SCALES:
                    res[f"aa_{f}_{scale}"] = _try(lambda: decision.aa_stable(
                        [a for a, _ in refs], [b for _, b in refs], delta * scale, cfg.alpha, f,
                        prior, new_pairs=news, k=ks))
            rules = {"mean": lambda: decision.effect_rounds(refs, news, delta, cfg.alpha,
                                                            family, prior, ks),
                     "trimmed_own": lambda: decision.effect_trimmed(refs, news, delta, cfg.alpha,
                                                                    family, own)}
            for rule, effect in rules.items():
                res[f"{rule}_helpers"] = _try(lambda: _helpers(effect(), delta, family, prior))
            label = "/".join([commit[:10], *key, str(e.get("against"))[:10], str(n)])
            out[label] = {"digest": digest(res, 12), "_detail": res}
    return out


def _helpers(e, delta: float, family: int, prior) -> dict | None:
    """What the A/B asks of an effect besides its verdict: overtime's reach (at the round cap
    and at 3), the verdict of one round, the rounds this noise needs."""
    from gemm.track import decision
    from gemm.track.gate import GateConfig
    if e is None:
        return None
    cfg = GateConfig()
    prior_dof = 0 if prior is None else prior.dof_for(e.n_new // 2 - 1)
    return {"reachable": decision.reachable(e, delta, cfg.max_rounds, cfg.alpha, family),
            "reachable_3": decision.reachable(e, delta, 3, cfg.alpha, family),
            "one_round": decision.classify(e.lo, e.hi, delta / 2, 1),
            "rounds_needed": decision.rounds_needed(e.sigma, delta, cfg.alpha, family, prior_dof)
            if e.sigma and e.sigma == e.sigma else None}


# --- calibration: each series' prior as the gate reads it -------------------------------------

def replay_calibration(data: Path, cal) -> dict:
    from gemm.store.history import load_runs
    from gemm.track.gate import GateConfig

    runs, _ = load_runs(data / "results", MACHINE)
    keys = {(k.target, k.size, k.metric) for k in runs[-1].points
            if not k.baseline and k.metric in ("tflops", "pct_of_cublas")}
    keys |= set(cal.noise)
    cfg, out = GateConfig(), {}
    for key in sorted(keys):
        res = {"prior": _try(lambda: cal.prior(*key)),
               "robust": _try(lambda: cal.robust_prior(*key)),
               "borrowed": _try(lambda: cal.borrowed(*key)),
               "min_effect": _try(lambda: cfg.effect_for(key[1], cal.prior(*key))),
               "min_effect_5": _try(lambda: GateConfig(max_rounds=5, alpha=1e-2).effect_for(
                   key[1], cal.prior(*key)))}
        out["/".join(key)] = {"digest": digest(res, 12), "_detail": res}
    return out


# --- simulated: seeded A/Bs through confirm.decide on a fake clock ---------------------------

class World:
    """Stand-in arms on a fake clock: a process takes START_S plus each target's seconds; its
    values depend only on (scenario, arm, target, that arm's process count for the target) and
    on the fake time it starts at (a GPU step, a drift), never on the order asked."""
    START_S = 6.0

    def __init__(self, spec: dict):
        self.spec, self.now, self.calls, self.seen = spec, 0.0, 0, {}

    def level(self, arm, kernel, size, metric, n, t) -> float | None:
        s = self.spec
        tgt = s["targets"][f"{kernel}@{size}"]
        rng = random.Random(f"{s['seed']}|{arm}|{kernel}|{size}|{n}")
        z_kernel, z_base = rng.gauss(0, 1), rng.gauss(0, 1)
        slow_state = rng.random() < s["tail_p"]
        if arm == "NEW" and tgt.get("fail_new") is not None and n >= tgt["fail_new"]:
            return None
        if arm != "NEW" and tgt.get("fail_ref") == arm and n >= 2:
            return None
        # the kernel's time moves both metrics; the GPU's step and drift only its TFLOPS (the
        # cuBLAS of % of cuBLAS, timed in turn, moves with it)
        x = (math.log1p(tgt["effect"]) if arm == "NEW" else 0.0) + (
            math.log(1 - s["tail"]) if slow_state else 0.0)
        scale = s["new_noise"] if arm == "NEW" else 1.0
        if metric == "tflops":
            x += z_kernel * tgt["sd"] * scale + s["drift"] * t + (
                math.log1p(s["step"]) if t >= s["step_at"] else 0.0)
            return tgt["tflops"] * math.exp(x)
        return tgt["pct"] * math.exp(x + z_base * tgt["sd_pct"] * scale)

    def measure(self, tree, series, env=None, walls=None, clocks=None, docs=None, **kw):
        from gemm.track import abtest
        arm = str(tree)
        self.calls += 1
        if self.calls == self.spec["break_at"]:
            raise abtest.ABError(f"a stand-in arm broke at call {self.calls}")
        t0, out, spent = self.now, {}, 0.0
        for kernel, sizes in series.items():
            for size in sizes:
                tgt = self.spec["targets"][f"{kernel}@{size}"]
                n = self.seen[(arm, kernel, size)] = self.seen.get((arm, kernel, size), 0) + 1
                if arm == "NEW" and tgt.get("missing_at") == n:
                    continue
                for metric in ("tflops", "pct_of_cublas"):
                    out[(kernel, size, metric)] = self.level(arm, kernel, size, metric, n, t0)
                spent += tgt["seconds"]
                if walls is not None:
                    walls[(kernel, size)] = tgt["seconds"]
        if walls is not None:
            walls[None] = self.START_S
        self.now += self.START_S + spent
        return out


def scenarios(cal, newest) -> list[dict]:
    """SIMULATED seeded scenarios over the newest run's series (its values, the calibration's
    noise): what is flagged against what, the true effects, the GPU, the settings."""
    targets = sorted({(k.target, k.size) for k, p in newest.points.items()
                      if not k.baseline and k.metric == "tflops" and p.value
                      and math.isfinite(p.value)})
    heavy = sorted({(k, s) for k, s, m in cal.noise if cal.heavy_tailed(k, s, m)} & set(targets))
    out = []
    for i in range(SIMULATED):
        rng = random.Random(f"replay-sim-{i}")
        picked = rng.sample(targets, rng.randint(1, 6))
        if i % 3 == 0 and heavy:    # a series the trimmed rule decides (its heavy tail)
            extra = rng.choice(heavy)
            picked = [extra] + [t for t in picked if t != extra][:4]
        spec = {"seed": f"sim{i}", "targets": {}, "rows": [],
                "tail_p": rng.choice([0.0, 0.0, 0.0, 0.1, 0.25]), "tail": rng.choice([0.02, 0.06]),
                "new_noise": rng.choice([1.0] * 5 + [4.0]),
                "drift": rng.choice([0.0, 0.0, 2e-5, -3e-5]),
                "step": rng.choice([0.0] * 4 + [-0.03, 0.02, -0.006, 0.004]),
                "step_at": rng.uniform(20, 400),
                "break_at": rng.choice([0] * 14 + [rng.randint(2, 12)]),
                "config": {"budget_s": rng.choice([120.0, 180.0, 180.0, 600.0, 1200.0,
                                                  round(rng.uniform(30.0, 300.0), 1)]),
                           "overtime_s": rng.choice([0.0, 60.0, 60.0, 200.0]),
                           "max_rounds": rng.choice([8, 8, 8, 5]),
                           "min_rounds": rng.choice([1, 1, 1, 2]),
                           "robust": rng.random() < 0.8},
                "calibrated": rng.random() < 0.85}
        for j, (kernel, size) in enumerate(picked):
            tf = newest.points[next(k for k in newest.points if not k.baseline and
                                    (k.target, k.size, k.metric) == (kernel, size, "tflops"))]
            pk = next((k for k in newest.points if not k.baseline and
                       (k.target, k.size, k.metric) == (kernel, size, "pct_of_cublas")), None)
            pct = newest.points[pk].value if pk is not None else None
            prior, prior_pct = cal.prior(kernel, size, "tflops"), cal.prior(kernel, size,
                                                                            "pct_of_cublas")
            wider = rng.choice([1.0] * 4 + [2.0])
            tgt = {"tflops": tf.value, "pct": pct if pct and pct == pct else 50.0,
                   "sd": (prior.sigma if prior is not None else 0.004) * wider,
                   "sd_pct": (prior_pct.sigma if prior_pct is not None else 0.004) * wider,
                   "effect": rng.choice([0.0, 0.0, -0.005, -0.01, -0.02, -0.05, 0.02, 0.04,
                                         -0.3]),
                   "seconds": round(rng.uniform(0.5, 4.0), 2)}
            u = rng.random()
            if j == 0 and i % 3 == 0 and heavy:   # heavy-tailed, measured to its rule
                tgt["effect"] = rng.choice([0.0, -0.01, -0.02])
                spec.update(tail_p=0.1, tail=0.01, break_at=0, calibrated=True)
                spec["config"].update(budget_s=1200.0, robust=True)
            elif u < 0.05:
                tgt["fail_new"] = rng.randint(1, 3)
            elif u < 0.09:
                tgt["fail_ref"] = "REF"
            elif u < 0.13:
                tgt["missing_at"] = rng.randint(1, 3)
            spec["targets"][f"{kernel}@{size}"] = tgt
            metrics = ["tflops", "pct_of_cublas"] if rng.random() < 0.8 else [
                rng.choice(["tflops", "pct_of_cublas"])]
            for metric in metrics:
                # past the screen (half the minimum effect, 0.5-2.5 %) mostly, the anchor's too
                past = rng.random() < 0.8
                row = {"kernel": kernel, "size": size, "metric": metric,
                       "change": -rng.uniform(0.025, 0.06) if past else -rng.uniform(0, 0.004),
                       "anchor": rng.random() < 0.4,
                       "anchor_change": -rng.uniform(0.0, 0.05),
                       "code_changed": rng.random() < 0.2, "carried": rng.random() < 0.15,
                       "identical": rng.random() < 0.05}
                spec["rows"].append(row)
        if i % 10 == 5:     # an arm that breaks off (abtest.ABError) mid-A/B
            spec["break_at"] = rng.randint(3, 10)
        out.append(spec)
    return out


def _sim_rows(spec, cfg, cal):
    from gemm.track.gate import Row, Verdict
    rows = []
    for r in spec["rows"]:
        tgt = spec["targets"][f"{r['kernel']}@{r['size']}"]
        key = (r["kernel"], r["size"], r["metric"])
        new = tgt["tflops"] if r["metric"] == "tflops" else tgt["pct"]
        effect = cfg.effect_for(r["size"], cal.prior(*key) if cal is not None else None)
        row = Row(kernel=r["kernel"], size=r["size"], metric=r["metric"], n_hist=10,
                  centre=new / (1 + r["change"]), new=new, change=r["change"],
                  bound=effect / 2, verdict=Verdict.CANDIDATE,
                  reference="IDENTICAL" if r["identical"] else "REF",
                  ref_value=new / (1 + r["change"]), min_effect=effect,
                  code_changed=r["code_changed"])
        if r["anchor"] or r["carried"]:
            row.anchor, row.anchor_value = "ANC", new / (1 + r["anchor_change"])
            row.anchor_change = r["anchor_change"]
        if r["carried"]:
            row.carried = ["OLD"]
            rng = random.Random(f"{spec['seed']}|kept|{'/'.join(key)}")
            k = rng.randint(1, 3)
            row.carried_rounds = {"ANC": {
                "first": [new * math.exp(rng.gauss(0, tgt["sd"])) for _ in range(k)],
                "last": [new * math.exp(rng.gauss(0, tgt["sd"])) for _ in range(k)],
                "new": [new * (1 + tgt["effect"]) * math.exp(rng.gauss(0, tgt["sd"]))
                        for _ in range(2 * k)],
                "k": [3] * k}}
        rows.append(row)
    return rows


def replay_simulated(data: Path, cal) -> dict:
    from gemm.store.history import load_runs
    from gemm.track import abrun, abtest, confirm, codeid
    from gemm.track.gate import GateConfig

    runs, _ = load_runs(data / "results", MACHINE)
    out = {}
    for spec in scenarios(cal, runs[-1]):
        world = World(spec)
        cfg = GateConfig(**spec["config"])
        used = cal if spec["calibrated"] else None
        rows = _sim_rows(spec, cfg, used)
        logs: list[str] = []

        @contextlib.contextmanager
        def trees(repo, commits):
            yield {c: c for c in dict.fromkeys(commits)}

        real_same = codeid.same_code

        def same_code(repo, older, newer, kernel, same_build=None):
            # "IDENTICAL" stands for a commit of the same measured code (git would say so)
            return older == "IDENTICAL" or real_same(repo, older, newer, kernel, same_build)

        with contextlib.ExitStack() as stack:
            stack.enter_context(mock.patch.object(abtest, "measure", world.measure))
            stack.enter_context(mock.patch.object(abtest, "trees", trees))
            stack.enter_context(mock.patch.object(
                abrun, "time", SimpleNamespace(monotonic=lambda: world.now)))
            stack.enter_context(mock.patch.object(confirm, "same_code", same_code))
            measured = confirm.decide(rows, cfg, "NEW", repo=str(data), kept=None,
                                      log=logs.append, probe=lambda: (True, ""),
                                      calibration=used, same_build=None)
        doc = unplaced(canon({"rows": [asdict(r) for r in rows], "measured": len(measured),
                              "clock": world.now, "calls": world.calls, "log": logs}), data)
        decision, notes = split_notes(doc)
        counts: dict = {}
        for r in rows:
            counts[str(r.verdict)] = counts.get(str(r.verdict), 0) + 1
        out[spec["seed"]] = {"decision": digest(decision), "notes": digest(notes),
                             "counts": counts, "_rows": decision["rows"]}
    return out


# --- the whole replay -------------------------------------------------------------------------

def replay(commit: str) -> dict:
    from gemm.track import calibration

    now = float(git(ROOT, "show", "-s", "--format=%ct", commit))
    with pinned(commit) as data, fixed_world(now):
        doc = json.loads((data / "calibration" / f"{MACHINE}.json").read_text())
        cal = calibration.of_doc(MACHINE, doc)
        return {"data_commit": commit, "now": now,
                "regress": replay_regress(data), "kept": replay_kept(data, cal),
                "calibration": replay_calibration(data, cal),
                "simulated": replay_simulated(data, cal)}


SECTIONS = ("regress", "kept", "calibration", "simulated")


def golden_of(result: dict) -> dict:
    """What the golden keeps of a replay: no details (the `_` keys), only their digests."""
    doc = {"about": "tests/test_replay.py's golden; regenerate with "
                    "`python3 -m tests.test_replay --write` after an intended decision change",
           "data_commit": result["data_commit"], "now": result["now"]}
    for s in SECTIONS:
        doc[s] = {case: {k: v for k, v in got.items() if not k.startswith("_")}
                  for case, got in result[s].items()}
    doc["sizes"] = {s: len(result[s]) for s in SECTIONS}
    return doc


def differences(golden: dict, result: dict, section: str, field: str = "decision",
                show: int = 5) -> list[str]:
    """Lines naming the first differing cases of a section (empty: none differ)."""
    want, got = golden.get(section) or {}, result[section]
    key = field if section in ("regress", "simulated") else "digest"
    bad = [c for c in sorted(set(want) | set(got))
           if c not in want or c not in got or want[c].get(key) != got[c].get(key)]
    lines = []
    for c in bad[:show]:
        if c not in got:
            lines.append(f"{section} {c}: in the golden, not replayed")
            continue
        if c not in want:
            lines.append(f"{section} {c}: replayed, not in the golden")
            continue
        w, g = want[c], got[c]
        if section == "regress":
            line = f"regress {c}: exit {w.get('exit')} -> {g.get('exit')}"
            if w.get("counts") != g.get("counts"):
                line += f", counts {w.get('counts')} -> {g.get('counts')}"
            kern = [k for k in sorted(set(w.get("kernels", {})) | set(g["kernels"]))
                    if w.get("kernels", {}).get(k) != g["kernels"].get(k)]
            line += f"; {field} differs in kernels {kern}" if kern else f"; {field} differs"
            lines.append(line)
            for row in [r for r in g["_rows"] if r.get("kernel") in kern[:1]][:12]:
                lines.append("    now: " + " ".join(str(row.get(f)) for f in (
                    "kernel", "size", "metric", "verdict", "change", "anchor_change",
                    "min_effect", "against")))
        elif section == "simulated":
            lines.append(f"simulated {c}: counts {w.get('counts')} -> {g.get('counts')}; "
                         f"{field} differs")
            for row in g["_rows"][:12]:
                eff = "; ".join(f"{e.get('against')} {e.get('verdict')} {e.get('change')} "
                                f"[{e.get('lo')}, {e.get('hi')}] {e.get('rule')}"
                                for e in row.get("effects") or [])
                lines.append(f"    now: {row.get('kernel')} {row.get('size')} "
                             f"{row.get('metric')} {row.get('verdict')}: {eff}")
        else:
            lines.append(f"{section} {c}: now {json.dumps(g['_detail'])[:600]}")
    if len(bad) > show:
        lines.append(f"... and {len(bad) - show} more {section} cases")
    return lines


# --- the tests --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def replayed():
    if not GOLDEN.is_file():
        pytest.fail(f"no golden at {GOLDEN}: python3 -m tests.test_replay --write")
    golden = json.loads(GOLDEN.read_text())
    commit = golden["data_commit"]
    if git(ROOT, "rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone: the replay needs the recorded commits' code (git)")
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT,
                           capture_output=True)
    if known.returncode:
        pytest.skip(f"the golden's inputs are at {commit[:10]}, which this checkout lacks "
                    "(a shallow clone?)")
    return golden, replay(commit)


@pytest.mark.parametrize("section", SECTIONS)
def test_the_gate_decides_as_recorded_in_the_golden(replayed, section):
    golden, result = replayed
    lines = differences(golden, result, section)
    assert not lines, ("the gate's decisions moved from tests/data/replay_golden.json "
                       "(if intended: python3 -m tests.test_replay --write):\n"
                       + "\n".join(lines))


@pytest.mark.parametrize("section", ("regress", "simulated"))
def test_the_notes_read_as_recorded_in_the_golden(replayed, section):
    golden, result = replayed
    lines = differences(golden, result, section, field="notes")
    assert not lines, ("the decisions stand, but the notes and other text moved "
                       "(if intended: python3 -m tests.test_replay --write):\n"
                       + "\n".join(lines))


def test_the_golden_covers_the_newest_commits_and_every_setting(replayed):
    golden, _ = replayed
    cases = [c.split("/") for c in golden["regress"]]
    assert {s for _, s in cases} == set(SETTINGS)
    assert len(golden["kept"]) >= 400 and len(golden["simulated"]) == SIMULATED
    verdicts = {v for case in golden["simulated"].values() for v in case["counts"]}
    assert {"DROP", "noise", "UNRESOLVED"} <= verdicts


def main(argv: list[str]) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python3 -m tests.test_replay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true",
                   help="replay the inputs as last committed and write the golden")
    g.add_argument("--check", action="store_true", help="compare with the golden, as the test")
    args = p.parse_args(argv)
    t0 = time.monotonic()
    if args.write:
        commit = data_commit()
        result = replay(commit)
        doc = golden_of(result)
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n")
        print(f"wrote {GOLDEN.relative_to(ROOT)} (inputs at {commit[:10]}): "
              + ", ".join(f"{n} {s}" for s, n in doc["sizes"].items())
              + f", {time.monotonic() - t0:.0f} s")
        return 0
    golden = json.loads(GOLDEN.read_text())
    result = replay(golden["data_commit"])
    lines = [x for s in SECTIONS for x in differences(golden, result, s)]
    lines += [x for s in ("regress", "simulated")
              for x in differences(golden, result, s, field="notes")]
    print("\n".join(lines) or f"as the golden ({time.monotonic() - t0:.0f} s)")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
