"""The ping-pong synchronisation of 15 and 18, modelled in Python (no GPU): one block's producer and
two consumer warpgroups, its full / empty mbarriers with PTX's parity waits, the TMA copies
and wgmma groups completing at arbitrary later times, and the two named barriers that order
the consumers. A random scheduler interleaves them; every run must finish (no deadlock),
every wgmma group must read the fill it expects for as long as it runs, and no copy may
overwrite a stage that a group still reads. The same model without the ordering barrier must
be caught (the parity waits alias), so the check can fail.

The model follows kernels/15_bf16_pingpong.cu line by line: fill g = j * ktiles + kt of local
tile j in stage g % STAGES, phase (g / STAGES) & 1; consumer w owns j = w, w + 2, ...; it
waits on barrier 1 + w before each tile but the block's first and arrives on the other's
after issuing a tile's last group when the block has a next tile; lane 0 of each of its 4
warps arrives on `empty` after wgmma_wait<1> (the previous K tile) and after wgmma_wait<0>
(a tile's last). `early` moves that arrive to after the release of K step ktiles - 1 - early:
kernels/18 hands over one K step early (after the wait<1> of its second last K step)."""
import random

import pytest


class Mbar:
    """An mbarrier: `count` arrivals and the announced transaction bytes complete a phase."""

    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, expect_tx=0):
        assert self.pending > 0
        self.tx += expect_tx
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, n):
        self.tx -= n
        assert self.tx >= 0
        self._maybe_complete()

    def try_wait_parity(self, parity):
        # mbarrier.try_wait.parity: true once the phase of that parity has completed, i.e.
        # when the current (incomplete) phase has the other parity
        return (self.phase & 1) != parity


class Violation(AssertionError):
    pass


