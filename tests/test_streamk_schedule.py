"""The stream-K hybrid of kernels/18 (-DSTREAM_K=1), modelled in Python (no GPU): sk_whole_end,
sk_lo, sk_plan and sk_job mirrored line by line (each block's whole tiles, then its stream-K
jobs), and the tickets by which the jobs holding parts of a tile sum it through C, for many
(tiles, K steps, grid) cases. Checked: every (tile, K step) is run exactly once; the stream-K
ranges differ by at most one K step; a job hands the tensor cores over exactly where a next job
follows; the producer's fills are the consumers' fills in the same order; in random orders of
the blocks' progress, the jobs of a tile store once and add after that store's writes are done,
no wait is left hanging, and the counters are zero again at the end; the ping-pong protocol
(test_pingpong_protocol's model, with jobs of unequal length) still reads the right fills.
Mutations must be caught, each by its check: a range boundary moved (balance), a range cut short
(coverage), the whole tiles' hand-over test against whole_end instead of ntiles, a consumer's
first stream-K job off its turn, the fill numbering, the ticket's wait and the counters' reset
(the last three wherever a tile is split)."""
import random

import pytest

from gemm.core import registry
from tests.test_pingpong_protocol import Violation, simulate

SK_SLOTS = registry.get("18").defines["SK_SLOTS"]   # the entry's: the kernel's counters


# ---- the kernel's schedule, mirrored (18_bf16_pingpong_tma_store.cu, STREAM_K) ------------
I32 = 2**31


def sk_whole_end(g, ntiles, on=True, sk_from=1):
    waves = ntiles // g
    return (waves - 1) * g if on and g <= SK_SLOTS and waves >= sk_from else ntiles


def sk_lo(b, iters, g, mutate=None):
    q, r = iters // g, iters - iters // g * g
    if mutate == "split" and b == g // 2 and b > 0:
        return b * q + b * r // g + 1             # an off-by-one in one range boundary
    assert b * q < I32 and b * r < I32, (b, iters, g)   # the kernel's ints
    return b * q + b * r // g


def sk_plan(b, g, ntiles, ktiles, whole_end, mutate=None):
    iters = (ntiles - whole_end) * ktiles
    lo, hi = sk_lo(b, iters, g, mutate), sk_lo(b + 1, iters, g, mutate)
    if mutate == "hi" and b == g // 2 and hi > lo:
        hi -= 1                                   # one block's range ends a K step short
    top = (hi - 1) // ktiles if hi > lo else 0
    jobs = whole_end // g + (top - lo // ktiles + 1 if hi > lo else 0)
    return dict(lo=lo, hi=hi, top=top, jobs=jobs)


def sk_job(p, j, dp, whole_end, ktiles, mutate=None):
    u = p["top"] - (j - dp)
    first = u * ktiles
    seg_lo, seg_hi = max(p["lo"], first), min(p["hi"], first + ktiles)
    g0 = dp * ktiles + (p["hi"] - seg_hi)
    if mutate == "g0":
        g0 = dp * ktiles + (seg_lo - p["lo"])    # forward numbering: not the producer's
    return dict(tile=whole_end + u, kb=seg_lo - first, ke=seg_hi - first, g0=g0, u=u)


