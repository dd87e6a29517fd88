"""A real slowdown in kernel code sized as a share of the kernel's own time, for the gate's
detection test (not the registry's inject_delay). Each block (05, 07, 09: after its tile;
14, persistent: after each of its tiles, in the consumer warpgroups) waits until it has taken
(1 + SPIN_PPM / 1e6) times what it took so far (clock64, sleeping in __nanosleep steps so
the wait takes no issue slots from the other blocks on the SM). The block holds its SM slot
that much longer, so the cost follows the kernel's time at every size; what it costs in fact
is measured, not assumed (ci/probes/spin_trial.sh sizes it from a first measurement). Used on
a throwaway worktree only; never on main.

With --kstep (05 and 07), each thread instead waits at the end of every K step of the main
loop until the step has taken (1 + SPIN_PPM / 1e6) times what it took, spinning on clock64
(no sleep: a step is ~2,000 cycles, and a sleep's ~100-cycle grain would be the whole wait).
The tail wait barely costs 05 and 07 at 2048, where every block finishes in one wave; a wait
in every K step slows each block's whole life, at every size, but its own clock reads cost
~11 % whatever its length.

With --work, each thread of 05 and 07 instead does SPIN_FMAS more dependent FFMAs at the end of
every full K step of the main loop (on a value the compiler cannot fold, kept alive by a store
that never happens): more work of the kind the kernel already does, so the cost grows with
SPIN_FMAS in steps of ~1/600 of a K step; 09 and 14 keep their tail waits (SPIN_PPM). 07 takes
both: KERNEL=FMAS+PPM adds the tail wait to its FFMAs (26 FFMAs alone made 07 slower by
1.2 / 1.5 % at 2048 / 4096 but 0.8 % faster at 8192, where the tail wait, in many waves,
costs what it says; at 2048 the tail costs nothing, one wave).

    tailspin.py set TREE [--kstep | --work] KERNEL=AMOUNT ...
                                           add the wait to each kernel (its default SPIN_PPM)
                                           and a registry entry <kernel>_nospin: the
                                           parent's source, copied (a twin built from the
                                           hooked source with the amount 0 was not the
                                           parent's code: 07's ran 2-9 % slower than the
                                           slowed 07 itself, b18d38c)
    tailspin.py size TRUE.json TARGET_PCT [--work] KERNEL=AMOUNT ...
                                           print KERNEL=PPM scaled so that the median true
                                           size measured (gemm bench --json of each kernel and
                                           its _nospin twin) becomes TARGET_PCT (kept where
                                           it is within 0.7-1.4 times of it; a count of
                                           FFMAs at most 1.5 times larger per step)
    tailspin.py show TRUE.json TAG         print each kernel's true size, one line a size
    tailspin.py nearest TARGET_PCT "SIZES" VARIANT=TRUE.json ...
                                           print each variant's true sizes (stderr) and the
                                           variant nearest TARGET_PCT at every size, none if
                                           none is 0.6-3 times it at all SIZES (exit 1)
"""
import json
import re
import sys
from pathlib import Path

MACRO = """#ifndef SPIN_PPM
#define SPIN_PPM 0
#endif
#ifndef SPIN_FMAS
#define SPIN_FMAS 0
#endif
#define SPIN_TAIL(t0) do { if (SPIN_PPM > 0) { const long long spin_d_ = clock64() - (t0); \\
    const long long spin_end_ = (t0) + spin_d_ + spin_d_ * SPIN_PPM / 1000000; \\
    while (clock64() < spin_end_) __nanosleep(64); } } while (0)
#define SPIN_WORK(acc) do { _Pragma("unroll") for (int spin_i_ = 0; spin_i_ < SPIN_FMAS; ++spin_i_) \\
    (acc) = fmaf((acc), 0.999999f, 1e-7f); } while (0)
#define SPIN_STEP(t0) do { if (SPIN_PPM > 0) { const long long spin_d_ = clock64() - (t0); \\
    const long long spin_end_ = (t0) + spin_d_ + spin_d_ * SPIN_PPM / 1000000; \\
    while (clock64() < spin_end_) { } } } while (0)
"""
MAIN_05 = "    block_tile_2d<false>(M, N, K, alpha, A, B, beta, C, blockIdx.y * BM, blockIdx.x * BN);\n"
MAIN_079 = "    block_tile<MODE_MAIN>(M, N, K, alpha, A, B, beta, C);\n"
TILE_14 = "        for (int t = blockIdx.x; t < ntiles; t += gridDim.x) {\n"
STORE_14 = "            store_accumulator<BN>(acc, C, M, N, row0 + 64 * cw, col0, alpha, beta);\n"