def simulate(n_local, ktiles, stages, seed, ordered=True, steps=200000, early=None):
    """ktiles: every tile's K steps, or a list of each local tile's (jobs of unequal length)."""
    rng = random.Random(seed)
    lengths = [ktiles] * n_local if isinstance(ktiles, int) else list(ktiles)
    full = [Mbar(1) for _ in range(stages)]
    empty = [Mbar(4) for _ in range(stages)]
    content = [None] * stages        # which fill a stage holds (None: being written / never)
    reading = [0] * stages           # wgmma groups in flight that read the stage
    named = {1: [0, 0], 2: [0, 0]}   # id -> [threads arrived, generation]
    landings = []                    # TMA copies in flight (any order)
    queues = {0: [], 1: []}          # each consumer's wgmma groups in flight (in order)
    stored = []

    def producer():
        g = 0
        for j in range(n_local):
            for kt in range(lengths[j]):
                s = g % stages
                while not empty[s].try_wait_parity(((g // stages) & 1) ^ 1):
                    yield
                full[s].arrive(expect_tx=2)        # expect_tx of both boxes' bytes
                if reading[s]:
                    raise Violation(f"fill {g} overwrites stage {s} while a group reads it")
                content[s] = None

                def land(s=s, g=g):
                    content[s] = g
                    full[s].complete_tx(2)
                landings.append(land)
                g += 1
                yield

    def consumer(w):
        groups = []                               # in-flight groups: (stage, fill, done flag)

        def issue(s, g):
            if content[s] != g:
                raise Violation(f"consumer {w} issues on fill {g}: stage {s} holds {content[s]}")
            reading[s] += 1
            grp = {"s": s, "g": g, "done": False}
            groups.append(grp)

            def finish(grp=grp):
                if content[grp["s"]] != grp["g"]:
                    raise Violation(f"fill {grp['g']} changed under its wgmma group")
                reading[grp["s"]] -= 1
                grp["done"] = True
            queues[w].append(finish)              # a warpgroup's groups finish in order

        def wait_groups(n):
            while sum(not x["done"] for x in groups) > n:
                yield

        def signal(j):                            # bar.arrive 2 - w, 256
            if ordered and j + 1 < n_local:
                bid = 2 - w
                named[bid][0] += 128
                if named[bid][0] == 256:
                    named[bid][0] = 0
                    named[bid][1] += 1

        for j in range(w, n_local, 2):
            g = sum(lengths[:j])
            if ordered and j > 0:                 # bar.sync 1 + w, 256
                bid = 1 + w
                gen = named[bid][1]
                named[bid][0] += 128
                if named[bid][0] == 256:
                    named[bid][0] = 0
                    named[bid][1] += 1
                while named[bid][1] == gen:
                    yield
            for kt in range(lengths[j]):
                s = g % stages
                while not full[s].try_wait_parity((g // stages) & 1):
                    yield
                issue(s, g)
                yield from wait_groups(1)
                if kt > 0:
                    for _ in range(4):
                        empty[(g - 1) % stages].arrive()
                if early is not None and kt == lengths[j] - 1 - early:
                    signal(j)
                g += 1
                yield
            if early is None or lengths[j] - 1 - early < 0:
                signal(j)
            yield from wait_groups(0)
            for _ in range(4):
                empty[(g - 1) % stages].arrive()
            stored.append(j)
            yield

    agents = [producer(), consumer(0), consumer(1)]
    live = list(agents)
    for _ in range(steps):
        choices = live + (["land"] if landings else []) + [q for q in queues.values() if q]
        if not choices:
            break
        pick = rng.choice(choices)
        if pick == "land":
            landings.pop(rng.randrange(len(landings)))()
        elif isinstance(pick, list):
            pick.pop(0)()
        else:
            try:
                next(pick)
            except StopIteration:
                live.remove(pick)
    else:
        raise Violation("did not finish: deadlock (or too few steps)")
    if live or landings or any(queues.values()):
        raise Violation("did not finish")
    assert sorted(stored) == list(range(n_local))
    # every mbarrier ends with no partial phase and the named barriers with no stray arrivals
    assert all(b.pending == b.count and b.tx == 0 for b in full + empty)
    assert all(v[0] == 0 for v in named.values())


CASES = [(n, k, s) for n in (1, 2, 3, 4, 5) for k in (1, 2, 3, 5, 9) for s in (2, 3, 4)]


@pytest.mark.parametrize("n_local,ktiles,stages", CASES,
                         ids=[f"tiles{n}-ktiles{k}-stages{s}" for n, k, s in CASES])
def test_pingpong_protocol_finishes_and_reads_the_right_fills(n_local, ktiles, stages):
    for seed in range(40):
        simulate(n_local, ktiles, stages, seed)


@pytest.mark.parametrize("n_local,ktiles,stages", CASES,
                         ids=[f"tiles{n}-ktiles{k}-stages{s}" for n, k, s in CASES])
def test_18s_hand_over_one_k_step_early_reads_the_right_fills(n_local, ktiles, stages):
    for seed in range(40):
        simulate(n_local, ktiles, stages, seed, early=1)


def test_a_hand_over_stages_k_steps_early_is_caught():
    """The other consumer's first wait is on the fill STAGES after one we have not waited for:
    its parity aliases. (Up to STAGES - 1 steps early the producer's order keeps it safe: the
    other consumer's later fills are issued only after we release the stages we waited on.)"""
    caught = 0
    for seed in range(300):
        try:
            simulate(3, 6, 2, seed, early=2)
        except Violation:
            caught += 1
    assert caught


def test_without_the_ordering_barrier_the_parity_waits_alias():
    """Consumer 1 waiting on fill g while the fill STAGES before it has not landed sees the
    stage's parity as done: the model must catch that somewhere."""
    caught = 0
    for seed in range(200):
        try:
            simulate(3, 3, 4, seed, ordered=False)   # fill 4 (consumer 1) follows fill 0 (0)
        except Violation:
            caught += 1
    assert caught