def block_jobs(b, g, ntiles, ktiles, mutate=None, on=True, sk_from=1):
    """Block b's jobs in turn order, from its two consumers' loops as the kernel runs them:
    consumer cw's whole tiles j = cw, cw + 2, ... while tile b + j g is below whole_end (fills
    from j ktiles; the other consumer has a next job where t + g < ntiles), then, where
    whole_end < ntiles, its stream-K jobs from dp + ((dp - cw) & 1) in steps of 2 below jobs (a
    next job where j + 1 < jobs). Each job carries its hand-over flag. Raises Violation where
    the consumers' jobs are not the turns 0 .. n - 1, each taken once, in alternation."""
    whole_end = sk_whole_end(g, ntiles, on, sk_from)
    dp = whole_end // g
    last = whole_end if mutate == "handover" else ntiles
    plan = dict(whole_end=whole_end, lo=0, hi=0)
    if whole_end < ntiles:
        plan = dict(sk_plan(b, g, ntiles, ktiles, whole_end, mutate), whole_end=whole_end)
    taken = {}                                    # j -> [(consumer, job), ...]
    for cw in range(2):
        j = cw
        while b + j * g < whole_end:              # the whole-tile loop
            t = b + j * g
            taken.setdefault(j, []).append((cw, dict(tile=t, kb=0, ke=ktiles, g0=j * ktiles,
                                                     u=-1, hand_over=t + g < last)))
            j += 2
        if whole_end < ntiles:                    # then the stream-K loop
            j = dp + cw if mutate == "sk_start" else dp + ((dp - cw) & 1)
            while j < plan["jobs"]:
                job = sk_job(plan, j, dp, whole_end, ktiles, mutate)
                taken.setdefault(j, []).append((cw, dict(job, hand_over=j + 1 < plan["jobs"])))
                j += 2
    if sorted(taken) != list(range(len(taken))) or \
            any(len(v) != 1 or v[0][0] != j % 2 for j, v in taken.items()):
        who = sorted((j, [c for c, _ in v]) for j, v in taken.items())
        raise Violation(f"block {b}: the consumers' jobs are not the turns 0 .. n - 1 in "
                        f"alternation: {who[:6]}")
    return plan, [taken[j][0][1] for j in range(len(taken))]


def schedule(ntiles, g, ktiles, mutate=None, sk_from=1):
    """[block] -> (plan, [job, ...]) in the block's turn order."""
    return [block_jobs(b, g, ntiles, ktiles, mutate, sk_from=sk_from) for b in range(g)]


# ---- the checks ----------------------------------------------------------------------------
def check(ntiles, g, ktiles, mutate=None, seeds=3):
    sched = schedule(ntiles, g, ktiles, mutate)
    seen = {}
    for b, (p, jobs) in enumerate(sched):
        for j, job in enumerate(jobs):
            if not (0 <= job["tile"] < ntiles and 0 <= job["kb"] < job["ke"] <= ktiles):
                raise Violation(f"block {b} job {j}: bad job {job}")
            if job["ke"] - job["kb"] < ktiles and not 0 <= job["u"] < 2 * SK_SLOTS:
                raise Violation(f"block {b} job {j}: a part of a tile without a ticket counter")
            for k in range(job["kb"], job["ke"]):
                if (job["tile"], k) in seen:
                    raise Violation(f"(tile {job['tile']}, k {k}) twice: {seen[job['tile'], k]}"
                                    f" and {(b, j)}")
                seen[job["tile"], k] = (b, j)
    if len(seen) != ntiles * ktiles:
        raise Violation(f"{ntiles * ktiles - len(seen)} (tile, k) never run")

    # balance, where stream-K is on: the ranges differ by at most one K step, and every
    # block has a stream-K job (so a whole tile's hand-over test, t + g < ntiles, is right)
    if all(p["whole_end"] < ntiles for p, _ in sched):
        sizes = [p["hi"] - p["lo"] for p, _ in sched]
        if max(sizes) - min(sizes) > 1:
            raise Violation(f"stream-K ranges {min(sizes)} .. {max(sizes)} K steps")
    for b, (p, jobs) in enumerate(sched):
        for j, job in enumerate(jobs):
            if job["hand_over"] != (j + 1 < len(jobs)):
                raise Violation(f"block {b} job {j}: hand-over {job['hand_over']} with "
                                f"{len(jobs)} jobs")

    # the producer's order (every job's K steps in job order) is the consumers' g0 numbering
    for b, (p, jobs) in enumerate(sched):
        g_prod = 0
        for j, job in enumerate(jobs):
            if job["g0"] != g_prod:
                raise Violation(f"block {b} job {j}: consumer's first fill {job['g0']}, "
                                f"producer's {g_prod}")
            g_prod += job["ke"] - job["kb"]
    for seed in range(seeds):
        run_tickets(sched, ktiles, random.Random(seed), mutate)
    return sched


