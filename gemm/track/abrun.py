"""The A/B engine of the gate, the calibration's trials and ci/probes/power_sim.py: palindromic
rounds (R1 R2 N N R2 R1), priority, time budget, overtime, A/A control (docs/gate.md section 3)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from enum import StrEnum

from . import abtest, decision, plan
from .gate import GateConfig, Row


# the dof a decision waits for where the noise has only the run's own: r rounds give r - 1, and
# a borrowed prior adds as many (2 at two rounds: t >= 126 at the smallest family, about 2000
# at a flood's; 4: t 18-70)
RUN_DOF = 4


class Stop(StrEnum):
    """Why a comparison was left open (UNRESOLVED); a report row's `open` names it."""
    BUDGET = "budget"       # out of the time budget, or of its overtime
    CAP = "cap"             # at the round cap
    UNSTABLE = "unstable"   # the A/A control moved
    MISSING = "missing"     # a measurement reported nothing for it
    BROKEN = "broken"       # the A/B broke off (abtest.ABError)
    FAILED = "failed"       # the reference's code failed here (the new code's: the row FAILED)


@dataclass(frozen=True)
class Closed:
    stop: Stop
    why: str
    after: int = 0          # the rounds the A/B had run (restarted ones included) by then


def in_trees(tree: dict, clocks: dict | None = None):
    """Arms that are git worktrees ({label: tree}), a process each `gemm measure` there;
    `clocks`, if given, gets {arm: abtest.measure's clocks} (the SM clock of each target's
    samples, as each arm's own timer read it)."""
    def measure(arm: str, what: dict) -> tuple[dict, dict]:
        walls: dict = {}
        sink = None if clocks is None else clocks.setdefault(arm, {})
        return abtest.measure(tree[arm], what, walls=walls, clocks=sink), walls
    return measure


