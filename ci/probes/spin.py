"""A real slowdown in kernel code, for the gate's detection test (not the registry's
inject_delay): each kernel named gets a busy-wait of SPIN clock cycles at the start of every
K step (clock64), so the share it costs is about the same at every size. Used on a throwaway
worktree only (ci/probes/spin_trial.sh); never on main.

    spin.py patch TREE KERNEL=N,N,...   add SPIN (default 0) to each kernel and a registry
                                        entry <kernel>_s<N> per N (SPIN=N)
    spin.py choose BENCH.json TARGET    per kernel, the N whose mean slowdown over the sizes is
                                        nearest TARGET (interpolated between the grid's N)
    spin.py set TREE KERNEL=N ...       make N the kernel's default SPIN; drop the _s<N> entries
                                        and add <kernel>_nospin (SPIN=0: the parent's code)
"""
import json
import re
import sys
from pathlib import Path

MACRO = """#ifndef SPIN
#define SPIN 0
#endif
#define SPIN_STEP() do { if (SPIN > 0) { const long long t0_ = clock64(); \\
    while (clock64() - t0_ < SPIN) { } } } while (0)
"""
# where each kernel's K step starts (the text the spin goes after)
HOOKS = {
    "05_2d_blocktiling": "    float rm[TM], rn[TN];\n",
    "07_bank_conflict_free": "        __syncthreads();\n#pragma unroll\n        for (int dot = 0; dot < BK; ++dot) {\n",
    "09_cp_async_pipeline": "    for (int t = 0; t < tiles; ++t) {\n",
}


def entry_block(toml: str, name: str) -> str:
    m = re.search(r'\[\[kernel\]\]\nname = "' + re.escape(name) + r'"\n.*?(?=\n\[\[kernel\]\]|\Z)',
                  toml, re.S)
    if not m:
        raise SystemExit(f"spin.py: no registry entry {name}")
    return m.group(0).rstrip("\n")


def variant(block: str, name: str, new: str, spin: int) -> str:
    block = block.replace(f'name = "{name}"', f'name = "{new}"', 1)
    return re.sub(r"defines = \{ (.*?) \}", lambda m: f"defines = {{ {m.group(1)}, SPIN = {spin} }}",
                  block, count=1)


def patch(tree: Path, specs: list[str]) -> None:
    reg = tree / "kernels" / "kernels.toml"
    toml = reg.read_text()
    for spec in specs:
        name, grid = spec.split("=")
        cu = tree / "kernels" / f"{name}.cu"
        src = cu.read_text()
        hook = HOOKS[name]
        if src.count(hook) != 1:
            raise SystemExit(f"spin.py: the K step of {name} is not where it was")
        first = src.index("#ifndef")
        src = src[:first] + MACRO + src[first:]
        src = src.replace(hook, hook + "        SPIN_STEP();\n")
        cu.write_text(src)
        block = entry_block(toml, name)
        toml = toml.rstrip("\n") + "\n" + "".join(
            "\n" + variant(block, name, f"{name}_s{n}", int(n)) + "\n" for n in grid.split(","))
    reg.write_text(toml)


def choose(bench: Path, target: float) -> None:
    doc = json.loads(bench.read_text())
    tflops = {}
    for r in doc["records"]:
        if r.get("role", "kernel") == "kernel" and r.get("status") == "ok":
            samples = r["kernel_time"]["samples_s"]
            med = sorted(samples)[len(samples) // 2]
            tflops[(r["kernel"], r["size"])] = 1.0 / med
    out = []
    for base in HOOKS:
        grid = sorted({int(k[len(base) + 2:]) for k, _ in tflops
                       if k.startswith(base + "_s")})
        if not grid:
            continue
        sizes = sorted({s for k, s in tflops if k == base})
        def slow(n):
            vals = [1 - tflops[(f"{base}_s{n}", s)] / tflops[(base, s)] for s in sizes
                    if (f"{base}_s{n}", s) in tflops]
            return sum(vals) / len(vals)
        pts = [(0, 0.0)] + [(n, slow(n)) for n in grid]
        print(f"# {base}: " + ", ".join(f"SPIN={n}: {100 * s:+.2f} %" for n, s in pts[1:]),
              file=sys.stderr)
        pick = pts[-1][0]
        for (n0, s0), (n1, s1) in zip(pts, pts[1:]):
            if s0 <= target <= s1 and s1 > s0:
                pick = round(n0 + (target - s0) / (s1 - s0) * (n1 - n0))
                break
        out.append(f"{base}={max(1, pick)}")
    print(" ".join(out))


def set_default(tree: Path, specs: list[str]) -> None:
    reg = tree / "kernels" / "kernels.toml"
    toml = reg.read_text()
    toml = re.sub(r'\n\[\[kernel\]\]\nname = "[^"]+_s\d+"\n.*?(?=\n\[\[kernel\]\]|\Z)', "", toml,
                  flags=re.S).rstrip("\n") + "\n"
    for spec in specs:
        name, n = spec.split("=")
        cu = tree / "kernels" / f"{name}.cu"
        cu.write_text(cu.read_text().replace("#define SPIN 0\n", f"#define SPIN {int(n)}\n", 1))
        toml += "\n" + variant(entry_block(toml, name), name, f"{name}_nospin", 0) + "\n"
    reg.write_text(toml)


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "patch":
        patch(Path(rest[0]), rest[1:])
    elif cmd == "choose":
        choose(Path(rest[0]), float(rest[1]))
    elif cmd == "set":
        set_default(Path(rest[0]), rest[1:])
    else:
        raise SystemExit(__doc__)