def run_tickets(sched, ktiles, rng, mutate=None):
    """The blocks run in a random interleaving: a consumer's job j starts after job j - 1's
    K loop (the turn) and its own job j - 2's epilogue; a part's epilogue takes its ticket
    (prev = count; count += steps), waits until done == prev, stores (prev 0) or adds, then
    sets done = prev + steps, or both counters to 0 where that completes the tile. Checks:
    C of each tile is written once and then added to, nothing is left waiting, counters 0."""
    count, done, c_state = {}, {}, {}
    loop_done, epi_done = set(), set()
    pending = {b: 0 for b in range(len(sched))}    # the next job whose K loop may start
    epis = []                                       # (b, j, prev) epilogues under way
    while True:
        ready = []
        for b, (p, jobs) in enumerate(sched):
            j = pending[b]
            if j < len(jobs) and (j == 0 or (b, j - 1) in loop_done) \
                    and (j < 2 or (b, j - 2) in epi_done):
                ready.append(("loop", b, j))
        for e in epis:
            b, j, prev = e
            job = sched[b][1][j]
            want = 0 if mutate == "wait" else prev
            if prev is None or done.get(job["u"], 0) == want:
                ready.append(("epi", e))
        if not ready:
            break
        pick = rng.choice(ready)
        if pick[0] == "loop":
            _, b, j = pick
            loop_done.add((b, j))
            pending[b] += 1
            job = sched[b][1][j]
            steps = job["ke"] - job["kb"]
            prev = None
            if steps < ktiles:
                prev = count.get(job["u"], 0)
                count[job["u"]] = prev + steps
            epis.append((b, j, prev))
        else:
            e = pick[1]
            epis.remove(e)
            b, j, prev = e
            job = sched[b][1][j]
            t, steps = job["tile"], job["ke"] - job["kb"]
            if prev is None or prev == 0:
                if t in c_state:
                    raise Violation(f"tile {t} stored twice")
                c_state[t] = steps
            else:
                if t not in c_state:
                    raise Violation(f"tile {t}: block {b} adds before its store")
                c_state[t] += steps
            if prev is not None:
                u = job["u"]
                complete = prev + steps == ktiles if mutate != "reset" else prev == 0
                if complete:
                    count[u] = done[u] = 0
                else:
                    done[u] = prev + steps
            epi_done.add((b, j))
    left = [(b, j) for b, (_, jobs) in enumerate(sched) for j in range(len(jobs))
            if (b, j) not in epi_done]
    if left:
        raise Violation(f"{len(left)} jobs never finished (a wait left hanging), e.g. {left[0]}")
    if any(count.values()) or any(done.values()):
        raise Violation("ticket counters not back to 0 for the next launch")
    bad = [t for t, v in c_state.items() if v != ktiles]
    if bad or len(c_state) != len({j["tile"] for _, jobs in sched for j in jobs}):
        raise Violation(f"tiles summed wrong: {bad[:3]}")