class ABRun:
    """One A/B: `comparisons` [(row, reference arm)] against the arm `new`, an arm measured by
    `measure(arm, series) -> (values, walls)`. `family`: the Bonferroni family if not the
    comparisons' own; `clock`: seconds (time.monotonic)."""

    def __init__(self, comparisons, cfg: GateConfig, new: str, measure, log, calibration,
                 speeds: dict | None = None, family: int | None = None, clock=None,
                 built=()):
        self.comps, self.cfg, self.new, self.measure = comparisons, cfg, new, measure
        self.log, self.cal, self.clock = log, calibration, clock
        self.family = family or decision.family_size(len(comparisons), cfg.min_rounds,
                                                     cfg.max_rounds)
        # a round's cost, learned as measured; built: arms of the new code's tree (compiled)
        self.costs = plan.Costs(speeds, warm={new, *built})
        self.unguarded = False            # said once: no series here can judge the GPU
        self.untrusted: set[int] = set()  # left open as the A/A control moved: not carried
        self.restarts = 0
        self.total = 0                    # rounds run, those a restart discarded included
        self.reset()

    def reset(self) -> None:
        """No rounds, no decisions (the start, and the A/A control's restart)."""
        self.n = 0                        # rounds so far
        self.values: dict = {}            # (arm, key) -> {round: values}
        self.decided: dict[int, decision.Effect] = {}
        self.failed: dict[int, tuple[bool, str]] = {}   # (the new code failed?, why)
        self.moot: dict[int, str] = {}    # left open: another comparison of its row is a DROP
        self.closed: dict[int, Closed] = {}
        self.overtime: set[int] = set()   # kept past the time budget (on course for a DROP)
        self.over_measured: set[int] = set()  # ... and measured there
        self.upto: dict[int, int] = {}    # rounds a comparison had when it left the undecided

    def prior(self, r: Row):
        return self.cal.prior(r.kernel, r.size, r.metric) if self.cal is not None else None

    def judges_gpu(self, r: Row) -> bool:
        """Only a series with its own noise (or no calibration at all) judges the GPU."""
        return self.cal is None or not self.cal.borrowed(r.kernel, r.size, r.metric)

    def describe(self, i: int) -> str:
        r = self.comps[i][0]
        return f"{r.kernel} at {r.size} ({r.label})"

    def who(self, arm: str) -> str:
        return "the new code" if arm == self.new else f"the reference {arm[:10]}"

    def undecided(self) -> list[int]:
        return [i for i in range(len(self.comps)) if i not in self.decided
                and i not in self.failed and i not in self.moot and i not in self.closed]

    def measure_round(self, n: int, chosen: list[int]) -> None:
        self.n = n
        by_ref: dict[str, list[Row]] = {}
        for i in chosen:
            by_ref.setdefault(self.comps[i][1], []).append(self.comps[i][0])
        refs = list(by_ref)
        union = series([self.comps[i][0] for i in chosen])
        # R1 R2 N N R2 R1: a reference's two processes "first" and "last" (the A/A control)
        for arm, pos in ([(c, "first") for c in refs] + [(self.new, "new")] * 2
                         + [(c, "last") for c in reversed(refs)]):
            what = union if pos == "new" else series(by_ref[arm])
            self.log(f"A/B round {n}/{self.cfg.max_rounds}: "
                     f"{'new' if pos == 'new' else 'reference'} {arm[:10]}: "
                     + "; ".join(f"{k} at {', '.join(s)}" for k, s in what.items()))
            got, walls = self.measure(arm, what)
            self.costs.learn(arm, walls)
            for key, v in got.items():
                d = self.values.setdefault((arm, key), {})
                if pos == "new":
                    d.setdefault(n, []).append(v)
                    continue
                d.setdefault(n, {})[pos] = v
                if pos == "first":     # how many new-code steps apart its two processes are
                    d[n]["k"] = 2 * len(refs) + 1 - 2 * refs.index(arm)   # (R1 .. N N .. R1)
            for i in chosen:           # asked for, not reported: no value to pair, ever
                r, c = self.comps[i]
                if (pos == "new" or c == arm) and (r.kernel, r.size, r.metric) not in got \
                        and i in self.undecided():
                    self.close(i, Stop.MISSING,
                               f"{self.who(arm)}'s measurement here reported nothing for it")
        if self.overtime:
            self.over_measured.update(chosen)

    def close(self, i: int, stop: Stop, why: str) -> None:
        """Leave comparison i open (UNRESOLVED) for `why`, with the rounds it has now."""
        self.closed[i] = Closed(stop, why, self.total)
        self.upto.setdefault(i, self.rounds(i))

    def paired(self, i: int) -> tuple[list, list, list]:
        """Comparison i's complete rounds, kept ones first: ([[first, last]], [[new, new]], [k]);
        once it left the undecided, only those it had then."""
        r, c = self.comps[i]
        key = (r.kernel, r.size, r.metric)
        ref, new = self.values.get((c, key), {}), self.values.get((self.new, key), {})
        refs, news, ks = carried(r.carried_rounds.get(c))
        for n in sorted(ref):
            got, nv = ref[n], new.get(n, [])
            if "first" in got and "last" in got and len(nv) == 2:
                refs.append([got["first"], got["last"]])
                news.append(list(nv))
                ks.append(got["k"])
        upto = self.upto.get(i, len(refs))
        return refs[:upto], news[:upto], ks[:upto]

    def rounds(self, i: int) -> int:
        """How many complete rounds comparison i has (kept ones included)."""
        return len(self.paired(i)[0])

    def kept(self, i: int) -> int:
        """How many of comparison i's rounds were kept from an earlier commit (carry)."""
        r, c = self.comps[i]
        return len(carried(r.carried_rounds.get(c))[0])

    def new_values(self, r: Row) -> list:
        """Every value of the row's new code measured here, round by round."""
        d = self.values.get((self.new, (r.kernel, r.size, r.metric)), {})
        return [v for n in sorted(d) for v in d[n]]

    def needs(self, i: int) -> int:
        """Rounds comparison i needs before a decision (at most the cap): 1 with its own
        calibrated noise, else those that give RUN_DOF dof (3 with a borrowed prior, 5 with
        none)."""
        p = self.prior(self.comps[i][0])
        if p is not None and not p.borrowed:
            return 1
        rounds = 1 + (math.ceil(RUN_DOF / 2) if p is not None else RUN_DOF)
        return min(rounds, self.cfg.max_rounds)

    def early(self, i: int, e) -> bool:
        """Fewer rounds than a decision needs here, or an interval still unbounded."""
        return self.rounds(i) < self.needs(i) or not (math.isfinite(e.lo)
                                                       and math.isfinite(e.hi))

    def reachable(self, i: int, e) -> bool:
        cap = self.rounds(i) + self.cfg.max_rounds - self.n
        return decision.reachable(e, self.comps[i][0].min_effect, cap)

    def priority(self, i: int) -> tuple:
        """choose()'s order, lowest first: 0 started and still to decide, 1 past the minimum
        effect, 2 carried, 3 the other unmeasured, 4 the rest (docs/gate.md section 3)."""
        r, c = self.comps[i]
        rounds = self.rounds(i)
        e = self.effect_or_none(i) if rounds else None
        if rounds > self.kept(i):
            if e is None:          # a failed value: its verdict comes without more rounds
                return (0, -math.inf)
            return (0 if self.early(i, e) or self.reachable(i, e) else 4, e.estimate)
        change = (r.change if c == r.reference else r.anchor_change) or 0.0
        # in a flood of candidates, noisy series are the likeliest to sit past the screen
        p = self.prior(r)
        scale = max(r.bound or 0.0, p.sigma if p is not None else 0.0) or 1.0
        if rounds:                 # carried with its evidence: the kept rounds' estimate
            kept = e.estimate if e is not None else -math.inf
            return (1, kept / scale) if kept <= -r.min_effect else (2, kept)
        if change <= -r.min_effect:
            return (1, change / scale)
        if r.carried:
            return (2, -len(r.carried))
        return (3, change / scale)

    def choose(self, left: float, first: bool = False) -> list[int]:
        """The undecided comparisons a round can take in `left` seconds, by priority, each
        only where the rounds it still needs fit too (the first round takes at least one)."""
        arms: dict[str, set] = {}
        chosen, times = [], 1
        for i in sorted(self.undecided(), key=self.priority):
            r, c = self.comps[i]
            t = (r.kernel, r.size)
            if t in arms.get(c, ()) and t in arms.get(self.new, ()):
                chosen.append(i)   # its targets are measured anyway
                continue
            need = max(times, self.needs(i) - self.rounds(i))
            if self.needs(i) - self.rounds(i) > self.cfg.max_rounds - self.n:
                continue           # the cap leaves it too few rounds to decide
            trial = {a: set(ts) for a, ts in arms.items()}
            trial.setdefault(c, set()).add(t)
            trial.setdefault(self.new, set()).add(t)
            if self.costs.round_s(trial) * need <= left or (first and not chosen):
                arms, times = trial, need
                chosen.append(i)
        return chosen

    def unstable(self) -> str | None:
        """The first A/A control that moved, described; None if every one held."""
        todo = self.undecided()
        judges = [i for i in todo if self.judges_gpu(self.comps[i][0])]
        if todo and not judges and not self.unguarded:
            self.unguarded = True
            self.log("no A/A control from here on: every series still undecided has noise "
                     "borrowed from other series (gemm calibrate them on this runner to guard "
                     "their A/B)")
        for i in judges:
            r, c = self.comps[i]
            kept = self.kept(i)
            refs, pairs, ks = (x[kept:] for x in self.paired(i))   # rounds measured here
            if not refs or any(None in p for p in refs + pairs):
                continue
            first, last = [a for a, _ in refs], [b for _, b in refs]
            ok, e = decision.aa_stable(first, last, r.min_effect, self.cfg.alpha, self.family,
                                       self.prior(r), new_pairs=pairs, k=ks)
            if not ok:
                return f"{self.describe(i)}, A/A of {c[:10]}: {e.describe()}"
        return None

    def decide_round(self) -> None:
        for i in self.undecided():
            c = self.comps[i][1]
            refs, news, _ = self.paired(i)
            if len(refs) <= self.kept(i):   # not measured here yet (no room so far)
                continue
            failed = next((arm for arm, pairs in ((self.new, news), (c, refs))
                           if any(None in p for p in pairs)), None)
            if failed is not None:
                self.failed[i] = (failed == self.new,
                                  f"{self.who(failed)} failed when measured here")
                self.upto[i] = len(refs)
                continue
            if len(refs) < self.cfg.min_rounds:
                continue
            e = self.effect(i)
            if e.verdict != decision.AMBIGUOUS:
                self.decided[i] = e
                self.upto[i] = len(refs)
        # a row with a DROP against one commit is a DROP: its other comparisons are moot,
        # those closed at the budget meanwhile too
        for i in self.undecided() + list(self.closed):
            r = self.comps[i][0]
            hit = next((self.comps[j][1] for j, e in self.decided.items()
                        if self.comps[j][0] is r and e.verdict == decision.DROP), None)
            if hit:
                self.closed.pop(i, None)
                self.moot[i] = f"not needed: the drop against {hit[:10]} decides the row"
                self.upto.setdefault(i, self.rounds(i))

    def effect(self, i: int):
        """Comparison i's effect (ValueError without a complete round or with a failed value)."""
        r = self.comps[i][0]
        refs, news, ks = self.paired(i)
        robust = (self.cal.robust_prior(r.kernel, r.size, r.metric)
                  if self.cal is not None and self.cfg.robust and not self.kept(i) else None)
        return self.cfg.decide(refs, news, r.min_effect, self.family, self.prior(r), robust, ks)

    def effect_or_none(self, i: int):
        try:
            return self.effect(i)
        except ValueError:
            return None

    def estimate(self, i: int):
        """Comparison i's decision, else its effect so far (AMBIGUOUS); None without a
        complete round here or with a failed value."""
        if i in self.decided:
            return self.decided[i]
        refs, news, _ = self.paired(i)
        if len(refs) <= self.kept(i) or None in [x for p in refs + news for x in p]:
            return None
        e = self.effect_or_none(i)
        return replace(e, verdict=decision.AMBIGUOUS) if e is not None else None

    def run(self) -> None:
        """Rounds until every comparison is decided or closed (then `closed` says why)."""
        clock = self.clock or time.monotonic
        t0 = clock()
        while self.n < self.cfg.max_rounds and self.undecided():
            spent = clock() - t0
            chosen = [] if self.overtime else self.choose(self.cfg.budget_s - spent,
                                                          first=self.total == 0)
            if not chosen:   # no more within the budget: overtime for what is on course
                self.past_budget()
                left = self.cfg.budget_s + self.cfg.overtime_s - spent
                chosen = self.choose(left) if self.undecided() else []
                if not chosen:
                    why = (f"out of the A/B's overtime ({self.cfg.overtime_s:.0f} s past its "
                           f"{self.cfg.budget_s:.0f}-s budget) after {self.total} rounds")
                    return self.end(Stop.BUDGET, why)
            self.total += 1
            self.measure_round(self.n + 1, chosen)
            if self.n < self.cfg.min_rounds:
                continue
            moved = self.unstable()
            if moved and not self.restarts and not self.overtime:
                self.log(f"the A/A control moved ({moved}): the GPU changed during the A/B; "
                         "its rounds and decisions are discarded and measured again")
                self.restarts = 1
                self.reset()
                continue
            if moved:   # what was decided stands; what is left open is not carried
                self.untrusted.update(self.undecided())
                how = ("the A/A control moved during overtime" if self.overtime
                       else "the GPU was unstable: the A/A control moved twice")
                return self.end(Stop.UNSTABLE, f"{how} ({moved})")
            self.decide_round()
        for i in self.undecided():   # the round cap came first
            if not self.rounds(i):
                self.close(i, Stop.CAP, "not measured: no room for it in the A/B's rounds (the "
                                        "most suspicious go first)")
        self.end(Stop.CAP, f"still ambiguous after {self.total} rounds")

    def end(self, stop: Stop, why: str) -> None:
        for i in self.undecided():
            self.close(i, stop, why)

    def past_budget(self) -> None:
        """No round fits the budget: close the undecided but what can reach a DROP (overtime)."""
        total, over = self.total, self.cfg.overtime_s
        budget = f"the A/B time budget ({self.cfg.budget_s:.0f} s)"
        keep = [i for i in self.undecided() if over > 0 and self.on_course(i)]
        waiting = [i for i in self.undecided() if not self.rounds(i)]
        for i in [i for i in self.undecided() if i not in keep]:
            if i in self.overtime:
                why = f"no longer on course for a DROP after {total} rounds (overtime)"
            elif i in waiting:
                why = (f"not measured: out of {budget}; {len(waiting)} comparisons found no "
                       f"room in its {total} rounds (the most suspicious go first)")
            else:
                why = f"out of {budget} after {total} rounds"
            self.close(i, Stop.BUDGET, why)
        if waiting:
            self.log(f"{len(waiting)} of {len(self.comps)} comparisons not measured: "
                     f"no room in {budget}")
        new = [i for i in keep if i not in self.overtime]
        if new:
            self.log(f"out of {budget} after {total} rounds; overtime (up to {over:.0f} s more, "
                     f"within {self.cfg.max_rounds} rounds) for what is on course for a DROP: "
                     + "; ".join(f"{self.describe(i)} vs {self.comps[i][1][:10]}: "
                                 f"{self.effect(i).describe()}" for i in new))
            self.overtime.update(new)

    def on_course(self, i: int) -> bool:
        """Worth overtime: can reach a DROP by the cap, or, while early(), an estimate past -m."""
        e = self.effect_or_none(i)
        if e is None:
            return False
        if self.early(i, e):
            return e.estimate < -self.comps[i][0].min_effect / 2
        return self.reachable(i, e)


def carried(values: dict | None) -> tuple[list, list, list]:
    """Kept rounds (a verdict's effect values) as paired()'s; none unless all are complete."""
    first, last, new, ks = ((values or {}).get(x) or [] for x in ("first", "last", "new", "k"))
    n = len(first)
    def number(x, kind=(int, float)) -> bool:
        return isinstance(x, kind) and not isinstance(x, bool) and x > 0 and math.isfinite(x)
    if not (n and len(last) == n == len(ks) and len(new) == 2 * n
            and all(map(number, first + last + new)) and all(number(k, int) for k in ks)):
        return [], [], []
    return [list(p) for p in zip(first, last)], [new[2 * j:2 * j + 2] for j in range(n)], list(ks)


def series(rows: list[Row]) -> dict[str, list[str]]:
    return abtest.series_of((r.kernel, r.size) for r in rows)
