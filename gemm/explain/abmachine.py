"""The machine over the gate's A/B, for a drop it confirmed: the NVML figures of each arm's
processes (gemm.machine.nvml.ArmMachine), which the gate keeps in the effects of its report's
and kept verdict file's rows, read back for the commits explained and compared. The arms are
alike, or they differ (median SM clocks apart: nvml.clocks_differ, or one arm at its power cap
and the other not) and the drop is a machine change candidate; at the power cap the clock
also follows the code's own power draw, and the words say so. Pure: rows in, words out."""
from __future__ import annotations

from dataclasses import dataclass

from ..core.problem import same_size
from ..machine.nvml import ArmMachine, clocks_differ

CAPPED_PCT = 50.0    # an arm ran at its power cap: the cap held the clocks in this % of samples


def at_cap(arm: ArmMachine) -> bool | None:
    """Did the arm run at its power cap (None: NVML did not say)?"""
    p = arm.power_capped_pct
    return None if p is None else p >= CAPPED_PCT


def _n(v) -> str:
    return "-" if v is None else f"{v:.0f}"


@dataclass(frozen=True)
class ABMachine:
    """The two arms of the A/B of the commits explained: the reference (`against`), the new."""
    against: str
    reference: ArmMachine | None
    new: ArmMachine | None
    kernel_mhz: tuple | None = None   # (reference, new): the median SM clock each arm's own
                                      # timer read over the kernel's samples of this target

    def differences(self) -> dict[str, str]:
        """{figure: words} of what tells the arms apart (the figure: an ArmMachine field);
        empty where they are alike or an arm has no figures."""
        r, n = self.reference, self.new
        if r is None or n is None:
            return {}
        out = {}
        a, b = r.sm_mhz_median, n.sm_mhz_median
        if clocks_differ(a, b):
            out["sm_mhz_median"] = f"SM clock {100 * (b / a - 1):+.1f} %"
        ka, kb = self.kernel_mhz or (None, None)
        if clocks_differ(ka, kb):
            out["kernel_mhz"] = f"the kernel's own samples' clock {100 * (kb / ka - 1):+.1f} %"
        ca, cb = at_cap(r), at_cap(n)
        if ca is not None and cb is not None and ca != cb:
            arm = "new" if cb else "reference"
            out["power_capped_pct"] = f"only the {arm} arm at its power cap"
        return out

    @property
    def alike(self) -> bool | None:
        """None where an arm has no figures."""
        if self.reference is None or self.new is None:
            return None
        return not self.differences()

    def part(self) -> str:
        """The summary's words: both arms' figures, and alike or how they differ."""
        r, n = self.reference, self.new
        if r is None or n is None:
            name, arm = ("new", n) if r is None else ("reference", r)
            return (f"machine over the A/B: NVML sampled the {name} arm only (SM clock "
                    f"{_n(arm.sm_mhz_median)} MHz, power {_n(arm.power_w_median)} W, max temp "
                    f"{_n(arm.temp_c_max)} C)")
        head = (f"machine over the A/B (reference vs new): SM clock {_n(r.sm_mhz_median)} vs "
                f"{_n(n.sm_mhz_median)} MHz, power {_n(r.power_w_median)} vs "
                f"{_n(n.power_w_median)} W, max temp {_n(r.temp_c_max)} vs {_n(n.temp_c_max)} C")
        if self.kernel_mhz and all(self.kernel_mhz):
            head += (f", the kernel's own samples at {_n(self.kernel_mhz[0])} vs "
                     f"{_n(self.kernel_mhz[1])} MHz")
        diff = self.differences()
        if not diff:
            return f"{head}: alike"
        why = ("" if not (at_cap(r) or at_cap(n)) else
               ", or the code's own power draw (at the power cap the clock follows it)")
        return f"{head}: differ ({'; '.join(diff.values())}): a machine change candidate{why}"

    def to_dict(self) -> dict:
        return {"against": self.against,
                "reference": self.reference.to_dict() if self.reference else None,
                "new": self.new.to_dict() if self.new else None,
                "kernel_mhz": list(self.kernel_mhz) if self.kernel_mhz else None,
                "alike": self.alike, "differences": list(self.differences().values())}


def from_rows(rows, kernel: str, size: str, against: str | None) -> ABMachine | None:
    """The A/B's machine for `kernel` at `size` against the commit `against` (either may be a
    prefix of the other), from the rows of a gate report (gemm.regress/1) or a kept verdict
    file: the first DROP row of that series with an effect against it that keeps figures;
    None where there is none."""
    if not against:
        return None
    for r in rows if isinstance(rows, list) else []:
        if not (isinstance(r, dict) and r.get("verdict") == "DROP"
                and r.get("kernel") == kernel and same_size(r.get("size"), size)):
            continue
        for e in r.get("effects") or []:
            c = str(e.get("against") or "") if isinstance(e, dict) else ""
            m = e.get("machine") if c else None
            if isinstance(m, dict) and (c.startswith(against) or against.startswith(c)):
                got = ABMachine(c, ArmMachine.from_dict(m.get("reference")),
                                ArmMachine.from_dict(m.get("new")), _kernel_mhz(e.get("clocks")))
                if got.reference or got.new:
                    return got
    return None


def _kernel_mhz(clocks) -> tuple | None:
    """(reference, new) of an effect's `clocks` (the gate's per-target clocks), else None."""
    if not isinstance(clocks, dict):
        return None
    got = tuple((clocks.get(arm) or {}).get("kernel") if isinstance(clocks.get(arm), dict)
                else None for arm in ("reference", "new"))
    return got if all(isinstance(x, (int, float)) and x > 0 for x in got) else None