def busiest(ntiles, g, ktiles):
    """The busiest block's K steps, in tiles: the hybrid's and the plain persistent grid's."""
    sched = schedule(ntiles, g, ktiles)
    hybrid = max(sum(j["ke"] - j["kb"] for j in jobs) for _, jobs in sched) / ktiles
    return hybrid, -(-ntiles // g)


CASES = [(t, g, k) for g in (1, 2, 3, 7, 16, 132) for t in (1, 2, 5, 64, 133, 232, 256, 1024)
         for k in (1, 2, 3, 8, 16, 64) if t >= g or g == 132] + [(4096, 132, 128), (300, 200, 5)]


@pytest.mark.parametrize("ntiles,g,ktiles", CASES, ids=[f"T{t}-G{g}-KT{k}" for t, g, k in CASES])
def test_schedule_covers_once_and_tickets_sum_each_tile(ntiles, g, ktiles):
    check(ntiles, g, ktiles)


def test_stream_k_only_from_sk_from_waves():
    """Below SK_FROM whole waves every tile is whole (18's default: 4096 and 2048 whole)."""
    for ntiles, sk_from, split in ((1024, 16, False), (256, 16, False), (4096, 16, True),
                                   (1024, 2, True), (256, 2, False), (256, 1, True)):
        jobs = [j for _, js in schedule(ntiles, 132, 64, sk_from=sk_from) for j in js]
        assert any(j["ke"] - j["kb"] < 64 for j in jobs) == split, (ntiles, sk_from)
    plan, jobs = block_jobs(0, 132, 4096, 128, on=False)   # no TMA epilogue (beta != 0)
    assert plan["whole_end"] == 4096 and len(jobs) == 32 and all(j["u"] == -1 for j in jobs)


def test_range_bounds_in_32_bits():
    """sk_lo's b q + b r / g is b * iters / g without its 64-bit product, past 2^31 too."""
    for g in (1, 7, 131, 132, SK_SLOTS):
        for iters in (0, 1, g - 1, g, 12345, 2**31 // g * g - 1, 2**31 - 1):
            for b in range(g + 1):
                assert sk_lo(b, iters, g) == b * iters // g, (b, iters, g)


def test_problem_shapes():
    """The launch list's shapes as the launcher sizes them (grid = min(tiles, 132))."""
    for m, n, k, bm in ((1000, 836, 504, 128), (3001, 2999, 3003, 128), (4096, 4096, 64, 128),
                        (2048, 2048, 2048, 128), (4096, 4096, 4096, 128), (8192, 8192, 8192, 128),
                        (1024, 1024, 1024, 64), (1536, 1536, 1024, 128), (1536, 1536, 1024, 64)):
        t = -(-m // bm) * -(-n // 128)
        check(t, min(t, 132), -(-k // 64))


def test_expected_busiest_block():
    assert busiest(256, 132, 32) == (63 / 32, 2)          # 2048, BM 128
    h, plain = busiest(1024, 132, 64)                      # 4096
    assert (round(h, 4), plain) == (round(6 + 113 / 64, 4), 8)
    h, plain = busiest(4096, 132, 128)                     # 8192
    assert (round(h, 4), plain) == (round(30 + 132 / 128, 4), 32)


MUTATION_CAUGHT_BY = {"split": ("stream-K ranges",), "hi": ("never run",),
                      "handover": ("hand-over",), "sk_start": ("not the turns",),
                      "g0": ("first fill",), "reset": ("stored twice",),
                      "wait": ("adds before its store", "a wait left hanging")}


def has_split_tile(t, g, k):
    return any(j["ke"] - j["kb"] < k for _, jobs in schedule(t, g, k) for j in jobs)


@pytest.mark.parametrize("mutate", sorted(MUTATION_CAUGHT_BY))
def test_mutations_are_caught(mutate):
    """Each mutation is caught, by a check meant for it; those of the fills and the tickets
    wherever the schedule has a split tile."""
    caught, missed = 0, []
    for t, g, k in CASES:
        try:
            check(t, g, k, mutate)
            missed.append((t, g, k))
        except Violation as exc:
            assert any(m in str(exc) for m in MUTATION_CAUGHT_BY[mutate]), (t, g, k, str(exc))
            caught += 1
    assert caught
    if mutate in ("g0", "wait", "reset"):
        assert not [c for c in missed if has_split_tile(*c)], missed[:5]


# ---- the ping-pong protocol with the hybrid's jobs (test_pingpong_protocol's model) -------
def test_pingpong_protocol_with_the_hybrids_jobs():
    shapes = set()
    for t, g, k in CASES:
        if k > 16:
            continue
        for p, jobs in schedule(t, g, k):
            shapes.add(tuple(j["ke"] - j["kb"] for j in jobs)[-6:])   # the stream-K tail
    shapes = sorted(shapes)
    assert any(1 in s for s in shapes) and any(len(set(s)) > 1 for s in shapes)
    for lengths in shapes:
        for stages in (2, 3, 4):
            for seed in range(6):
                simulate(len(lengths), lengths, stages, seed, early=1, steps=400000)
