"""Nsight Compute as a tool: which metrics `gemm explain` asks for, the command that profiles
one launch of a kernel's entry point (always `--clock-control none`: the clocks are left as
they are), and ncu's raw CSV read back by metric name.

Metric names change between Nsight Compute versions and chips, and an older ncu refuses a run
that names one it does not know. So the list is first intersected with `ncu --query-metrics`
(base names; skipped where the query cannot be read), a run that still fails on a named
metric is retried once without it, and whatever was asked for and not reported is listed,
never an error. Stall reasons come from the WarpStateStats section as well as by name, so
whichever names this version has are read.
"""
from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field

# (key, label, candidate metric names: the first one reported wins)
QUANTITIES = (
    ("sm_throughput", "SM throughput", ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)),
    # on Hopper the hmma pipe counts HGMMA (wgmma) too, per ncu's own description of it
    ("tensor_pipe", "tensor pipe", (
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active")),
    ("issue_active", "issue slots busy", ("smsp__issue_active.avg.pct_of_peak_sustained_active",)),
    ("occupancy", "achieved occupancy", ("sm__warps_active.avg.pct_of_peak_sustained_active",)),
    ("dram", "DRAM throughput", ("dram__throughput.avg.pct_of_peak_sustained_elapsed",)),
    ("l2", "L2 throughput", ("lts__throughput.avg.pct_of_peak_sustained_elapsed",)),
    ("l2_hit", "L2 hit rate", ("lts__t_sector_hit_rate.pct",)),
)
LABELS = {key: label for key, label, _ in QUANTITIES}
DURATION = "gpu__time_duration.sum"               # the profiled launch (ms)
CLOCK = "gpc__cycles_elapsed.avg.per_second"       # the SM clock during it (MHz)
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss",
                 "lg_throttle", "long_scoreboard", "math_pipe_throttle", "membar",
                 "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
                 "short_scoreboard", "sleeping", "tex_throttle", "wait")
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_([a-z0-9_]+?)_per_issue_active\.ratio$")
_SAMPLED = re.compile(r"^smsp__pcsamp_warps_issue_stalled_([a-z0-9_]+)$")
SECTION = "WarpStateStats"
NOT_STALLS = ("selected",)          # the issuing warp: a state, not a stall
# units to ms and MHz; none printed: ncu's base units (ns, Hz)
_TIME = {"": 1e-6, "ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0,
         "msecond": 1.0, "s": 1e3, "second": 1e3}
_HZ = {"": 1e-6, "hz": 1e-6, "khz": 1e-3, "mhz": 1.0, "ghz": 1e3, "cycle/second": 1e-6,
       "cycle/usecond": 1.0, "cycle/nsecond": 1e3}
TIMEOUT_S = 180


def wanted() -> list[str]:
    """Every metric name asked for, in order."""
    names = [m for _, _, cands in QUANTITIES for m in cands] + [DURATION, CLOCK]
    return names + [STALL.format(r) for r in STALL_REASONS]


def find() -> str | None:
    return shutil.which("ncu")


def version(ncu: str) -> str:
    """'2025.3.1.0' (ncu --version's last 'Version' line), or '' where it does not say."""
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"Version\s+([0-9][0-9.]*)", out.stdout)
    return m.group(1) if m else ""


_NAME = re.compile(r"^(?:[A-Za-z0-9_]+\.)*([a-z0-9]+__[a-z0-9_]+)$")


def parse_query(text: str) -> set[str]:
    """The base metric names `ncu --query-metrics` lists (its first column; a name may come
    with a group prefix such as 'TPC.TriageCompute.')."""
    out = set()
    for line in text.splitlines():
        first = line.split(None, 1)[0] if line.strip() else ""
        m = _NAME.match(first)
        if m:
            out.add(m.group(1))
    return out


