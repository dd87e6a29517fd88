"""What a compiled entry point uses (registers, stack, spills, shared memory), read from
ptxas -v and `cuobjdump --dump-resource-usage`, and how many of its blocks fit on one SM.

The occupancy arithmetic is the CUDA occupancy calculator's for compute capability 9.0 (the
H200), with the constants in SM90 below (CUDA C++ Programming Guide, "Technical
Specifications per Compute Capability"; the Hopper tuning guide for shared memory):
  registers: a warp's are allocated in units of 256 (regs/thread * 32, rounded up); 65536 per
             SM, so floor(65536 / per-warp) warps, then whole blocks of them;
  shared:    static + dynamic + 1 KB the system reserves per block, rounded up to 128 bytes;
             228 KB per SM, at most 227 KB (static + dynamic) per block;
  threads:   2048 per SM (64 warps); blocks: at most 32 per SM.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

KB = 1024


@dataclass(frozen=True)
class SmLimits:
    name: str
    sms: int                     # SMs on the GPU (tiles per wave = sms * blocks per SM)
    regs_per_sm: int = 65536
    reg_unit: int = 256          # registers per warp are allocated in units of this
    max_regs_per_thread: int = 255
    smem_per_sm: int = 228 * KB
    smem_per_block: int = 227 * KB   # static + dynamic, the opt-in maximum
    smem_reserved: int = 1 * KB      # the system's shared memory per block (sm_80 and later)
    smem_unit: int = 128
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32


SM90 = SmLimits("H200 (sm_90, 132 SMs)", sms=132)


@dataclass(frozen=True)
class Resources:
    """One entry point as compiled. static_smem excludes the 1 KB reserved per block
    (cuobjdump's SHARED includes it; ptxas's "bytes smem" does not)."""
    regs: int
    static_smem: int
    stack: int = 0               # bytes of stack frame per thread (local memory)
    spill_stores: int = 0        # bytes, ptxas -v
    spill_loads: int = 0
    local: int = 0               # cuobjdump LOCAL: local memory per thread, bytes
    barriers: int | None = None  # named barriers ptxas reports ("used N barriers")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Occupancy:
    blocks: int                  # blocks of this kernel one SM can hold at once
    limiter: str      # registers | smem | threads | blocks, '+'-joined on a tie; too big
    by_regs: int
    by_smem: int
    by_threads: int
    smem_per_block: int          # allocated per block: static + dynamic + reserved, rounded

    def to_dict(self) -> dict:
        return asdict(self)


_PTXAS_FN = re.compile(r"(?:Function properties for|Compiling entry function) '?(\w+)'?")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                          r"(\d+) bytes spill loads")
_PTXAS_USED = re.compile(r"Used (\d+) registers")
_PTXAS_BARS = re.compile(r"used (\d+) barriers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_RES_FN = re.compile(r"^\s*Function (\S+?):\s*$")
_RES_KV = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")


def parse_ptxas(text: str) -> dict[str, dict]:
    """{entry: {"regs", "barriers", "smem", "stack", "spill_stores", "spill_loads"}} from
    nvcc -Xptxas -v's report."""
    out: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = _PTXAS_FN.search(line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = _PTXAS_STACK.search(line)
        if m:
            current.update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                           spill_loads=int(m.group(3)))
        m = _PTXAS_USED.search(line)
        if m:   # "Used 128 registers, used 1 barriers, 1064 bytes cumulative stack size,
            current["regs"] = int(m.group(1))          # 37248 bytes smem" (parts optional)
            bars, smem = _PTXAS_BARS.search(line), _PTXAS_SMEM.search(line)
            if bars:
                current["barriers"] = int(bars.group(1))
            current["smem"] = int(smem.group(1)) if smem else 0
    return out


def parse_resource_usage(text: str) -> dict[str, dict]:
    """{function: {"REG": n, "STACK": n, "SHARED": n, "LOCAL": n, ...}} from
    `cuobjdump --dump-resource-usage`."""
    out: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        m = _RES_FN.match(line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        if current is not None and "REG:" in line:
            current.update({k: int(v) for k, v in _RES_KV.findall(line)})
    return out


def combine(ptxas: dict, usage: dict, limits: SmLimits = SM90) -> dict[str, Resources]:
    """One Resources per function that either report names (cuobjdump's numbers first for
    registers, stack and local memory; ptxas's for spills and static shared memory)."""
    out = {}
    for fn in sorted(set(ptxas) | set(usage)):
        p, u = ptxas.get(fn, {}), usage.get(fn, {})
        if "regs" not in p and "REG" not in u:
            continue
        smem = p["smem"] if "smem" in p else max(0, u.get("SHARED", 0) - limits.smem_reserved)
        out[fn] = Resources(regs=u.get("REG", p.get("regs", 0)), static_smem=smem,
                            stack=u.get("STACK", p.get("stack", 0)),
                            spill_stores=p.get("spill_stores", 0),
                            spill_loads=p.get("spill_loads", 0), local=u.get("LOCAL", 0),
                            barriers=p.get("barriers"))
    return out


def _up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(regs: int, threads: int, smem: int, limits: SmLimits = SM90) -> Occupancy:
    """Blocks per SM of a kernel with `regs` registers per thread, `threads` per block and
    `smem` bytes of shared memory per block (static + dynamic)."""
    warps = -(-threads // 32)
    per_warp = _up(max(regs, 1) * 32, limits.reg_unit)
    by_regs = (limits.regs_per_sm // per_warp) // warps if regs <= limits.max_regs_per_thread \
        else 0
    alloc = _up(smem + limits.smem_reserved, limits.smem_unit)
    by_smem = limits.smem_per_sm // alloc if smem <= limits.smem_per_block else 0
    by_threads = limits.threads_per_sm // (warps * 32)
    limits_ = {"registers": by_regs, "smem": by_smem, "threads": by_threads,
               "blocks": limits.blocks_per_sm}
    blocks = min(limits_.values())
    limiter = "too big" if blocks == 0 else \
        "+".join(k for k, v in limits_.items() if v == blocks)
    return Occupancy(blocks, limiter, by_regs, by_smem, by_threads, alloc)


def kib(n: int) -> str:
    """Bytes as people read shared memory sizes: 197632 -> '193 KB' (KiB), 64 -> '64 B'."""
    if n < KB:
        return f"{n} B"
    v = n / KB
    return f"{v:.0f} KB" if v >= 10 or v == int(v) else f"{v:.1f} KB"


# the cubin's sections a launch reads besides the code: attributes (EIATTR: registers, maximum
# threads, cluster shape, parameters...), constant and global data, shared memory, the call graph
_FACTS = re.compile(r"^\.nv\.(info|constant\d*|global|shared|callgraph|compat)(\.|$)")


def elf_facts(dump: str) -> str:
    """`cuobjdump --dump-elf`'s blocks for the sections _FACTS names (the debug sections, which
    name the file's path, and the code, read as SASS, are left out)."""
    out, keep = [], False
    for line in dump.splitlines():
        if line.startswith("."):
            keep = bool(_FACTS.match(line))
        if keep:
            out.append(line)
    return "\n".join(out)
