"""16_bf16_tma_store's epilogue, modelled in Python (no GPU).

The protocol. One consumer warpgroup stages its 64 x BN fragment EPI_N columns at a time in two
shared-memory buffers (chunk n in buffer n % 2, n counted over the block's tiles); per chunk
its thread 0 (the leader, which owns the bulk groups) waits until at most one bulk group still
reads shared memory (cp.async.bulk.wait_group.read 1), a named barrier, every thread writes its
part and fences it for the async proxy (fence.proxy.async.shared::cta), a second named barrier,
then the leader issues the chunk's TMA store(s) as one bulk group; before exit the leader waits
for every group (cp.async.bulk.wait_group 0). The model runs the warpgroup as a few threads
over every interleaving the barriers allow (exhaustively, states memoised), with the copy
engine as late as PTX lets it be: a group reads its buffer until a wait forces the read done,
and writes global memory until a full wait. It checks that no thread writes a buffer that a
store still reads, that no store is issued while some thread's part of its chunk is unwritten,
stale or unfenced, and that nothing is pending when the leader exits; and that leaving out
each step (either wait, the fence, either barrier) or getting the buffer or wait count wrong
is caught. A fence counts for the writes of the thread that runs it (the order the CUDA
programming guide documents for TMA stores: each writer fences, then the barrier, then one
thread stores). The step order is read from the kernel source, so the model is the kernel's.

The layout. Each thread's st.shared.v2 addresses (a transcription of stage_chunk) must be the
128-byte swizzle that a map with CU_TENSOR_MAP_SWIZZLE_128B uses for a 64 x 32 FP32 box at a
1024-byte-aligned address (16-byte unit u of row r at unit u ^ (r % 8); hopper.cuh's layout,
the one 13-15's loads rely on), cover every element of each box exactly once, and hit each
of the 32 banks exactly twice per warp and instruction (two wavefronts, the least for 256
bytes); unswizzled rows would not (8-way conflicts).
"""
import re
from functools import lru_cache

import pytest

from gemm.core import registry, tuning

SPEC = registry.get("16_bf16_tma_store")


def _spliced(path, seen=None) -> str:
    """A kernel file's text with its quoted includes from kernels/ spliced in where they stand
    (each once), as the compiler reads it."""
    seen = set() if seen is None else seen
    seen.add(path.name)
    return re.sub(r'^\s*#\s*include\s*"([^"]+)"[^\n]*$',
                  lambda m: "" if m.group(1) in seen else _spliced(path.parent / m.group(1), seen),
                  path.read_text(), flags=re.MULTILINE)


SOURCE = _spliced(SPEC.path)   # 16's .cu with tma_store.cuh (its epilogue) and hopper.cuh

# ---- the protocol ------------------------------------------------------------------------
STEPS = ("wait_read", "bar_before_write", "fence", "bar_before_store", "wait_exit")


def program(chunks: int, thread: int, leave_out: tuple = (), buffers: int = 2,
            wait_count: int = 1, subs: int = 1) -> tuple:
    """One thread's operations over `chunks` staged chunks (those of every tile, skipped ones
    left out, as the kernel's counter n), as store_chunks runs them; thread 0 is the leader."""
    lead = thread == 0
    ops = []
    for n in range(chunks):
        buf = n % buffers
        if lead and "wait_read" not in leave_out:
            ops.append(("wait_read", wait_count))
        if "bar_before_write" not in leave_out:
            ops.append(("bar",))
        ops.append(("write", buf, n))
        if "fence" not in leave_out:
            ops.append(("fence",))
        if "bar_before_store" not in leave_out:
            ops.append(("bar",))
        if lead:
            ops += [("store", buf, n)] * subs + [("commit",)]
    if lead and "wait_exit" not in leave_out:
        ops.append(("wait", 0))
    ops.append(("exit",))
    return tuple(ops)


class Violation(AssertionError):
    pass