def query(ncu: str) -> set[str]:
    """This GPU's base metric names, or an empty set where ncu cannot say (then nothing is
    filtered out up front)."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.SubprocessError):
        return set()
    return parse_query(out.stdout) if out.returncode == 0 else set()


def available(names: list[str], known: set[str]) -> list[str]:
    """The names whose base (before the first '.') `known` lists; all of them where `known`
    is empty (the query could not be read)."""
    return [n for n in names if not known or n.split(".", 1)[0] in known]


def number(text: str) -> float | None:
    """A value as ncu prints it: '1,980,000', '21.826443', '1.234,5' (a comma decimal
    separator), 'n/a' (None)."""
    s = (text or "").strip().strip('"').replace("\u202f", "").replace("\xa0", "")
    s = s.replace(" ", "")
    if "," in s and "." in s:
        s = (s.replace(".", "").replace(",", ".") if s.rfind(",") > s.rfind(".")
             else s.replace(",", ""))
    elif "," in s:
        s = s.replace(",", "") if re.fullmatch(r"[-+]?\d{1,3}(,\d{3})+", s) else \
            s.replace(",", ".")
    try:
        return float(s)
    except ValueError:
        return None


@dataclass
class Row:
    """One profiled launch: its kernel name and {metric: (value, unit)} (value None where
    ncu printed something not a number)."""
    kernel: str
    metrics: dict = field(default_factory=dict)

    def value(self, name: str, scale: dict | None = None) -> float | None:
        v, unit = self.metrics.get(name, (None, ""))
        if v is None or scale is None:
            return v
        factor = scale.get(unit.strip().lower())
        return v * factor if factor is not None else None


def parse_raw(text: str) -> list[Row]:
    """ncu's `--csv --page raw` output (alone or after the application's own): a header row
    of column names ("ID", ..., "Kernel Name", ..., metric names), a row of units (its ID
    cell empty; absent in some versions), then a row per profiled launch."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")]
    start = next((i for i, ln in enumerate(lines)
                  if ln.startswith('"ID"') and '"Kernel Name"' in ln), None)
    if start is None:
        return []
    rows = list(csv.reader(lines[start:]))
    header = rows[0]
    units = rows[1] if len(rows) > 1 and len(rows[1]) == len(header) and not rows[1][0] \
        else [""] * len(header)
    name_at = header.index("Kernel Name")
    out = []
    for row in rows[1:]:
        if len(row) != len(header) or not row[0].strip():
            continue
        out.append(Row(row[name_at], {h: (number(v), u) for h, v, u in zip(header, row, units)
                                      if "__" in h}))
    return out


def stalls(row: Row) -> dict:
    """{reason: cycles per issued instruction} (warps stalled for that reason per issue
    cycle: what ncu's Warp State chart shows), 'selected' left out; else the sampled counts
    (smsp__pcsamp_*) where only those were reported."""
    got, sampled = {}, {}
    for name, (v, _) in row.metrics.items():
        m = _STALL.match(name)
        if m and v is not None and not m.group(1).endswith("_not_issued"):
            got[m.group(1)] = v
        m = _SAMPLED.match(name)
        if m and v is not None and not m.group(1).endswith("_not_issued"):
            sampled[m.group(1)] = v
    out = got or sampled
    return {k: v for k, v in out.items() if k not in NOT_STALLS}


def read(row: Row) -> tuple[dict, dict, dict]:
    """(values {key: % or None}, extra {"duration_ms", "sm_mhz", "metric": {key: name}},
    stalls) of a profiled launch."""
    values, names = {}, {}
    for key, _, cands in QUANTITIES:
        hit = next((n for n in cands if row.value(n) is not None), None)
        values[key] = row.value(hit) if hit else None
        if hit:
            names[key] = hit
    extra = {"duration_ms": row.value(DURATION, _TIME), "sm_mhz": row.value(CLOCK, _HZ),
             "metric": names}
    return values, extra, stalls(row)


