"""Simulation (CPU only, not part of the suite or the gate): what the gate's A/B rule detects
on this runner, resampling the calibrated A/A processes themselves instead of assuming
normal noise -- so a heavy tail (a few slow processes) counts as it was measured.

A simulated A/B: per round, two reference and two new process values drawn (with
replacement) from one series' A/A log values, the new ones moved by log(1 - share); decided
after each round by gemm.track.decision.effect_rounds with the calibrated prior, at the
gate's level and a family like a calibration trial's (18 series x looks x 2), stopped at a
verdict or at ROUNDS (the cap or the time budget). Reports P(DROP) per share (share 0: the
false-alarm rate) with the gate's prior (the calibrated sd, with its degrees of freedom) and,
for comparison, with the robust sd (1.4826 MAD) as the prior, with the degrees of freedom a
MAD estimate is worth: MAD_EFFICIENCY (its asymptotic efficiency at the normal, ~0.37) times
the row's. (Given the row's full degrees of freedom, the robust sd looked far better, 0.93
against 0.43 at +1 % on 07@2048 by 5 rounds: an overstatement of what 25 values tell.)

    python3 ci/probes/power_sim.py [calibration/h200.json] [TRIALS]
Environment: PART (a pooled calibration, gemm calibrate --pool: resample this GPU's own
A/A values, e.g. PART=GPU-42ffaa7a, with the pooled prior: what the gate does on that GPU),
ROUNDS (default 3 5), OVERTIME=N (ROUNDS is where the budget stops an A/B, and what is on
course for a DROP goes on for up to N rounds more within the cap, as GateConfig.overtime_s;
the gate's two rules), FAMILY (the Bonferroni family; default a trial's), HUBER=naive (or 1) or HUBER=sandwich (a third column: huber_rule, a naive
robust alternative, or the gate's robust rule, GateConfig.robust; HUBER_K the Huber constant,
default 1.5), MAX_ROUNDS (the cap the family is counted with; default
the gate's), SHARES (0 0.005 0.01 0.02), SERIES (default: the tflops
series of 05, 07, 09 at 2048-8192), SEED.
"""
import json
import math
import os
import random
import sys

from gemm.track import decision
from gemm.track.calibrate import robust_sd
from gemm.track.gate import GateConfig

MAD_EFFICIENCY = 0.37
HUBER_K = float(os.environ.get("HUBER_K", "1.5"))
HUBER = {"1": "naive"}.get(os.environ.get("HUBER", ""), os.environ.get("HUBER", ""))


def gate_rule(ref, new, delta, alpha, family, prior):
    """The gate's rule (gemm.track.decision.effect_rounds)."""
    return decision.effect_rounds(ref, new, delta, alpha, family, prior).verdict


def huber_variance(k=HUBER_K):
    """Asymptotic variance of the Huber location estimate at the standard normal (per value)."""
    from scipy.stats import norm
    inside = norm.cdf(k) - norm.cdf(-k)
    e_psi2 = inside - 2 * k * norm.pdf(k) + k * k * (1 - inside)
    return e_psi2 / inside ** 2


def huber_rule(ref, new, delta, alpha, family, prior):
    """An alternative, not the gate's (HUBER=1): each arm's location the Huber estimate of all
    its process log values (scale: the prior's sd, meant to be the robust sd), so a few
    processes in a slow state weigh little; the interval d +- t se, se = sd sqrt(v_k (1/n_ref +
    1/n_new)), t at the prior's degrees of freedom, the gate's level and margins. (It gives up
    the round blocking, which cancels drift; resampled values have none.)"""
    from scipy.stats import t as student
    lr = [math.log(x) for r in ref for x in r]
    ln = [math.log(x) for r in new for x in r]
    d = (decision.huber_location(ln, prior.sigma, HUBER_K)
         - decision.huber_location(lr, prior.sigma, HUBER_K))
    se = prior.sigma * math.sqrt(huber_variance() * (1 / len(lr) + 1 / len(ln)))
    q = float(student.ppf(1 - alpha / family / 2, prior.dof))
    return decision.classify(d - q * se, d + q * se, delta / 2)


def robust_rule(ref, new, delta, alpha, family, prior):
    """HUBER=sandwich: the gate's robust rule (decision.effect_robust, GateConfig.robust) with
    its prior from the row's A/A values (decision.robust_noise, per GPU where pooled)."""
    return decision.effect_robust(ref, new, delta, alpha, family, prior, HUBER_K).verdict


# OVERTIME: the rules whose Effect decision.on_course can read (the gate's two)
EFFECTS = {gate_rule: decision.effect_rounds,
           robust_rule: lambda *a: decision.effect_robust(*a, HUBER_K)}


def simulate(logs, share, prior, rounds, cfg, family, rng, trials, rule=gate_rule):
    """P(DROP), P(SAME or better), P(left open) over `trials` simulated A/Bs. With OVERTIME=N,
    `rounds` is where the time budget runs out, and an A/B still ambiguous there with its
    estimate past the margin (decision.on_course) goes on for up to N more rounds within the
    gate's cap (GateConfig.overtime_s, counted in rounds)."""
    delta = cfg.effect_for("4096")
    shift = math.log1p(-share)
    extra = int(os.environ.get("OVERTIME") or 0) if rule in EFFECTS else 0
    last = min(max(rounds, cfg.max_rounds), rounds + extra)
    drop = same = 0
    for _ in range(trials):
        ref, new = [], []
        verdict = decision.AMBIGUOUS
        for r in range(1, last + 1):
            ref.append([math.exp(rng.choice(logs)) for _ in range(2)])
            new.append([math.exp(rng.choice(logs) + shift) for _ in range(2)])
            if r < cfg.min_rounds:
                continue
            e = EFFECTS[rule](ref, new, delta, cfg.alpha, family, prior) if extra else None
            verdict = e.verdict if e else rule(ref, new, delta, cfg.alpha, family, prior)
            if verdict != decision.AMBIGUOUS:
                break
            if r >= rounds and not (e and decision.on_course(e, delta)):
                break
        drop += verdict == decision.DROP
        same += verdict in decision.PASSING
    return drop / trials, same / trials, 1 - (drop + same) / trials


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
          + ({"naive": f" | Huber locations (k {HUBER_K}) with the robust sd",
              "sandwich": f" | the gate's robust rule (k {HUBER_K}: Huber locations, "
                          f"sandwich sd of the A/A pooled with the run's)"}.get(HUBER, "")))
    head = "series    sd %  rob %  rounds  " + "  ".join(
        f"{100 * s:>5.1f} % sd |   rob" + (" | huber" if HUBER else "") for s in shares)
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
        columns = [(decision.Noise(row["sigma"], row["dof"]), gate_rule), (alt, gate_rule)]
        if HUBER == "naive":
            columns.append((alt, huber_rule))
        elif HUBER == "sandwich":
            parts = [p["values"] for p in row.get("parts") or []] or [row["values"]]
            columns.append((decision.robust_noise([[v for v in vs if v] for vs in parts],
                                                  HUBER_K), robust_rule))
        for rounds in rounds_list:
            cells = []
            for share in shares:
                got = [simulate(logs, share, p, rounds, cfg, family, rng, trials, rule)[0]
                       for p, rule in columns]
                cells.append(" | ".join(f"{g:>5.3f}" for g in got))
            print(f"{name:<8} {100 * row['sigma']:5.3f}  "
                  f"{100 * robust:5.3f}  {rounds:>6}  " + "  ".join(cells))


if __name__ == "__main__":
    main(sys.argv[1:])
