"""The gate's workflow for one commit: judge(Request) -> Report; bad input: BadRequest."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from ..core import registry
from ..core.metrics import Series
from ..store import verdicts
from ..store.history import HistoryError, finite, load_runs, resolve_machine
from . import calibration, codeid, confirm
from . import anchor as anchors
from .gate import (GateConfig, Narrowing, Row, Verdict, evaluate, failed, past_anchor,
                   screened_large, select)

SCHEMA = "gemm.regress/1"


class BadRequest(ValueError):
    """Missing or malformed results, or bad settings: one sentence, said before any GPU work."""


@dataclass(frozen=True)
class Request:
    """What to judge, and how."""
    results: str = "results"        # asv's results directory
    machine: str | None = None      # None: the only one there
    commit: str | None = None       # None: the newest run
    kernels: tuple = ()             # judge only these (names or prefixes, as recorded or
    sizes: tuple = ()               # registered) and these sizes: narrowed on purpose
    config: GateConfig = field(default_factory=GateConfig)
    anchor: str | None = None       # a revision; None: the newest anchor tag, else anchor.toml
    use_anchor: bool = True
    calibration: str = "calibration"
    repo: str = "."                 # the git checkout holding the recorded commits
    verdicts: str = "verdicts"
    record_verdicts: bool = False   # keep this run's GPU verdicts for later runs without one
    # (repo, older, newer, kernel, machine) -> the same machine code? (gemm.explain.identity)
    same_build: Callable[..., bool] | None = None


@dataclass(frozen=True)
class Report:
    """The judgement of one commit on one machine."""
    commit: str
    machine: str
    config: GateConfig
    narrowed: Narrowing
    anchor: str | None
    anchor_source: str              # where the anchor came from, or why there is none
    calibration: str | None         # the date of the calibration used, None where none is
    calibration_note: str           # why none is used ('' where one is)
    rows: list = field(default_factory=list)
    carried: int = 0                # series carried UNRESOLVED from the commits before ...
    pooled: int = 0                 # ... of them with the rounds kept against the anchor
    code_changed: int = 0           # large series sent to the A/B: their kernel's code changed
    same_build: int = 0             # large series whose kernel's sources changed, its build not
    empty: str | None = None        # why the run is EMPTY (it measured nothing); None if not
    counts: dict = field(default_factory=dict)   # verdict -> series
    exit: int = 0                   # 0 pass, 1 fail

    @property
    def failing(self) -> list[Row]:
        return failed(self.rows, self.config)

    @property
    def unresolved(self) -> list[Row]:
        return [r for r in self.rows if r.verdict == Verdict.UNRESOLVED]

    def to_json(self) -> dict:
        """The gemm.regress/1 document, which the ci scripts, gemm show and gemm summary read."""
        doc = {"schema": SCHEMA, "commit": self.commit, "machine": self.machine,
               "config": asdict(self.config),
               "narrowed": str(self.narrowed) if self.narrowed else None,
               "anchor": self.anchor, "anchor_source": self.anchor_source,
               "calibration": self.calibration, "calibration_note": self.calibration_note,
               "rows": []}
        if self.empty:
            return {**doc, "empty": True, "exit": self.exit}
        return {**doc, "rows": [asdict(r) for r in self.rows], "counts": self.counts,
                "exit": self.exit}


def judge(req: Request, log=lambda line: None, on_screened=None, gpu_name=None,
          gpu_identity=None) -> Report:
    """Judge one commit; on_screened(report) is told before any A/B, gpu_* asked on need."""
    cfg = req.config
    try:
        cfg.validate()
        machine = resolve_machine(req.results, req.machine)
        runs, suite = load_runs(req.results, machine)
        narrow = Narrowing(judged_kernels(req.kernels, {k.target for r in runs for k in r.points}),
                           tuple(req.sizes))
        anchor, anchor_src = (anchors.resolve(req.repo, req.anchor) if req.use_anchor
                              else (None, "no anchor (--no-anchor)"))
        new_run, earlier = select(runs, req.commit)
        # the carry stops at the anchor, usable or not: it accepts what was left open there
        carry_from, carry_to = ([] if anchor == new_run.commit else earlier), anchor
        why_not = anchor and anchors.unusable(req.repo, anchor, new_run.commit,
                                              {r.commit for r in earlier})
        if why_not:
            anchor_src = f"the anchor {anchor[:10]} ({anchor_src}) {why_not}; not used"
            anchor = None
        cal, cal_note = calibration.load(req.calibration, machine,
                                         gpu_name=gpu_name() if gpu_name else None)
        rows, _ = evaluate(runs, suite, cfg, req.commit, narrow, anchor, cal)
        same = req.same_build and (lambda old, new, k: req.same_build(req.repo, old, new, k,
                                                                      machine))
        carried = confirm.carry(rows, req.verdicts, machine, carry_from, carry_to)
        changed, spared = code_changed(rows, req.repo, new_run.commit, same)
        pooled = confirm.evidence(carried, req.verdicts, machine, req.repo, new_run.commit, same)
    except (HistoryError, ValueError) as exc:
        raise BadRequest(str(exc)) from exc
    report = Report(new_run.commit, machine, cfg, narrow, anchor, anchor_src,
                    cal.date if cal else None, cal_note, rows, len(carried), pooled,
                    code_changed=changed, same_build=spared)
    if not any(finite(p.value) or p.value is None for k, p in new_run.points.items()
               if not k.baseline and narrow.admits(k.target, k.size)):
        why = (f" of the current benchmark versions ({new_run.other_versions} rows were "
               f"measured under another version of the suite's policy or metrics)"
               if new_run.other_versions else "")
        report = replace(report, rows=[], exit=1, empty=(
            f"the run of {new_run.commit[:10]} on {machine} measured nothing"
            + (f" in {narrow}" if narrow else "") + why))
    if on_screened:
        on_screened(report)
    if report.empty:
        return report
    if any(r.verdict == Verdict.CANDIDATE for r in rows) and cfg.confirm:
        log(f"gemm regress: calibration: {'from ' + cal.date if cal else cal_note}")
    measured = confirm.decide(rows, cfg, new_run.commit, req.repo,
                              kept=verdicts.load(req.verdicts, machine, new_run.commit), log=log,
                              calibration=cal, same_build=same)
    _changepoints(rows, runs, new_run)
    counts = dict(Counter(r.verdict for r in rows))
    report = replace(report, counts=counts, exit=1 if failed(rows, cfg) else 0)
    unconfirmed = any(r.unconfirmed for r in rows)
    if req.record_verdicts and (measured or not unconfirmed):
        # the commit's summary only from a whole judgement, decided here
        summary = None if narrow or unconfirmed else {
            "counts": counts, "anchor": anchor, "exit": report.exit,
            "rows": [asdict(r) for r in rows if r.verdict != Verdict.OK]}
        path = verdicts.save(req.verdicts, machine, new_run.commit,
                             [asdict(r) for r in measured],
                             gpu_identity() if measured and gpu_identity else None,
                             summary=summary)
        log(f"gemm regress: verdicts kept in {path}")
    return report


def code_changed(rows: list[Row], repo, judged: str, same_build=None) -> tuple[int, int]:
    """Make large series whose kernel changed candidates: (how many, sources-only changes)."""
    n = spared = 0
    for r in rows:
        if not screened_large(r) or not r.reference:
            continue
        r.code_changed = codeid.kernel_changed(repo, r.reference, judged, r.kernel)
        if r.code_changed and same_build and same_build(r.reference, judged, r.kernel):
            r.code_changed, spared = False, spared + 1
            r.add_note(f"sources changed since {r.reference[:10]}, machine code not (nvcc)")
        if r.code_changed and r.verdict != Verdict.CANDIDATE:
            r.verdict = Verdict.CANDIDATE
            r.add_note(f"its kernel's code or build changed since {r.reference[:10]}: measured")
            n += 1
    return n, spared


def judged_kernels(names, recorded) -> tuple[str, ...]:
    """Each name as recorded (or the one recorded kernel it prefixes), else as registered."""
    registered = registry.names()
    out = []
    for name in names:
        for pool in (recorded, registered):
            hits = [name] if name in pool else [k for k in pool if k.startswith(name)]
            if len(hits) == 1:
                out.append(hits[0])
                break
        else:
            known = sorted(set(recorded) | set(registered))
            hits = [k for k in known if k.startswith(name)]
            if hits:
                raise ValueError(f"--kernels: kernel name {name!r} is ambiguous: "
                                 f"{', '.join(hits)}")
            raise ValueError(f"--kernels: unknown kernel {name!r}; known: {', '.join(known)}")
    return tuple(out)


def _changepoints(rows, runs, new_run) -> None:
    """Where each flagged or drifting series stepped, up to the judged run."""
    upto = runs[:runs.index(new_run) + 1]
    for r in rows:
        if not (r.verdict in (Verdict.DROP, Verdict.UNRESOLVED, Verdict.CANDIDATE)
                or r.bound is not None and past_anchor(r)):   # drifting
            continue
        key = Series(*r.key)
        pts = [(run.commit, run.points[key].value) for run in upto if key in run.points]
        try:   # changepoints leaves out what is not a finite positive value
            r.changepoints = anchors.changepoints(pts)
        except ImportError as exc:   # the [track] extra brings ruptures
            r.changepoints = [{"error": f"no change-point detection here ({exc})"}]
