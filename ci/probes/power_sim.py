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
ROUNDS (default 3 5), HUBER=naive (or 1) or HUBER=sandwich (a third column: huber_rule or
sandwich_rule, robust alternatives; HUBER_K their tuning constant, default 1.5), MAX_ROUNDS (the cap the family is counted with; default
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
POOL_RUN = os.environ.get("POOL_RUN") == "1"   # HUBER=sandwich: pool the run's own spread too
HUBER = {"1": "naive"}.get(os.environ.get("HUBER", ""), os.environ.get("HUBER", ""))


def gate_rule(ref, new, delta, alpha, family, prior):
    """The gate's rule (gemm.track.decision.effect_rounds)."""
    return decision.effect_rounds(ref, new, delta, alpha, family, prior).verdict


def huber(xs, scale, k=HUBER_K):
    """Huber's M-estimate of location of `xs` with the scale fixed (iterated reweighting)."""
    mu = sorted(xs)[len(xs) // 2] if len(xs) % 2 else sum(sorted(xs)[len(xs) // 2 - 1:
                                                                       len(xs) // 2 + 1]) / 2
    for _ in range(50):
        w = [1.0 if abs(x - mu) <= k * scale else k * scale / abs(x - mu) for x in xs]
        nxt = sum(wi * x for wi, x in zip(w, xs)) / sum(w)
        if abs(nxt - mu) < 1e-12:
            break
        mu = nxt
    return mu


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
    d = huber(ln, prior.sigma) - huber(lr, prior.sigma)
    se = prior.sigma * math.sqrt(huber_variance() * (1 / len(lr) + 1 / len(ln)))
    q = float(student.ppf(1 - alpha / family / 2, prior.dof))
    return decision.classify(d - q * se, d + q * se, delta / 2)


def huber_prior(row, k=HUBER_K):
    """HUBER=sandwich: the noise of one process's Huber-weighted log value, from the A/A values
    themselves rather than from the normal: per GPU (a pooled row's parts; else the row), the
    robust scale s (1.4826 MAD) and the sandwich factor V = mean(psi(u)^2) / mean(psi'(u))^2 of
    u = (x - Huber location) / s, which a heavy tail (slow processes) makes larger than at the
    normal; pooled over GPUs weighted by n - 1. Returns (scale, Noise(s sqrt(V), dof)), the
    dof MAD_EFFICIENCY of the pooled n - 1 (a robust scale is worth fewer)."""
    parts = row.get("parts") or [row]
    ss_s = ss_v = w = 0.0
    for part in parts:
        xs = [math.log(v) for v in part.get("values") or [] if v]
        if len(xs) < 3:
            continue
        sc = robust_sd([math.exp(x) for x in xs])
        mu = huber(xs, sc, k)
        us = [(x - mu) / sc for x in xs]
        psi2 = sum(min(abs(u), k) ** 2 for u in us) / len(us)
        dpsi = sum(1.0 for u in us if abs(u) <= k) / len(us)
        n1 = len(xs) - 1
        ss_s += n1 * sc * sc
        ss_v += n1 * sc * sc * psi2 / dpsi ** 2
        w += n1
    return math.sqrt(ss_s / w), decision.Noise(math.sqrt(ss_v / w), max(1, round(MAD_EFFICIENCY * w)))


def sandwich_rule(scale):
    """HUBER=sandwich: huber_rule's estimate (Huber locations per arm at the pooled robust
    `scale`), its interval from huber_prior's noise (the prior passed in)."""
    def rule(ref, new, delta, alpha, family, prior):
        from scipy.stats import t as student
        lr = [math.log(x) for r in ref for x in r]
        ln = [math.log(x) for r in new for x in r]
        mr, mn = huber(lr, scale), huber(ln, scale)
        d = mn - mr
        var, dof = prior.sigma ** 2, prior.dof
        if POOL_RUN:   # the arms' own sandwich variance, pooled with the prior's by dof
            us = [(x - mr) / scale for x in lr] + [(x - mn) / scale for x in ln]
            dpsi = sum(1.0 for u in us if abs(u) <= HUBER_K) / len(us)
            run_dof = len(us) - 2
            if run_dof > 0 and dpsi > 0:
                v = scale ** 2 * (sum(min(abs(u), HUBER_K) ** 2 for u in us) / run_dof) / dpsi ** 2
                var = (dof * var + run_dof * v) / (dof + run_dof)
                dof += run_dof
        se = math.sqrt(var * (1 / len(lr) + 1 / len(ln)))
        q = float(student.ppf(1 - alpha / family / 2, dof))
        return decision.classify(d - q * se, d + q * se, delta / 2)
    return rule


def simulate(logs, share, prior, rounds, cfg, family, rng, trials, rule=gate_rule):
    """P(DROP), P(SAME or better), P(left open) over `trials` simulated A/Bs."""
    delta = cfg.effect_for("4096")
    shift = math.log1p(-share)
    drop = same = 0
    for _ in range(trials):
        ref, new = [], []
        verdict = decision.AMBIGUOUS
        for r in range(rounds):
            ref.append([math.exp(rng.choice(logs)) for _ in range(2)])
            new.append([math.exp(rng.choice(logs) + shift) for _ in range(2)])
            if r + 1 < cfg.min_rounds:
                continue
            verdict = rule(ref, new, delta, cfg.alpha, family, prior)
            if verdict != decision.AMBIGUOUS:
                break
        drop += verdict == decision.DROP
        same += verdict in decision.PASSING
    return drop / trials, same / trials, 1 - (drop + same) / trials


def main(argv):
    path = argv[0] if argv else "calibration/h200.json"
    trials = int(argv[1]) if len(argv) > 1 else 400
    doc = json.load(open(path))
    cfg = GateConfig()
    cap = int(os.environ.get("MAX_ROUNDS", cfg.max_rounds))   # the gate's cap sets the family
    family = 18 * (cap - cfg.min_rounds + 1) * 2
    rounds_list = [int(x) for x in os.environ.get("ROUNDS", "3 5").split()]
    shares = [float(x) for x in os.environ.get("SHARES", "0 0.005 0.01 0.02").split()]
    want = os.environ.get("SERIES", "").split()
    rng = random.Random(int(os.environ.get("SEED", "1")))
    print(f"{path}: {trials} simulated A/Bs per cell; family {family}; alpha {cfg.alpha}; "
          f"P(DROP) per share, with the sd as the prior (the gate's) | with the robust sd "
          f"({MAD_EFFICIENCY} of the dof)"
          + ({"naive": f" | Huber locations (k {HUBER_K}) with the robust sd",
              "sandwich": f" | Huber locations (k {HUBER_K}) with the sandwich sd of the "
                          f"pooled A/A (huber_prior)"}.get(HUBER, "")))
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
            scale, hp = huber_prior(row)
            columns.append((hp, sandwich_rule(scale)))
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
