"""The A/B engine: rounds R1 R2 N N R2 R1, priority, budget, overtime, A/A control (gate.md 3)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum

from . import abtest, decision, plan
from .gate import GateConfig, Row

RUN_DOF = 4   # the dof a decision waits for without a prior of its own (docs/gate-history.md)


class Stop(StrEnum):
    """Why a comparison was left open (UNRESOLVED); a report row's `open` names it."""
    BUDGET = "budget"       # out of the time budget, or of its overtime
    CAP = "cap"             # at the round cap
    UNSTABLE = "unstable"   # the A/A control moved
    MISSING = "missing"     # a measurement reported nothing for it
    BROKEN = "broken"       # the A/B broke off (abtest.ABError)
    FAILED = "failed"       # the reference's code failed here (the new code's: the row FAILED)


class State(StrEnum):
    """Where a comparison stands; only an OPEN one is measured, decided or closed."""
    OPEN = "open"
    DECIDED = "decided"     # its effect's verdict is not AMBIGUOUS
    FAILED = "failed"       # an arm's code failed when measured here
    MOOT = "moot"           # another comparison of its row is a DROP
    CLOSED = "closed"       # left open (UNRESOLVED) for its stop


@dataclass(eq=False)
class Comparison:
    """`row` against the reference arm `against`; its rounds (kept ones first) grow while OPEN."""
    row: Row
    against: str
    state: State = State.OPEN   # DECIDED: its effect is ABRun.effect's, rounds no longer added
    why: str = ""               # FAILED, MOOT, CLOSED: said in the row's note
    new_failed: bool = False    # FAILED: the new code's (else the reference's)
    stop: Stop | None = None    # CLOSED
    after: int = 0              # CLOSED: the rounds the A/B had run (restarted ones included)
    measured_overtime: bool = False   # measured past the time budget
    since: int = 0              # its rounds here are those after this one (a restart's round)
    refs: list = field(init=False)
    news: list = field(init=False)
    ks: list = field(init=False)
    kept: int = field(init=False)   # of the rounds, those kept from an earlier commit (carry)

    def __post_init__(self) -> None:
        self.refs, self.news, self.ks = carried(self.row.carried_rounds.get(self.against))
        self.kept = len(self.refs)

    def restart(self, at: int) -> None:
        """Its A/A control moved in round `at`: its rounds here are discarded (kept ones stay)."""
        self.refs, self.news, self.ks = (x[:self.kept] for x in (self.refs, self.news, self.ks))
        self.since = at

    @property
    def key(self) -> tuple:
        return self.row.key

    @property
    def target(self) -> tuple[str, str]:   # (kernel, size): both metrics come from one process
        return self.row.kernel, self.row.size

    @property
    def rounds(self) -> int:
        return len(self.refs)

    def describe(self) -> str:
        return f"{self.row.kernel} at {self.row.size} ({self.row.label})"

    def close(self, stop: Stop, why: str, after: int) -> None:
        self.state, self.stop, self.why, self.after = State.CLOSED, stop, why, after