def around(call: str) -> str:
    return f"    const long long spin_t0_ = clock64();\n{call}    SPIN_TAIL(spin_t0_);\n"


# each kernel: [(text, replacement, the text's index among its occurrences)]
HOOKS = {
    "05_2d_blocktiling": [(MAIN_05, around(MAIN_05), 0)],
    "07_bank_conflict_free": [(MAIN_079, around(MAIN_079), 0)],
    "09_cp_async_pipeline": [(MAIN_079, around(MAIN_079), 0)],
    # the consumers' tile loop is the second of the two (the producer's comes first)
    "14_bf16_wgmma_tma": [(TILE_14, TILE_14 + "            const long long spin_t0_ = clock64();\n", 1),
                          (STORE_14, STORE_14 + "            SPIN_TAIL(spin_t0_);\n", 0)],
}


LOOP_05 = ("    for (; k0 + BK <= K; k0 += BK)\n"
           "        block_k_step<BM, BN, BK, NTHREADS, EDGE, false>(As, Bs, a, b, k0, K, N,\n"
           "                                                        rows_left, cols_left, BK, compute);\n")
LOOP_07 = "    for (; k0 + BK <= K; k0 += BK) step(ktail<false>{}, k0);\n"


STEP_05 = LOOP_05.replace(
    "BK <= K; k0 += BK)\n", "BK <= K; k0 += BK) {\n        const long long spin_t0_ = clock64();\n", 1) \
    + "        SPIN_STEP(spin_t0_);\n    }\n"
STEP_07 = LOOP_07.replace(" step(ktail<false>{}, k0);\n",
                          " { const long long spin_t0_ = clock64(); step(ktail<false>{}, k0); SPIN_STEP(spin_t0_); }\n")


# --kstep: the wait in every full K step of the main loop
KSTEP_HOOKS = {
    "05_2d_blocktiling": [(LOOP_05, STEP_05, 0)],
    "07_bank_conflict_free": [(LOOP_07, STEP_07, 0)],
}


def entry_block(toml: str, name: str) -> str:
    m = re.search(r'\[\[kernel\]\]\nname = "' + re.escape(name) + r'"\n.*?(?=\n\[\[kernel\]\]|\Z)',
                  toml, re.S)
    if not m:
        raise SystemExit(f"tailspin.py: no registry entry {name}")
    return m.group(0).rstrip("\n")


def twin(block: str, name: str) -> str:
    """The registry entry of <name>_nospin: the parent's source, kept as <name>_nospin.cu."""
    block = block.replace(f'name = "{name}"', f'name = "{name}_nospin"', 1)
    return re.sub(r'file = "([^"]+)\.cu"', lambda m: f'file = "{m.group(1)}_nospin.cu"', block,
                  count=1)


def replace_nth(src: str, old: str, new: str, nth: int) -> str:
    at = -1
    for _ in range(nth + 1):
        at = src.index(old, at + 1)
    return src[:at] + new + src[at + len(old):]


def work(loop: str) -> str:
    """`loop` (each step already ending in SPIN_WORK) with the chain's seed from alpha before it
    and, after it, its value stored only if it ever equals 1234.5 (so it is not removed)."""
    return ("    float spin_acc_ = alpha;\n" + loop
            + "    if (spin_acc_ == 1234.5f) C[0] = spin_acc_;\n")