def explore(progs: tuple) -> int:
    """Every interleaving of the threads' programs (a named barrier over all of them): raises
    Violation at the first hazard, else returns the number of states visited."""
    nthreads = len(progs)
    seen = set()
    # state: pcs, threads waiting at the barrier, per buffer per thread (chunk, fenced),
    # groups whose reads are pending (buffers), groups pending at all, the open group
    start = (tuple([0] * nthreads), frozenset(),
             tuple(tuple((None, False) for _ in range(nthreads)) for _ in range(2)), (), (), ())
    stack = [start]
    while stack:
        state = stack.pop()
        if state in seen:
            continue
        seen.add(state)
        pcs, at_bar, content, reading, pending, open_group = state
        if len(at_bar) == nthreads:                  # the barrier opens for everyone
            stack.append((tuple(p + 1 for p in pcs), frozenset(), content, reading, pending,
                          open_group))
            continue
        for t in range(nthreads):
            if t in at_bar or pcs[t] >= len(progs[t]):
                continue
            op = progs[t][pcs[t]]
            nxt = list(pcs)
            nxt[t] += 1
            c, rd, pd, og, bar = content, reading, pending, open_group, at_bar
            kind = op[0]
            if kind == "bar":
                stack.append((pcs, at_bar | {t}, c, rd, pd, og))
                continue
            if kind == "write":
                _, buf, n = op
                if buf in rd:
                    raise Violation(f"thread {t} writes buffer {buf} (chunk {n}) while a store "
                                    f"still reads it")
                row = list(c[buf])
                row[t] = (n, False)
                c = tuple(tuple(row) if b == buf else c[b] for b in range(len(c)))
            elif kind == "fence":
                c = tuple(tuple((x[0], True) if i == t else x for i, x in enumerate(cb))
                          for cb in c)
            elif kind == "store":
                _, buf, n = op
                for u, (chunk, fenced) in enumerate(c[buf]):
                    if chunk != n:
                        raise Violation(f"store of chunk {n} from buffer {buf}: thread {u}'s "
                                        f"part is {'unwritten' if chunk is None else f'chunk {chunk}'}")
                    if not fenced:
                        raise Violation(f"store of chunk {n}: thread {u}'s writes are not "
                                        f"fenced for the async proxy")
                og = og + (buf,)
            elif kind == "commit":
                rd, pd, og = rd + og, pd + og, ()   # one group (its buffers) per commit
            elif kind == "wait_read":
                rd = rd[len(rd) - op[1]:] if len(rd) > op[1] else rd
            elif kind == "wait":
                rd = rd[len(rd) - op[1]:] if len(rd) > op[1] else rd
                pd = pd[len(pd) - op[1]:] if len(pd) > op[1] else pd
            elif kind == "exit":
                if t == 0 and (pd or og):
                    raise Violation(f"the leader exits with {len(pd) + bool(og)} bulk "
                                    f"group(s) pending")
            stack.append((tuple(nxt), bar, c, rd, pd, og))
    return len(seen)


def run(chunks, threads=3, **kw):
    return explore(tuple(program(chunks, t, **kw) for t in range(threads)))


def tile_origin(t: int, tiles_m: int, tiles_n: int, bm: int, bn: int, group_m: int) -> tuple:
    """The kernel's (14's) persistent tile order, transcribed."""
    band = group_m * tiles_n
    first_m = t // band * group_m
    rows = min(tiles_m - first_m, group_m)
    inn = t % band
    return (first_m + inn % rows) * bm, inn // rows * bn


