"""The rounds of one commit's A/B and the decisions they lead to (gemm.track.confirm runs it;
gemm.track.abreport turns it into each row's verdict and note)."""
from __future__ import annotations

import math
import time

from . import abtest, decision, plan
from .gate import GateConfig, Row


class ABRun:
    """The rounds of one commit's A/B and the decisions they lead to."""

    def __init__(self, comparisons, cfg: GateConfig, new: str, tree: dict, log, calibration,
                 speeds: dict | None = None):
        self.comps = comparisons
        self.cfg, self.new, self.tree, self.log, self.cal = cfg, new, tree, log, calibration
        # Bonferroni over every comparison, every look, and the one allowed restart
        self.family = decision.family_size(len(comparisons), cfg.min_rounds, cfg.max_rounds)
        self.decided: dict[int, decision.Effect] = {}
        self.failed: dict[int, tuple[bool, str]] = {}   # (the new code failed?, why)
        self.moot: dict[int, str] = {}   # left open: another comparison of its row is a DROP
        self.closed: dict[int, str] = {}  # left open at the time budget (others ran overtime)
        self.overtime: set[int] = set()   # kept past the time budget (on course for a DROP)
        self.over_measured: set[int] = set()  # ... and measured there
        self.upto: dict[int, int] = {}    # rounds a comparison had when it left the undecided
        self.n = 0                        # rounds so far
        self.values: dict = {}            # (arm, key) -> {round: values}
        self.unguarded = False            # said once: no series here can judge the GPU
        self.untrusted: set[int] = set()  # left open because the A/A control moved: their
                                          # rounds are not carried to the next commit
        self.costs = plan.Costs(speeds)   # what a round costs (learned as measured)

    def prior(self, r: Row):
        return self.cal.prior(r.kernel, r.size, r.metric) if self.cal is not None else None

    def undecided(self) -> list[int]:
        return [i for i in range(len(self.comps))
                if i not in self.decided and i not in self.failed and i not in self.moot
                and i not in self.closed]

    def measure_round(self, n: int, chosen: list[int]) -> None:
        """Round n over the comparisons `chosen` (what else their targets give comes free)."""
        plan: dict[str, list[Row]] = {}
        for i in chosen:
            r, c = self.comps[i]
            plan.setdefault(c, []).append(r)
        refs = list(plan)
        union = series([self.comps[i][0] for i in chosen])
        for sha, pos in abtest.palindrome(refs, self.new):
            what = union if pos == "new" else series(plan[sha])
            self.log(f"regress: A/B round {n}/{self.cfg.max_rounds}: "
                     f"{'new' if pos == 'new' else 'reference'} {sha[:10]}: "
                     + "; ".join(f"{k} at {', '.join(s)}" for k, s in what.items()))
            arm = "new" if pos == "new" else sha
            walls: dict = {}
            got = abtest.measure(self.tree[sha], what, walls=walls)
            self.costs.learn(sha, walls)
            for key, v in got.items():
                d = self.values.setdefault((arm, key), {})
                if pos == "new":
                    d.setdefault(n, []).append(v)
                    continue
                d.setdefault(n, {})[pos] = v
                if pos == "first":     # how many new-code steps apart its two processes are
                    d[n]["k"] = 2 * len(refs) + 1 - 2 * refs.index(sha)   # (R1 .. N N .. R1)
            for i in chosen:           # asked for, not reported: no value to pair, ever
                r, c = self.comps[i]
                if (pos == "new" or c == sha) and (r.kernel, r.size, r.metric) not in got \
                        and i in self.undecided():
                    self.close(i, f"{'the new code' if pos == 'new' else 'the reference ' + sha[:10]}"
                                  f"'s measurement here reported nothing for it")
        if self.overtime:
            self.over_measured.update(chosen)

    def close(self, i: int, why: str) -> None:
        """Leave comparison i open (UNRESOLVED) for `why`, with the rounds it has now."""
        self.closed[i] = why
        self.upto.setdefault(i, len(self.paired(i)[0]))

    def paired(self, i: int) -> tuple[list, list, list]:
        """Comparison i's rounds: ([[first, last] of the reference], [[new, new]], [k]),
        round by round, only rounds in which both its arms were measured in full; once it
        left the undecided (decided, closed), only the rounds it had then."""
        r, c = self.comps[i]
        key = (r.kernel, r.size, r.metric)
        ref, new = self.values.get((c, key), {}), self.values.get(("new", key), {})
        refs, news, ks = carried(r.carried_rounds.get(c))
        for n in sorted(ref):
            got, nv = ref[n], new.get(n, [])
            if "first" in got and "last" in got and len(nv) == 2:
                refs.append([got["first"], got["last"]])
                news.append(list(nv))
                ks.append(got["k"])
        upto = self.upto.get(i)
        return (refs, news, ks) if upto is None else (refs[:upto], news[:upto], ks[:upto])

    def kept(self, i: int) -> int:
        """How many of comparison i's rounds were kept from an earlier commit (gemm.track.carry)."""
        r, c = self.comps[i]
        return len(carried(r.carried_rounds.get(c))[0])

    def new_values(self, r: Row) -> list:
        """Every value of the row's new code measured here, round by round."""
        d = self.values.get(("new", (r.kernel, r.size, r.metric)), {})
        return [v for n in sorted(d) for v in d[n]]

    def reachable(self, i: int, e) -> bool:
        """On course for a DROP and able to get there in the rounds left to it
        (decision.reachable, with this comparison's own cap)."""
        cap = len(self.paired(i)[0]) + self.cfg.max_rounds - self.n
        return decision.reachable(e, self.comps[i][0].min_effect, cap)

    def priority(self, i: int) -> tuple:
        """Which comparison a round takes first when not all fit the time left: those carried
        UNRESOLVED from earlier commits and not measured yet, those the A/B has on course for
        a DROP, then those not measured yet (the furthest past their screen, or past their
        noise where that is larger, first), then the others measured (the slowest estimate
        first)."""
        r, c = self.comps[i]
        if r.carried and (c, (r.kernel, r.size, r.metric)) not in self.values:
            return (-1, -len(r.carried))
        if self.paired(i)[0]:
            try:
                e = self.effect(i)
            except ValueError:     # a failed value: its verdict comes without more rounds
                return (0, -math.inf)
            return (0 if self.reachable(i, e) else 2, e.estimate)
        # the screened drop in units of what makes it noise: the screen, or the series'
        # per-process noise where that is larger (in a flood, noisy series are the likeliest
        # to sit past the screen by chance)
        change = r.change if c == r.reference else r.anchor_change
        p = self.prior(r)
        scale = max(r.bound or 0.0, p.sigma if p is not None else 0.0)
        return (1, (change or 0.0) / (scale or 1.0))

    def choose(self, left: float, first: bool = False) -> list[int]:
        """The undecided comparisons a round can take in `left` seconds (gemm.track.plan),
        by priority; a comparison whose target the round measures anyway comes free. The
        first round takes at least the first comparison, whatever the budget."""
        arms: dict[str, set] = {}
        chosen = []
        for i in sorted(self.undecided(), key=self.priority):
            r, c = self.comps[i]
            t = (r.kernel, r.size)
            if t in arms.get(c, ()) and t in arms.get(self.new, ()):
                chosen.append(i)
                continue
            trial = {a: set(ts) for a, ts in arms.items()}
            trial.setdefault(c, set()).add(t)
            trial.setdefault(self.new, set()).add(t)
            if self.costs.round_s(trial) <= left or (first and not chosen):
                arms = trial
                chosen.append(i)
        return chosen

    def judges_gpu(self, r: Row) -> bool:
        """Does this series' A/A control judge the GPU? Only where its noise is known: its own
        calibration on this runner, or no calibration file at all (the rounds' own spread;
        likewise a series that neither has nor can borrow calibrated noise). Noise
        borrowed from other series is a fair stand-in for deciding a drop against the minimum
        effect, not for telling the GPU from the series: the A/A's drift correction
        multiplies the new code's process-to-process noise by k (3 with one reference), and a
        series noisier than the one it borrows from reads as a GPU that moved
        (docs/gate-history.md)."""
        return self.cal is None or not self.cal.borrowed(r.kernel, r.size, r.metric)

    def unstable(self) -> str | None:
        """The first A/A control that moved, described; None if every one held. Judged on
        the series whose noise is known (judges_gpu); where the undecided include none, the
        rounds go unguarded, and the log says so once."""
        todo = self.undecided()
        judges = [i for i in todo if self.judges_gpu(self.comps[i][0])]
        if todo and not judges and not self.unguarded:
            self.unguarded = True
            self.log("regress: no A/A control from here on: every series still undecided "
                     "has noise borrowed from other series (gemm calibrate them on this runner "
                     "to guard their A/B)")
        for i in judges:
            r, c = self.comps[i]
            kept = self.kept(i)
            refs, pairs, ks = (x[kept:] for x in self.paired(i))   # rounds measured here
            first, last = [a for a, _ in refs], [b for _, b in refs]
            if not refs or None in first or None in last or any(None in p for p in pairs):
                continue
            ok, e = decision.aa_stable(first, last, r.min_effect, self.cfg.alpha, self.family,
                                       self.prior(r), new_pairs=pairs, k=ks)
            if not ok:
                return f"{r.kernel} at {r.size} ({r.label}), A/A of {c[:10]}: {e.describe()}"
        return None

    def decide_round(self) -> None:
        for i in self.undecided():
            r, c = self.comps[i]
            refs, news, _ = self.paired(i)
            if len(refs) <= self.kept(i):   # not measured here yet (no room so far)
                continue
            if any(v is None for p in news for v in p):
                self.failed[i] = (True, "the new code failed when measured here")
                self.upto[i] = len(refs)
                continue
            if any(v is None for p in refs for v in p):
                self.failed[i] = (False, f"the reference {c[:10]} failed when measured here")
                self.upto[i] = len(refs)
                continue
            if len(refs) < self.cfg.min_rounds:
                continue
            e = self.effect(i)
            if e.verdict != decision.AMBIGUOUS:
                self.decided[i] = e
                self.upto[i] = len(refs)
        # a row with a DROP against one commit is a DROP whatever its other comparisons say
        # (a drift: a drop against the anchor, an ambiguous step against the previous
        # commit): no more rounds for those
        # (and those closed at the time budget while another comparison of the row ran on)
        for i in self.undecided() + list(self.closed):
            r = self.comps[i][0]
            hit = next((self.comps[j][1] for j, e in self.decided.items()
                        if self.comps[j][0] is r and e.verdict == decision.DROP), None)
            if hit:
                self.closed.pop(i, None)
                self.moot[i] = f"not needed: the drop against {hit[:10]} decides the row"
                self.upto.setdefault(i, len(self.paired(i)[0]))

    def robust_prior(self, r: Row):
        return (self.cal.robust_prior(r.kernel, r.size, r.metric)
                if self.cal is not None and self.cfg.robust else None)

    def effect(self, i: int):
        """Comparison i's effect (GateConfig.decide: round by round by means, or by Huber
        locations where the robust rule is on)."""
        r, _ = self.comps[i]
        # the rounds this comparison was measured in (its row's new code may have been
        # measured in others, for its comparison with another commit)
        refs, news, _ = self.paired(i)
        robust = None if self.kept(i) else self.robust_prior(r)   # kept rounds: round by round
        return self.cfg.decide(refs, news, r.min_effect, self.family, self.prior(r), robust)

    def run(self) -> None:
        restarts, n, total = 0, 0, 0
        t0 = time.monotonic()
        while n < self.cfg.max_rounds and self.undecided():
            spent = time.monotonic() - t0
            chosen = [] if self.overtime else self.choose(self.cfg.budget_s - spent,
                                                          first=total == 0)
            if not chosen:   # no more within the budget: overtime for what is on course
                self.past_budget(total)
                left = self.cfg.budget_s + self.cfg.overtime_s - spent
                chosen = self.choose(left) if self.undecided() else []
                if not chosen:
                    for i in self.undecided():
                        self.close(i, f"out of the A/B's overtime ({self.cfg.overtime_s:.0f}"
                                      f" s past its {self.cfg.budget_s:.0f}-s budget) "
                                      f"after {total} rounds")
                    break
            n, total = n + 1, total + 1
            self.n = n
            self.measure_round(n, chosen)
            if n < self.cfg.min_rounds:
                continue
            moved = self.unstable()
            if moved and self.overtime:
                # in overtime: what was decided within the budget stands (as with no overtime);
                # only the comparisons measured on are left open, and said why
                self.untrusted.update(self.undecided())
                for i in self.undecided():
                    self.close(i, f"the A/A control moved during overtime ({moved})")
                break
            if moved:
                if restarts == 0:
                    self.log(f"regress: the A/A control moved ({moved}): the GPU changed "
                             "during the A/B; its rounds and decisions are discarded and "
                             "measured again")
                    restarts, n, self.n, self.values = 1, 0, 0, {}
                    self.decided, self.failed, self.moot = {}, {}, {}
                    self.closed, self.overtime, self.over_measured = {}, set(), set()
                    self.upto = {}
                    continue
                self.untrusted.update(self.undecided())
                self.finish(f"the GPU was unstable: the A/A control moved twice ({moved})")
                return
            self.decide_round()
        for i in self.undecided():   # the round cap came first
            if not self.paired(i)[0]:
                self.close(i, "not measured: no room for it in the A/B's rounds (the most "
                              "suspicious go first)")
        self.finish(f"still ambiguous after {total} rounds")

    def past_budget(self, total: int) -> None:
        """No further round fits the time budget: close what is undecided, but for what is on
        course for a DROP (it goes on alone, overtime); each closed comparison keeps why."""
        budget = self.cfg.budget_s
        keep = self.on_course() if self.cfg.overtime_s > 0 else []
        waiting = [i for i in self.undecided() if not self.paired(i)[0]]
        for i in self.undecided():
            if i in keep:
                continue
            if i in self.overtime:
                self.close(i, f"no longer on course for a DROP after {total} rounds (overtime)")
            elif i in waiting:
                self.close(i, f"not measured: out of the A/B time budget ({budget:.0f} s);"
                              f" {len(waiting)} comparisons found no room in its "
                              f"{total} rounds (the most suspicious go first)")
            else:
                self.close(i, f"out of the A/B time budget ({budget:.0f} s) after {total} rounds")
        if waiting:
            self.log(f"regress: {len(waiting)} of {len(self.comps)} comparisons not measured: "
                     f"no room in the A/B time budget ({budget:.0f} s)")
        new = [i for i in keep if i not in self.overtime]
        if new:
            self.log(f"regress: out of the A/B time budget ({budget:.0f} s) after {total} "
                     f"rounds; overtime (up to {self.cfg.overtime_s:.0f} s more, within "
                     f"{self.cfg.max_rounds} rounds) for what is on course for a DROP: "
                     + "; ".join(f"{self.comps[i][0].kernel} at {self.comps[i][0].size} "
                                 f"({self.comps[i][0].label}) vs {self.comps[i][1][:10]}: "
                                 f"{self.effect(i).describe()}" for i in new))
            self.overtime.update(new)

    def on_course(self) -> list[int]:
        """The undecided comparisons on course for a DROP that a DROP can still reach within
        the round cap (overtime: decision.on_course, decision.reachable)."""
        keep = []
        for i in self.undecided():
            try:
                e = self.effect(i)
            except ValueError:       # no complete round, or a failed value
                continue
            if self.reachable(i, e):
                keep.append(i)
        return keep

    def finish(self, why_unresolved: str) -> None:
        """Each row's verdict, note and effects from its comparisons (gemm.track.abreport)."""
        from .abreport import finish
        finish(self, why_unresolved)


def carried(values: dict | None) -> tuple[list, list, list]:
    """Kept rounds (a verdict's effect values: first, last, new in pairs, k) as paired()'s;
    none unless every round is complete: positive numbers and an integer k for each."""
    if not values:
        return [], [], []
    first, last, new, ks = (values.get(x) or [] for x in ("first", "last", "new", "k"))
    n = len(first)
    ok = (n and len(last) == n and len(new) == 2 * n and len(ks) == n
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
                  and math.isfinite(x) for x in first + last + new)
          and all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in ks))
    if not ok:
        return [], [], []
    return ([[first[j], last[j]] for j in range(n)],
            [new[2 * j:2 * j + 2] for j in range(n)], list(ks))


def series(rows: list[Row]) -> dict[str, list[str]]:
    return abtest.series_of((r.kernel, r.size) for r in rows)