# --work: more FFMAs in every full K step of 05 and 07; 09's and 14's tail waits as without it
WORK_HOOKS = {
    "05_2d_blocktiling": [(LOOP_05, work(LOOP_05.replace("BK <= K; k0 += BK)\n", "BK <= K; k0 += BK) {\n", 1)
                                         + "        SPIN_WORK(spin_acc_);\n    }\n"), 0)],
    "07_bank_conflict_free": [(LOOP_07, work(LOOP_07.replace(
        " step(ktail<false>{}, k0);\n", " { step(ktail<false>{}, k0); SPIN_WORK(spin_acc_); }\n")), 0)],
    "09_cp_async_pipeline": HOOKS["09_cp_async_pipeline"],
    "14_bf16_wgmma_tma": HOOKS["14_bf16_wgmma_tma"],
}
AMOUNT = {"05_2d_blocktiling": "SPIN_FMAS", "07_bank_conflict_free": "SPIN_FMAS"}
# --work, KERNEL=FMAS+PPM: the tail wait added beside the FFMAs (only where a PPM is given, so
# KERNEL=FMAS builds the code earlier trials measured)
WORK_TAILS = {"07_bank_conflict_free": [(MAIN_079, around(MAIN_079), 0)]}
# --work, KERNEL=FMAS@end: the same FFMAs per full K step, all run after the main loop (one
# dependent chain of K / BK x FMAS), so the loop's code is the parent's: 07's FFMAs inside it
# changed its cost nonlinearly per size, and a tail wait beside them made it faster
WORK_ENDS = {"07_bank_conflict_free": [(LOOP_07, work(
    LOOP_07 + "    for (int spin_s_ = 0; spin_s_ < K / BK; ++spin_s_) SPIN_WORK(spin_acc_);\n"), 0)]}


def picks(specs):
    """[(kernel, amount, tail ppm, "@end" or "")]: KERNEL=AMOUNT, or under --work
    KERNEL=FMAS+PPM or KERNEL=FMAS@end (07)."""
    out = []
    for name, amount in (s.split("=") for s in specs):
        first, _, tail = amount.partition("+")
        first, at, where = first.partition("@")
        if at and where != "end":
            raise SystemExit(f"tailspin.py: {name}={amount}: the only place is @end")
        out.append((name, int(first), int(tail or 0), at + where))
    return out


def set_spin(tree: Path, specs, hooks=HOOKS) -> None:
    chosen = picks(specs)
    for name, ppm, tail, end in chosen:   # checked before anything is written
        if tail and not (hooks is WORK_HOOKS and name in WORK_TAILS):
            raise SystemExit(f"tailspin.py: {name}={ppm}+{tail}: a second amount is a tail "
                             f"wait beside FFMAs (--work, {', '.join(WORK_TAILS)})")
        if end and not (hooks is WORK_HOOKS and name in WORK_ENDS and not tail):
            raise SystemExit(f"tailspin.py: {name}={ppm}@end: FFMAs after the loop, alone "
                             f"(--work, {', '.join(WORK_ENDS)})")
    reg = tree / "kernels" / "kernels.toml"
    toml = reg.read_text()
    for name, ppm, tail, end in chosen:
        cu = tree / "kernels" / f"{name}.cu"
        src = cu.read_text()
        (tree / "kernels" / f"{name}_nospin.cu").write_text(src)   # the twin: the parent's code
        for old, new, nth in ((WORK_ENDS if end else hooks)[name]
                              + (WORK_TAILS[name] if tail else [])):
            if src.count(old) < nth + 1:
                raise SystemExit(f"tailspin.py: {name} is not what the hook expects")
            src = replace_nth(src, old, new, nth)
        first = src.index("#ifndef")
        var = AMOUNT.get(name, "SPIN_PPM") if hooks is WORK_HOOKS else "SPIN_PPM"
        macro = MACRO.replace(f"#define {var} 0", f"#define {var} {ppm}")
        if tail:
            macro = macro.replace("#define SPIN_PPM 0", f"#define SPIN_PPM {tail}")
        cu.write_text(src[:first] + macro + src[first:])
        toml = toml.rstrip("\n") + "\n\n" + twin(entry_block(toml, name), name) + "\n"
        twin_tuned(tree, name)
    reg.write_text(toml)


