"""Simulation (CPU only, not part of the suite or the gate): what the gate's A/B detects on
this runner, resampling the calibrated A/A processes themselves instead of assuming normal
noise -- so a heavy tail (a few slow processes) counts as it was measured.

A simulated A/B is one run of the gate's engine (gemm.track.abrun.ABRun: its stop rule, A/A
control, overtime and decision by GateConfig.decide) on one series, whose arms draw each
process's value (with replacement) from the series' A/A log values, the new arm's moved by
log(1 - share), on a fake clock of 1 s a process: its time budget ends at ROUNDS rounds, at
the gate's level and a family like a calibration trial's (18 series x looks x 2). Reports
P(DROP) per share (share 0: the false-alarm rate) with the gate's prior (the calibrated sd,
with its degrees of freedom) and, for comparison, with the robust sd (1.4826 MAD) as the
prior, with the degrees of freedom a MAD estimate is worth: MAD_EFFICIENCY (its asymptotic
efficiency at the normal, ~0.37) times the row's (given the row's full degrees of freedom,
the robust sd looks better than what 25 values tell).

    python3 ci/probes/power_sim.py [calibration/h200.json] [TRIALS]
Environment: PART (a pooled calibration, gemm calibrate --pool: resample this GPU's own
A/A values, e.g. PART=GPU-42ffaa7a, with the pooled prior: what the gate does on that GPU),
ROUNDS (default 3 5), OVERTIME=N (what is on course for a DROP goes on for up to N rounds
more within the cap, as GateConfig.overtime_s; "ot": the gate's column's rounds past the
budget per A/B), FAMILY (the Bonferroni family; default a
trial's), ROBUST=1 (a third column: the gate's robust rule, GateConfig.robust: trimmed
means with the series' trimmed-mean prior), MAX_ROUNDS (the cap the family is counted with; default the gate's), SHARES
(0 0.005 0.01 0.02), SERIES (default: the tflops series of 05, 07, 09 at 2048-8192), SEED.
"""
import json
import math
import os
import random
import sys
from dataclasses import replace
from types import SimpleNamespace

from gemm.track import decision
from gemm.track.abrun import ABRun, State
from gemm.calibrate.runner import robust_sd
from gemm.track.gate import GateConfig, Row, Verdict

MAD_EFFICIENCY = 0.37
ROBUST = os.environ.get("ROBUST", "")
KEY = ("sim", "4096", "tflops")   # the simulated series (4096: the large class's floor)


def simulate(logs, share, prior, rounds, cfg, family, rng, trials, robust=None):
    """P(DROP), P(SAME or better), P(left open) and the rounds run past the budget (overtime)
    per A/B, over `trials` simulated A/Bs of `cfg` (its rule: `prior`, and `robust` where the
    rule is robust), the budget ending at `rounds`."""
    extra = int(os.environ.get("OVERTIME") or 0)
    cfg = replace(cfg, budget_s=4.0 * rounds, overtime_s=4.0 * extra,   # 4 processes a round
                  max_rounds=max(cfg.max_rounds, rounds))
    cal = SimpleNamespace(prior=lambda *a: prior, robust_prior=lambda *a: robust,
                          borrowed=lambda *a: False)
    shift = math.log1p(-share)
    delta = cfg.effect_for(KEY[1])
    verdicts, over = [], 0
    for _ in range(trials):
        now = [0.0]

        def measure(arm, what):
            now[0] += 1.0
            moved = shift if arm == "new" else 0.0
            return {KEY: math.exp(rng.choice(logs) + moved)}, {None: 0.0, KEY[:2]: 1.0}
        row = Row(*KEY, 0, None, None, None, None, Verdict.CANDIDATE, min_effect=delta)
        ab = ABRun([(row, "reference")], cfg, "new", measure, lambda s: None, cal,
                   family=family, clock=lambda: now[0], built=("reference",))
        ab.run()
        over += max(0, ab.n - rounds)
        c = ab.comps[0]
        verdicts.append(ab.estimate(c).verdict if c.state is State.DECIDED else None)
    drop = verdicts.count(decision.DROP) / trials
    same = sum(v in decision.PASSING for v in verdicts) / trials
    return drop, same, 1 - drop - same, over / trials


def main(argv):
    path = argv[0] if argv else "calibration/h200.json"
    trials = int(argv[1]) if len(argv) > 1 else 400
    doc = json.load(open(path))
    cap = int(os.environ.get("MAX_ROUNDS", GateConfig.max_rounds))   # sets the family
    cfg = GateConfig(max_rounds=cap)           # and where overtime stops
    # a calibration trial's family (18 series); FAMILY=16 is one comparison's (the smallest)
    family = int(os.environ.get("FAMILY", decision.family_size(18, cfg.min_rounds, cap)))
    rounds_list = [int(x) for x in os.environ.get("ROUNDS", "3 5").split()]
    shares = [float(x) for x in os.environ.get("SHARES", "0 0.005 0.01 0.02").split()]
    want = os.environ.get("SERIES", "").split()
    rng = random.Random(int(os.environ.get("SEED", "1")))
    print(f"{path}: {trials} simulated A/Bs per cell; family {family}; alpha {cfg.alpha}; "
          f"P(DROP) per share, with the sd as the prior (the gate's) | with the robust sd "
          f"({MAD_EFFICIENCY} of the dof)"
          + (" | the gate's robust rule (trimmed means)" if ROBUST else ""))
    head = "series    sd %  rob %  rounds  " + "  ".join(
        f"{100 * s:>5.1f} % sd |   rob" + (" | trim" if ROBUST else "") for s in shares)
    print(head)
    for row in doc["noise"]:
        name = f"{row['kernel'][:2]}@{row['size']}"
        if row["metric"] != "tflops" or not row.get("values"):
            continue
        if want and name not in want:
            continue
        if not want and (row["kernel"][:2] not in ("05", "07", "09") or row["size"] == "1024"):
            continue
        values = row["values"]
        part = os.environ.get("PART")
        if part:
            mine = [p for p in row.get("parts") or [] if part in (p["source"].get("gpu") or "")]
            if not mine:
                continue
            values = mine[0]["values"]
        logs = [math.log(v) for v in values if v]
        mean = sum(logs) / len(logs)
        logs = [x - mean for x in logs]
        robust = robust_sd(values)
        # the alternative: the robust sd, with the dof a MAD estimate is worth
        alt = decision.Noise(robust, max(1, round(MAD_EFFICIENCY * row["dof"])))
        own = decision.Noise(row["sigma"], row["dof"])
        columns = [(cfg, own, None), (cfg, alt, None)]
        if ROBUST:
            parts = [p["values"] for p in row.get("parts") or []] or [row["values"]]
            got = decision.trimmed_noise([[v for v in vs if v] for vs in parts])
            columns.append((cfg, own, got[0] if got else None))
        for rounds in rounds_list:
            cells = []
            for share in shares:
                got = [simulate(logs, share, p, rounds, c, family, rng, trials, rp)
                       for c, p, rp in columns]
                cells.append(" | ".join(f"{g[0]:>5.3f}" for g in got)
                             + (f" ot {got[0][3]:.2f}" if os.environ.get("OVERTIME") else ""))
            print(f"{name:<8} {100 * row['sigma']:5.3f}  "
                  f"{100 * robust:5.3f}  {rounds:>6}  " + "  ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
