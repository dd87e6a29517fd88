"""A real slowdown in kernel code, for the gate's detection test (not the registry's
inject_delay): each kernel named gets a busy-wait of SPIN clock cycles (clock64) at the start
of every SPIN_EVERY-th K step, so the share it costs is about the same at every size. (On the
H200 a spin at every K step cost 3-19 % whatever its length: the clock reads and the stall
dominate; so the spin comes every few steps.) Used on a throwaway worktree only
(ci/probes/spin_trial.sh); never on main.

    spin.py set TREE KERNEL=SPIN:EVERY ...   add the spin to each kernel (its defaults SPIN,
                                             SPIN_EVERY) and a registry entry
                                             <kernel>_nospin (SPIN=0: the parent's code)
"""
import json
import re
import sys
from pathlib import Path

MACRO = """#ifndef SPIN
#define SPIN 0
#endif
#ifndef SPIN_EVERY
#define SPIN_EVERY 1
#endif
#define SPIN_STEP(i) do { if (SPIN > 0 && (i) % SPIN_EVERY == 0) { \\
    const long long t0_ = clock64(); while (clock64() - t0_ < SPIN) { } } } while (0)
"""
# each kernel's K step: (text, the same with the spin at its start)
HOOKS = {
    "05_2d_blocktiling": (
        "    auto compute = [&] { outer_products(As, Bs, thread_row, thread_col, acc); };\n",
        "    int spin_step_ = 0;\n    auto compute = [&] { SPIN_STEP(spin_step_++); "
        "outer_products(As, Bs, thread_row, thread_col, acc); };\n"),
    "07_bank_conflict_free": (
        "        __syncthreads();\n#pragma unroll\n        for (int dot = 0; dot < BK; ++dot) {\n",
        "        __syncthreads();\n        SPIN_STEP(k0 / BK);\n#pragma unroll\n"
        "        for (int dot = 0; dot < BK; ++dot) {\n"),
    "09_cp_async_pipeline": (
        "    for (int t = 0; t < tiles; ++t) {\n",
        "    for (int t = 0; t < tiles; ++t) {\n        SPIN_STEP(t);\n"),
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


def set_spin(tree: Path, specs: list[str]) -> None:
    reg = tree / "kernels" / "kernels.toml"
    toml = reg.read_text()
    for spec in specs:
        name, pick = spec.split("=")
        spin, every = (int(x) for x in pick.split(":"))
        cu = tree / "kernels" / f"{name}.cu"
        src = cu.read_text()
        old, new = HOOKS[name]
        if src.count(old) != 1:
            raise SystemExit(f"spin.py: the K step of {name} is not where it was")
        first = src.index("#ifndef")
        macro = MACRO.replace("#define SPIN 0", f"#define SPIN {spin}").replace(
            "#define SPIN_EVERY 1", f"#define SPIN_EVERY {every}")
        cu.write_text(src[:first] + macro + src[first:].replace(old, new))
        toml = toml.rstrip("\n") + "\n\n" + variant(entry_block(toml, name), name,
                                                     f"{name}_nospin", 0) + "\n"
    reg.write_text(toml)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "set":
        raise SystemExit(__doc__)
    set_spin(Path(sys.argv[2]), sys.argv[3:])