def twin_tuned(tree: Path, name: str) -> None:
    """The twin of a tuned kernel runs its constants: each table entry of `name` in
    kernels/tuned/*.toml copied under <name>_nospin."""
    for table in sorted((tree / "kernels" / "tuned").glob("*.toml")):
        text = table.read_text()
        blocks = re.findall(r'^\["' + re.escape(name) + r'"\.[^\n]*\n(?:[^\[\n][^\n]*\n)*', text,
                            re.M)
        if blocks:
            copies = [b.replace(f'["{name}".', f'["{name}_nospin".', 1) for b in blocks]
            table.write_text(text.rstrip("\n") + "\n\n" + "\n".join(copies))


def true_sizes(path) -> dict:
    """{(kernel, size): relative slowdown in %} of each spun kernel against its twin."""
    recs = [r for r in json.load(open(path))["records"] if r.get("status") == "ok"]
    med = {}
    for r in recs:
        s = sorted(r["kernel_time"]["samples_s"])
        med[(r["kernel"], r["size"])] = s[len(s) // 2]
    return {(k[:-7], s): 100 * (1 - v / med[(k[:-7], s)])
            for (k, s), v in med.items() if k.endswith("_nospin") and (k[:-7], s) in med}


def size(path, target: float, specs, fmas=()) -> None:
    """`fmas`: the kernels whose amount is a count of FFMAs (--work), not parts per million."""
    got = true_sizes(path)
    out = []
    for name, ppm, tail, end in picks(specs):
        xs = sorted(v for (k, _), v in got.items() if k == name)
        now = xs[len(xs) // 2] if xs else 0.0
        scale = target / now if now > 0.05 else 3.0     # barely measurable: triple it
        if 0.7 <= scale <= 1.4:                          # near enough: as it is
            scale = 1.0
        # a count of FFMAs grows at most 1.5 times a step: 07's cost is not linear in them
        # (18 FFMAs cost 07 about 1-2 %, 54 cost it 12-17 %: 7cbe627 and 5729ed4's trials)
        scale = min(max(scale, 0.33), 1.5 if name in fmas else 3.0)
        lo, hi = (1, 256) if name in fmas else (1000, 100000)
        tail = f"+{max(1000, min(100000, round(tail * scale)))}" if tail else ""
        out.append(f"{name}={max(lo, min(hi, round(ppm * scale)))}{end}{tail}")
    print(" ".join(out))


def show(path, tag: str) -> None:
    for (k, s), v in sorted(true_sizes(path).items()):
        print(f"true size ({tag}): {k} at {s}: {-v:+.2f} % (kernel time, against its twin)")


def nearest(target: float, sizes, variants: dict) -> str | None:
    """Of {variant: TRUE.json}, the one slower by 0.6-3 times `target` % at every size of
    `sizes` and nearest it at its worst; each variant's true sizes said on stderr."""
    best, best_err = None, None
    for v, path in variants.items():
        try:
            got = true_sizes(path)
        except Exception as e:
            print(f"variant {v}: no true size ({e})", file=sys.stderr)
            continue
        print(f"variant {v}: " + ", ".join(f"{s}: {-x:+.2f} %" for (_, s), x in sorted(got.items())),
              file=sys.stderr)
        slow = list(got.values())   # positive: slower
        if {s for _, s in got} != set(sizes) or not all(0.6 * target <= x <= 3 * target
                                                         for x in slow):
            continue
        err = max(abs(x - target) for x in slow)
        if best_err is None or err < best_err:
            best, best_err = v, err
    if best is not None:
        print(f"nearest {target:g} %: {best} (at most {best_err} points off)", file=sys.stderr)
    return best


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 2 else ""
    flags = {a for a in sys.argv[3:] if a.startswith("--")}
    args = [a for a in sys.argv[3:] if not a.startswith("--")]
    if cmd == "set":
        set_spin(Path(sys.argv[2]), args,
                 KSTEP_HOOKS if "--kstep" in flags else WORK_HOOKS if "--work" in flags else HOOKS)
    elif cmd == "size":
        size(sys.argv[2], float(sys.argv[3]), args[1:], AMOUNT if "--work" in flags else ())
    elif cmd == "show":
        show(sys.argv[2], sys.argv[3])
    elif cmd == "nearest":
        won = nearest(float(sys.argv[2]), sys.argv[3].split(),
                      dict(a.split("=", 1) for a in sys.argv[4:]))
        if won is None:
            sys.exit(1)
        print(won)
    else:
        raise SystemExit(__doc__)