def chunks_staged(spec, M: int, N: int, grid: int) -> set:
    """How many chunks each consumer of each block stages over its tiles (b, b + grid, ...)
    of an M x N C, as the kernel counts them: none for a consumer whose rows lie below M, a
    chunk right of N skipped."""
    d = spec.defines
    bm, bn, epi = d["BM"], d["BN"], d["EPI_N"]
    tiles_m, tiles_n = -(-M // bm), -(-N // bn)
    out = set()
    for b in range(min(grid, tiles_m * tiles_n)):
        for cw in range(bm // 64):
            n = 0
            for t in range(b, tiles_m * tiles_n, grid):
                row0, col0 = tile_origin(t, tiles_m, tiles_n, bm, bn, d["GROUP_M"])
                if row0 + 64 * cw < M:
                    n += sum(1 for q in range(bn // epi) if col0 + q * epi < N)
            out.add(n)
    return out


@pytest.mark.parametrize("chunks", [0, 1, 2, 3, 5, 8, 16, 24])
def test_the_protocol_is_safe(chunks):
    assert run(chunks) > 0


@pytest.mark.parametrize("cand", [dict(SPEC.defines)] + tuning.candidates(SPEC),
                         ids=lambda c: "-".join(f"{k}{v}" for k, v in sorted(c.items())
                                                if k in ("BM", "BN", "EPI_N", "STAGES")))
def test_the_protocol_is_safe_at_the_kernels_chunk_counts(cand):
    """The registry's constants and every tune candidate, at the chunk counts the kernel's
    blocks reach: one to many tiles per block (the persistent order, transcribed), a C that
    ends inside a tile (chunks skipped), and, where a block has two consumers (BM 128), a
    consumer whose rows lie below M (none; with BM 64 a block's one consumer always has rows)."""
    spec = SPEC.with_defines(**cand)
    subs = spec.defines["EPI_N"] // 32
    per_tile = spec.tile[1] // spec.defines["EPI_N"]
    counts = set()
    for M, N, grid in ((64, 256, 132), (130, 4, 132), (130, 132, 1), (1000, 836, 4),
                       (384, 1000, 2), (2048, 2048, 132)):
        counts |= chunks_staged(spec, M, N, grid)
    assert (0 in counts) is (spec.defines["BM"] > 64)
    assert max(counts) >= 3 * per_tile and counts - {0, per_tile}
    for n in sorted(counts):
        assert run(n, threads=3, subs=subs) > 0


@pytest.mark.parametrize("step,chunks,why", [
    ("wait_read", 3, "still reads"),          # chunk 2 rewrites chunk 0's buffer
    ("bar_before_write", 3, "still reads"),   # a thread writes before the leader has waited
    ("fence", 1, "not fenced"),
    ("bar_before_store", 1, r"store of chunk 0.*thread [12]'s"),  # before the others' parts
    ("wait_exit", 1, "exits with"),
])
def test_each_step_left_out_is_caught(step, chunks, why):
    with pytest.raises(Violation, match=why):
        run(chunks, leave_out=(step,))


def test_one_buffer_or_a_wait_for_two_groups_is_caught():
    with pytest.raises(Violation, match="still reads"):
        run(2, buffers=1)
    with pytest.raises(Violation, match="still reads"):
        run(3, wait_count=2)
    assert run(4, wait_count=0) > 0        # stricter than needed: still safe


def test_the_model_follows_the_kernels_step_order():
    """store_chunks runs the model's steps in the model's order, and the leader waits for
    every group after the tile loop."""
    body = SOURCE[SOURCE.index("__device__ __forceinline__ void store_chunks"):]
    body = body[:body.index("\nextern \"C\"")]
    order = [m.group(0) for m in re.finditer(
        r"bulk_wait_read<1>\(\)|warpgroup_sync\(bar\)|stage_chunk<Q>|fence_async_shared\(\)|"
        r"tma_store_2d\(|bulk_commit\(\)", body)]
    assert order == ["bulk_wait_read<1>()", "warpgroup_sync(bar)", "stage_chunk<Q>",
                     "fence_async_shared()", "warpgroup_sync(bar)", "tma_store_2d(",
                     "bulk_commit()"], order
    assert re.search(r"if \(leader\) bulk_wait_read<1>\(\);", body)
    assert re.search(r"buf = staging \+ \(n & 1\) \* EPI_BYTES", body)
    kernel = SOURCE[SOURCE.index("sgemm_bf16_tma_store("):]
    loop_end = kernel.rindex("store_chunks<0>(")
    assert re.search(r"if \(leader\) bulk_wait<0>\(\);", kernel[loop_end:])
    # the named barrier counts the warpgroup (128 threads), ids 1, 2 (0 is __syncthreads)
    assert re.search(r'bar\.sync %0, 128;', SOURCE) and "EPI_BAR + cw" in kernel
    assert re.search(r"constexpr int EPI_BAR = 1;", SOURCE)


# ---- the layout --------------------------------------------------------------------------
BOX_BYTES = 64 * 128


def stage_addresses(t: int, q: int, epi_n: int) -> list[tuple]:
    """(byte offset in the buffer, row, column in the chunk, register) of each float thread
    t (of 128) writes for chunk q: stage_chunk, transcribed. Two per st.shared.v2."""
    w, l = t // 32, t % 32
    xr, half, lo = l >> 2, (l >> 1) & 1, (l & 1) << 3
    out = []
    for ii in range(epi_n // 8):
        i = q * (epi_n // 8) + ii
        for h in range(2):
            row = 16 * w + (l >> 2) + 8 * h
            unit = (2 * (ii % 4) + half) ^ xr
            addr = (ii // 4) * BOX_BYTES + row * 128 + unit * 16 + lo
            col = 8 * ii + 2 * (l % 4)          # hopper.cuh's fragment: column 8 i + 2 (l % 4)
            out.append((addr, row, col, 4 * i + 2 * h))
            out.append((addr + 4, row, col + 1, 4 * i + 2 * h + 1))
    return out


def tma_swizzle_128b(offset: int) -> int:
    """Where CU_TENSOR_MAP_SWIZZLE_128B puts the byte at `offset` of a box laid out densely
    (rows of 128 bytes) at a 1024-byte-aligned address: bits 4-6 (the 16-byte unit) XOR bits
    7-9 (the row within the 8-row, 1024-byte atom)."""
    return offset ^ (((offset >> 7) & 7) << 4)


@pytest.mark.parametrize("epi_n", [32, 64])
def test_each_element_lands_where_the_c_map_reads_it(epi_n):
    for q in range(SPEC.tile[1] // epi_n):
        seen = {}
        for t in range(128):
            for addr, row, col, reg in stage_addresses(t, q, epi_n):
                box, cs = divmod(col, 32)
                assert addr == box * BOX_BYTES + tma_swizzle_128b(row * 128 + cs * 4), (t, q, reg)
                assert reg // 4 * 8 + 2 * (t % 32 % 4) + reg % 2 == q * epi_n + col  # hopper.cuh
                assert addr not in seen, (t, addr, seen.get(addr))
                seen[addr] = (row, col)
        # every element of the chunk's boxes written once: no box leaves with a stale value
        assert sorted(seen) == list(range(0, 64 * epi_n * 4, 4))


@pytest.mark.parametrize("epi_n", [32, 64])
def test_each_warps_st_shared_v2_hits_each_bank_twice(epi_n):
    for q in range(SPEC.tile[1] // epi_n):
        for w in range(4):
            per_lane = [stage_addresses(32 * w + l, q, epi_n) for l in range(32)]
            for k in range(0, len(per_lane[0]), 2):       # one st.shared.v2: entries k, k + 1
                banks = [0] * 32
                for lane in per_lane:
                    a0, a1 = lane[k][0], lane[k + 1][0]
                    assert a0 % 8 == 0 and a1 == a0 + 4   # one aligned 8-byte store
                    banks[a0 // 4 % 32] += 1
                    banks[a1 // 4 % 32] += 1
                assert banks == [2] * 32, (q, w, k, banks)


def test_without_the_swizzle_a_warps_stores_conflict():
    """The check can fail: the same stores at the dense (row * 128 + byte) offsets put a
    warp's 8 rows on the same 8 banks."""
    banks = [0] * 32
    for l in range(32):
        row, col = l >> 2, 2 * (l % 4)
        for j in range(2):
            banks[(row * 128 + (col + j) * 4) // 4 % 32] += 1
    assert max(banks) == 8


@pytest.mark.parametrize("cand", [dict(SPEC.defines)] + tuning.candidates(SPEC),
                         ids=lambda c: "-".join(f"{k}{v}" for k, v in sorted(c.items())
                                                if k in ("BN", "EPI_N", "STAGES")))
def test_the_staging_buffers_are_aligned_and_fit(cand):
    """Each box starts 1024-byte aligned (the swizzle's atom: r % 8 is the row's), and the
    stages, the staging and the worst alignment slack fit the registry's smem."""
    spec = SPEC.with_defines(**cand)
    d = spec.defines
    bm, bn, stages, epi = d["BM"], d["BN"], d["STAGES"], d["EPI_N"]
    stage_bytes = (bm + bn) * 64 * 2
    epi_bytes = 64 * epi * 4
    consumers = bm // 64
    for cw in range(consumers):
        for b in range(2):
            for s in range(epi // 32):
                off = stages * stage_bytes + (cw * 2 + b) * epi_bytes + s * BOX_BYTES
                assert off % 1024 == 0
    assert 1023 + stages * stage_bytes + consumers * 2 * epi_bytes <= spec.smem
    assert spec.smem <= 227 * 1024


def test_the_c_map_box_is_one_swizzle_row_of_fp32():
    """The registry's C box is 64 rows x 32 FP32 columns (128 bytes: the widest inner box a
    128-byte swizzle takes), the box the kernel's BOX_N and staging assume."""
    (op, rows, cols, swz), = [b for b in SPEC.tma_boxes() if b[0] == "C"]
    assert (rows, cols, swz) == (64, 32, "128B") and cols * 4 == 128
    assert re.search(r"constexpr int BOX_N = 32;", SOURCE)
    assert SPEC.smem == 230400


def test_the_kernel_falls_back_on_the_hosts_test():
    """The kernel takes 14's stores exactly where the host passes a zero map or beta != 0:
    its test is N % 4 and C's 16-byte alignment (gemm.core.tensormaps.addressable) and beta."""
    from gemm.core.problem import Problem
    from gemm.core.tensormaps import addressable, plans
    assert re.search(r"const bool via_tma = beta == 0\.0f && \(N & 3\) == 0 &&\s*"
                     r"\(reinterpret_cast<uintptr_t>\(C\) & 15\) == 0;", SOURCE)
    for n in range(1, 40):
        (c,) = [p for p in plans(SPEC, Problem(64, n, 64)) if p.operand == "C"]
        for addr in (0x7F0000000000, 0x7F0000000004, 0x7F0000000008, 0x7F0000000010):
            kernel = n % 4 == 0 and addr % 16 == 0
            assert addressable(c, addr) == kernel, (n, hex(addr))