class ABRun:
    """One A/B: [(row, reference arm)] against the arm `new`, each arm run by `measure`."""

    def __init__(self, comparisons, cfg: GateConfig, new: str, measure, log, calibration,
                 speeds: dict | None = None, family: int | None = None, clock=None,
                 built=()):
        self.cfg, self.new, self.measure = cfg, new, measure
        self.log, self.cal, self.clock = log, calibration, clock
        self.comps = [Comparison(r, c) for r, c in comparisons]
        self.family = family or decision.family_size(len(self.comps), cfg.min_rounds,
                                                     cfg.max_rounds)
        # a round's cost, learned as measured; built: arms of the new code's tree (compiled)
        self.costs = plan.Costs(speeds, warm={new, *built})
        self.unguarded = False            # said once: no series here can judge the GPU
        self.n = 0                        # rounds so far
        self.overtime = False             # past the time budget, for what is on course for a DROP
        self.riders: list[Comparison] = []   # in overtime along with its target's other metric

    def prior(self, r: Row):
        return self.cal.prior(*r.key) if self.cal is not None else None

    def judges_gpu(self, r: Row) -> bool:
        """Only a series with its own noise (or no calibration at all) judges the GPU."""
        return self.cal is None or not self.cal.borrowed(*r.key)

    def who(self, arm: str) -> str:
        return "the new code" if arm == self.new else f"the reference {arm[:10]}"

    def undecided(self) -> list[Comparison]:
        return [c for c in self.comps if c.state is State.OPEN]

    def measure_round(self, n: int, chosen: list[Comparison]) -> None:
        """Round n over the chosen comparisons' targets, taken by each OPEN one it completes."""
        self.n = n
        refs = list(dict.fromkeys(c.against for c in chosen))
        here: dict = {}      # (arm, pos, key) -> values (the new code's: two)
        # R1 R2 N N R2 R1: a reference's two processes "first" and "last" (the A/A control)
        for arm, pos in ([(c, "first") for c in refs] + [(self.new, "new")] * 2
                         + [(c, "last") for c in reversed(refs)]):
            what = series([c.row for c in chosen if pos == "new" or c.against == arm])
            self.log(f"A/B round {n}/{self.cfg.max_rounds}: "
                     f"{'new' if pos == 'new' else 'reference'} {arm[:10]}: "
                     + "; ".join(f"{k} at {', '.join(s)}" for k, s in what.items()))
            got, walls = self.measure(arm, what)
            self.costs.learn(arm, walls)
            for key, v in got.items():
                here.setdefault((arm, pos, key), []).append(v)
            for c in chosen:           # asked for, not reported: no value to pair, ever
                if (pos == "new" or c.against == arm) and c.key not in got \
                        and c.state is State.OPEN:
                    c.close(Stop.MISSING,
                            f"{self.who(arm)}'s measurement here reported nothing for it",
                            self.n)
            for c in self.undecided() if pos == "last" else ():
                first, last, new = (here.get(x, []) for x in (
                    (arm, "first", c.key), (arm, "last", c.key), (self.new, "new", c.key)))
                if c.against == arm and first and last and len(new) == 2:
                    c.refs.append(first + last)
                    c.news.append(list(new))
                    # k: how many new-code steps apart its two processes are (R1 .. N N .. R1)
                    c.ks.append(2 * len(refs) + 1 - 2 * refs.index(arm))
        if self.overtime:
            for c in chosen:
                c.measured_overtime = True

    def needs(self, c: Comparison) -> int:
        """Rounds c needs before a decision: 1 with its own prior, else RUN_DOF dof's worth."""
        p = self.prior(c.row)
        if p is not None and not p.borrowed:
            return 1
        return min(1 + (math.ceil(RUN_DOF / 2) if p is not None else RUN_DOF), self.cfg.max_rounds)

    def early(self, c: Comparison, e) -> bool:
        """Fewer rounds than a decision needs here, or an interval still unbounded."""
        return c.rounds < self.needs(c) or not (math.isfinite(e.lo) and math.isfinite(e.hi))

    def reachable(self, c: Comparison, e) -> bool:
        cap = c.rounds + self.cfg.max_rounds - self.n
        return decision.reachable(e, c.row.min_effect, cap, self.cfg.alpha, self.family)

    def priority(self, c: Comparison) -> tuple:
        """choose()'s order, lowest first (docs/gate.md section 3)."""
        r = c.row
        e = self.effect_or_none(c) if c.rounds else None
        if c.rounds > c.kept:
            if e is None:          # a failed value: its verdict comes without more rounds
                return (0, -math.inf)
            return (0 if self.early(c, e) or self.reachable(c, e) else 4, e.estimate)
        change = (r.change if c.against == r.reference else r.anchor_change) or 0.0
        # in a flood of candidates, noisy series are the likeliest to sit past the screen
        p = self.prior(r)
        scale = max(r.bound or 0.0, p.sigma if p is not None else 0.0) or 1.0
        if c.rounds:               # carried with its evidence: the kept rounds' estimate
            kept = e.estimate if e is not None else -math.inf
            return (1, kept / scale) if kept <= -r.min_effect else (2, kept)
        if change <= -r.min_effect:
            return (1, change / scale)
        if r.carried:
            return (2, -len(r.carried))
        return (3, change / scale)

    def choose(self, left: float, first: bool = False) -> list[Comparison]:
        """The undecided comparisons, by priority, whose rounds still needed fit in `left` s."""
        arms: dict[str, set] = {}
        chosen, times = [], 1
        for c in sorted(self.undecided(), key=self.priority):
            t = c.target
            if t in arms.get(c.against, ()) and t in arms.get(self.new, ()):
                chosen.append(c)   # its targets are measured anyway
                continue
            still = self.needs(c) - c.rounds
            if still > self.cfg.max_rounds - self.n:
                continue           # the cap leaves it too few rounds to decide
            trial = {a: set(ts) for a, ts in arms.items()}
            trial.setdefault(c.against, set()).add(t)
            trial.setdefault(self.new, set()).add(t)
            if self.costs.round_s(trial) * max(times, still) <= left or (first and not chosen):
                arms, times = trial, max(times, still)
                chosen.append(c)
        return chosen

    def moved(self) -> list[tuple[Comparison, str]]:
        """The comparisons whose own A/A control moved in its rounds here, each described."""
        todo = self.undecided()
        judges = [c for c in todo if self.judges_gpu(c.row)]
        if todo and not judges and not self.unguarded:
            self.unguarded = True
            self.log("no A/A control from here on: every series still undecided has noise "
                     "borrowed from other series (gemm calibrate them on this runner to guard "
                     "their A/B)")
        out = []
        for c in judges:
            refs, pairs, ks = c.refs[c.kept:], c.news[c.kept:], c.ks[c.kept:]   # measured here
            if not refs or any(None in p for p in refs + pairs):
                continue
            first, last = [a for a, _ in refs], [b for _, b in refs]
            ok, e = decision.aa_stable(first, last, c.row.min_effect, self.cfg.alpha,
                                       self.family, self.prior(c.row), new_pairs=pairs, k=ks)
            if not ok:
                out.append((c, f"{c.describe()}, A/A of {c.against[:10]}: {e.describe()}"))
        return out

    def guard(self, moved: list[tuple[Comparison, str]]) -> None:
        """Restart what the control moved; close what had been restarted or moved in overtime."""
        said = "; ".join(why for _, why in moved)    # nothing moved: nothing is hit
        hit = dict(moved) | {c: said for c in self.undecided()
                             if moved and not self.judges_gpu(c.row) and c.rounds > c.kept}
        again = [c for c in hit if not c.since and not self.overtime]
        for c, why in hit.items():
            if c in again:
                c.restart(self.n)
            else:   # what it decided before stands; its open rounds are not carried (abreport)
                how = ("the A/A control moved during overtime" if self.overtime
                       else "the GPU was unstable: the A/A control moved twice")
                c.close(Stop.UNSTABLE, f"{how} ({why})", self.n)
        if again:
            self.log(f"the A/A control moved ({said}): the rounds here of what it moved "
                     f"({len(again)} comparison{'s' * (len(again) > 1)}) are discarded and "
                     "measured again")

    def decide_round(self) -> None:
        """Decide what the rounds let decide, or mark failed; a row's DROP moots its others."""
        for c in self.undecided():
            if c.rounds <= c.kept:   # not measured here yet (no room so far)
                continue
            failed = next((arm for arm, pairs in ((self.new, c.news), (c.against, c.refs))
                           if any(None in p for p in pairs)), None)
            if failed is not None:
                c.state, c.new_failed = State.FAILED, failed == self.new
                c.why = f"{self.who(failed)} failed when measured here"
            elif c.rounds >= self.cfg.min_rounds:
                e = self.effect(c)
                if e.verdict != decision.AMBIGUOUS:
                    c.state = State.DECIDED
        # reversed: where a row has two DROPs, the first one's commit is the one kept
        drops = {id(c.row): c.against for c in reversed(self.comps)
                 if c.state is State.DECIDED and self.effect(c).verdict == decision.DROP}
        for c in self.comps:
            if c.state in (State.OPEN, State.CLOSED) and id(c.row) in drops:
                c.state, c.stop = State.MOOT, None
                c.why = f"not needed: the drop against {drops[id(c.row)][:10]} decides the row"

    def effect(self, c: Comparison):
        """c's effect (ValueError without a complete round or with a failed value)."""
        r = c.row
        robust = (self.cal.robust_prior(*r.key)
                  if self.cal is not None and self.cfg.robust and not c.kept else None)
        return self.cfg.decide(c.refs, c.news, r.min_effect, self.family, self.prior(r),
                               robust, c.ks)

    def effect_or_none(self, c: Comparison):
        try:
            return self.effect(c)
        except ValueError:
            return None

    def estimate(self, c: Comparison):
        """c's decision, else its effect so far (AMBIGUOUS); None without a value to decide."""
        e = self.effect_or_none(c) if c.rounds > c.kept else None   # a failed value: None
        return e if e is None or c.state is State.DECIDED else replace(
            e, verdict=decision.AMBIGUOUS)

    def run(self) -> None:
        """Rounds until every comparison is decided or closed (each closed one says why)."""
        clock = self.clock or time.monotonic
        t0 = clock()
        while self.n < self.cfg.max_rounds and self.undecided():
            spent = clock() - t0
            chosen = [] if self.overtime else self.choose(self.cfg.budget_s - spent,
                                                             first=self.n == 0)
            if not chosen:   # no more within the budget: overtime for what is on course
                self.past_budget()
                left = self.cfg.budget_s + self.cfg.overtime_s - spent
                chosen = self.choose(left) if self.undecided() else []
                if not chosen:
                    why = (f"out of the A/B's overtime ({self.cfg.overtime_s:.0f} s past its "
                           f"{self.cfg.budget_s:.0f}-s budget) after {self.n} rounds")
                    return self.end(Stop.BUDGET, why)
            self.measure_round(self.n + 1, chosen)
            if self.n < self.cfg.min_rounds:
                continue
            self.guard(self.moved())
            self.decide_round()
        for c in self.undecided():   # the round cap came first
            if not c.rounds:
                c.close(Stop.CAP, "not measured: no room for it in the A/B's rounds (the "
                                  "most suspicious go first)", self.n)
        self.end(Stop.CAP, f"still ambiguous after {self.n} rounds")

    def end(self, stop: Stop, why: str) -> None:
        for c in self.undecided():
            c.close(stop, why, self.n)

    def past_budget(self) -> None:
        """Out of budget: close the undecided but what is on course for a DROP, and its riders."""
        total, over = self.n, self.cfg.overtime_s
        budget = f"the A/B time budget ({self.cfg.budget_s:.0f} s)"
        todo = self.undecided()
        course = [c for c in todo if over > 0 and self.on_course(c)]
        shared = {(c.against, c.target) for c in course}
        riders = [c for c in todo if c not in course and (c.against, c.target) in shared]
        keep = course + riders
        waiting = [c for c in todo if not c.rounds and c not in keep]
        for c in [c for c in todo if c not in keep]:
            if self.overtime and c in self.riders:
                why = (f"measured with its target's other metric in overtime until that one "
                       f"stopped, after {total} rounds")
            elif self.overtime:
                why = f"no longer on course for a DROP after {total} rounds (overtime)"
            elif c in waiting:
                why = (f"not measured: out of {budget}; {len(waiting)} comparisons found no "
                       f"room in its {total} rounds (the most suspicious go first)")
            else:
                why = f"out of {budget} after {total} rounds"
            c.close(Stop.BUDGET, why, total)
        if waiting:
            self.log(f"{len(waiting)} of {len(self.comps)} comparisons not measured: "
                     f"no room in {budget}")
        self.riders = riders
        if keep and not self.overtime:
            self.log(f"out of {budget} after {total} rounds; overtime (up to {over:.0f} s more, "
                     f"within {self.cfg.max_rounds} rounds) for what is on course for a DROP: "
                     + "; ".join(f"{c.describe()} vs {c.against[:10]}: "
                                 f"{self.effect(c).describe()}" for c in course)
                     + "".join(f"; with it, measured anyway: {c.describe()}" for c in riders))
            self.overtime = True

    def on_course(self, c: Comparison) -> bool:
        """Worth overtime: can reach a DROP by the cap, or, while early(), an estimate past -m."""
        e = self.effect_or_none(c)
        if e is None:
            return False
        if self.early(c, e):
            return e.estimate < -c.row.min_effect / 2
        return self.reachable(c, e)


def carried(values: dict | None) -> tuple[list, list, list]:
    """Kept rounds (a verdict's effect values) as a Comparison's; none unless all are complete."""
    first, last, new, ks = ((values or {}).get(x) or [] for x in ("first", "last", "new", "k"))
    n = len(first)
    if not (n and len(last) == n == len(ks) and len(new) == 2 * n
            and all(map(abtest.usable, first + last + new))
            and all(abtest.usable(k, int) for k in ks)):
        return [], [], []
    return [list(p) for p in zip(first, last)], [new[2 * j:2 * j + 2] for j in range(n)], list(ks)


def series(rows: list[Row]) -> dict[str, list[str]]:
    """{kernel: [sizes]} of the rows' targets, in order, each size once."""
    return {k: list(dict.fromkeys(r.size for r in rows if r.kernel == k))
            for k in dict.fromkeys(r.kernel for r in rows)}