_BAD_METRIC = re.compile(r"(?:metric|metrics)[^\n]*?([a-z0-9]+__[a-z0-9_.]+)", re.I)


def refused(output: str) -> set[str]:
    """Metric names an ncu error line names (an older ncu fails the run on an unknown one)."""
    out = set()
    for line in output.splitlines():
        if "==ERROR==" in line and ("find metric" in line.lower() or "invalid" in line.lower()
                                    or "not found" in line.lower()):
            out.update(m.group(1).rstrip(".") for m in _BAD_METRIC.finditer(line))
    return out


def command(ncu: str, entry: str, skip: int, metrics: list[str], section: bool = True) -> list:
    """ncu profiling the (skip+1)-th launch of `entry` (only launches of it are counted),
    leaving the clocks alone, in every process the application starts."""
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all",
           "-k", f"regex:^{re.escape(entry)}$", "--launch-skip", str(skip),
           "--launch-count", "1", "--csv", "--page", "raw"]
    if section:
        cmd += ["--section", SECTION]
    return cmd + ["--metrics", ",".join(metrics)]


@dataclass
class Profile:
    row: Row | None
    output: str                 # ncu's and the application's stdout and stderr
    metrics: list               # what was asked for (after the query and any retry)
    dropped: list               # names ncu refused and the retry left out
    why: str = ""               # why there is no row
    command: list = field(default_factory=list)   # the last ncu command line


def run_group(cmd: list, timeout: float, cwd=None, env=None) -> subprocess.CompletedProcess:
    """subprocess.run in a process group of its own, all of which is killed on a timeout
    (ncu and `gemm bench` start processes of their own that would hold the GPU on)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def why_not(output: str, entry: str, skip: int, rc: int | None) -> str:
    """One sentence: why ncu reported no launch."""
    if "ERR_NVGPUCTRPERM" in output:
        return ("ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM: "
                "profiling needs root or NVreg_RestrictProfilingToAdminUsers=0)")
    errors = [ln.split("==ERROR==", 1)[1].strip() for ln in output.splitlines()
              if "==ERROR==" in ln]
    if errors:
        return "ncu: " + "; ".join(errors)[:300]
    if "No kernels were profiled" in output:
        return (f"ncu profiled no launch of {entry} (it skips {skip}; the kernel did not run "
                f"that often, or under another name)")
    tail = " ".join(output.strip().splitlines()[-3:])[-300:]
    return f"ncu reported no launch of {entry} (exit {rc}): {tail}"


def profile(ncu: str, app: list, entry: str, skip: int, known: set[str], cwd=None, env=None,
            timeout: float = TIMEOUT_S) -> Profile:
    """One profiled launch of `entry` in `app` (a command line). Never raises: a Profile
    without a row says why."""
    metrics = available(wanted(), known)
    dropped: list = []
    section = True
    for _ in range(3):
        cmd = command(ncu, entry, skip, metrics, section) + list(app)
        try:
            out = run_group(cmd, timeout, cwd, env)
        except subprocess.TimeoutExpired:
            return Profile(None, "", metrics, dropped, f"ncu took over {timeout:.0f} s",
                           cmd)
        except OSError as exc:
            return Profile(None, "", metrics, dropped, f"ncu could not run: {exc}", cmd)
        text = out.stdout + "\n" + out.stderr
        rows = [r for r in parse_raw(out.stdout) if r.kernel.split("(")[0].strip() == entry] \
            or parse_raw(out.stdout)
        if rows:
            return Profile(rows[-1], text, metrics, dropped, command=cmd)
        bad = refused(text) & set(metrics)
        if bad:
            dropped += sorted(bad)
            metrics = [m for m in metrics if m not in bad]
            continue
        if section and "section" in text.lower() and "==ERROR==" in text:
            section = False
            continue
        break
    return Profile(None, text, metrics, dropped, why_not(text, entry, skip, out.returncode),
                   cmd)
