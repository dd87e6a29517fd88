"""`gemm summary`: the per-commit GPU job's summary in markdown (the job's step summary and,
on a pull request, its comment): the gate's verdicts (from its gemm.regress/1 report: the
counts, then every series that is not ok, those that fail the gate and the UNRESOLVED first,
these by reason with a short note each (gemm.record.unresolved), their whole notes collapsed;
under them why each confirmed DROP dropped, where ci/explain.sh attached its explanation to
the report's rows) and this commit's table, kernels x tracked sizes, TFLOPS and % of cuBLAS
(gemm.cli.markdown, from the record's sweep documents, gemm.measure/1, the numbers `gemm show`
prints from them).

It never fails for want of input: a report or sweep that is missing or unreadable is said in
a line of the summary (the stage that should have written it failed or did not run), and the
rest is rendered from what there is. Nothing here measures or judges.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..record import unresolved
from .common import UsageError
from .markdown import MARK, results_table
from .markdown import cell as _cell, kernel_label as _kernel_label, metric_label as _metric_label
from .markdown import pct as _pct

# the order verdicts are listed in, and their marks: those that fail the gate (red), the
# undecided (yellow), then the rest (in a collapsed list)
FAILING = ("DROP", "FAILED", "MISSING")
ORDER = ("DROP", "FAILED", "MISSING", "UNRESOLVED", "drop?", "noise", "improved", "new",
         "skipped")
GITHUB_COMMENT_LIMIT = 65536        # characters of a pull-request comment


def add_arguments(p) -> None:
    p.add_argument("--sweeps", nargs="*", default=[], metavar="PATH",
                   help="the record's sweep documents (gemm.measure/1 JSON), or directories "
                        "of them (every *.json there): the results table")
    p.add_argument("--regress", metavar="FILE",
                   help="the gate's report (gemm regress --json, schema gemm.regress/1)")
    p.add_argument("--stage", action="append", default=[], metavar="NAME=RESULT",
                   help="a stage of the job and how it ended: an exit status, or a GitHub "
                        "step outcome (success, failure, cancelled, skipped); repeatable")
    p.add_argument("--out", metavar="PATH", help="write the markdown here (default: stdout)")
    p.add_argument("--max-chars", type=int, default=60000, metavar="N",
                   help="shorten the notes, then list fewer of the other verdicts, to stay "
                        f"under N characters (default 60000; a comment takes "
                        f"{GITHUB_COMMENT_LIMIT})")


def run(args) -> int:
    stages = []
    for s in args.stage:
        name, sep, result = s.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--stage {s!r}: expected NAME=RESULT, e.g. gate=0 or gate=failure")
        stages.append((name.strip(), result.strip()))
    text = render(args.sweeps, args.regress, stages, args.max_chars)
    if args.out:
        try:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(text)
        except OSError as exc:
            raise UsageError(f"cannot write {args.out}: {exc}") from None
    else:
        sys.stdout.write(text)
    return 0


# --- inputs ----------------------------------------------------------------------------------

def _load(path: Path) -> tuple[dict | None, str | None]:
    """(document, None), or (None, why it cannot be used)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None, "missing"
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({type(exc).__name__}: {str(exc)[:120]})"
    if not isinstance(doc, dict):
        return None, "not a JSON object"
    return doc, None


def load_sweeps(paths) -> tuple[list[dict], list[str]]:
    """The sweep documents under `paths` (files, or directories of *.json) and a line for each
    path that gave none."""
    docs, problems = [], []
    for p in map(Path, paths):
        if not p.exists():
            problems.append(f"sweeps: `{p}` is missing (the record stage did not run, or "
                            "stopped before its sweeps)")
            continue
        files = sorted(p.glob("*.json")) if p.is_dir() else [p]
        if p.is_dir() and not files:
            problems.append(f"no sweep documents in `{p}` (the record stage wrote none)")
        for f in files:
            doc, why = _load(f)
            if doc is not None and not isinstance(doc.get("records"), list):
                doc, why = None, "not a sweep document (no records)"
            if doc is None:
                problems.append(f"sweep `{f}`: {why}")
            else:
                docs.append(doc)
    if not paths:
        problems.append("no sweep documents given (the record stage did not run or wrote none)")
    return docs, problems


def load_regress(path) -> tuple[dict | None, str | None]:
    if not path:
        return None, "no gate report given"
    doc, why = _load(Path(path))
    if doc is not None and not isinstance(doc.get("rows"), list):
        doc, why = None, "not a gate report (no rows)"
    if doc is None:
        return None, (f"gate report `{path}`: {why}"
                      + (" (the regression gate did not run or stopped before its report)"
                         if not Path(path).exists() else ""))
    return doc, None


# --- markdown --------------------------------------------------------------------------------

def _stage_line(stages) -> str:
    def one(name, result):
        r = result.lower()
        if r in ("0", "success"):
            return f"{name} ✅"
        if r == "skipped":
            return f"{name} ⏭️ skipped"
        if r in ("", "none"):
            return f"{name} (not run)"
        if r.lstrip("-").isdigit():
            return f"{name} ❌ exit {r}"
        return f"{name} ❌ {r}"
    return "Stages: " + ", ".join(one(n, r) for n, r in stages)


def _headline(doc: dict | None) -> str:
    if doc is None:
        return "**Regression gate: no report** ⚠️"
    counts = doc.get("counts") or {}
    if doc.get("empty"):
        return ("**Regression gate: FAILED** ❌ (EMPTY: the run of this commit measured nothing"
                " under the current benchmark versions)")
    undecided = counts.get("UNRESOLVED", 0)
    if doc.get("exit") == 0:
        s = "**Regression gate: passed** ✅"
        if undecided:
            s += (f" ({undecided} UNRESOLVED: the A/B could not decide them here; the next "
                  "commit measures them first)")
        return s
    what = [f"{counts[v]} {v}" for v in FAILING if counts.get(v)]
    stuck = _failing_unresolved(doc)
    if stuck:
        cfg = doc.get("config") or {}
        what.append(f"{stuck} UNRESOLVED" + (" (--strict)" if cfg.get("strict") else
                                             f" at {cfg.get('carry_commits')} commits running"))
    return f"**Regression gate: FAILED** ❌ ({', '.join(what) or 'exit ' + str(doc.get('exit'))})"


def _settle_lines(doc: dict | None) -> list[str]:
    """What to do where UNRESOLVED series fail the job: no drop was confirmed, the A/B needs
    time (docs/ci.md, "When the job fails on UNRESOLVED series")."""
    if not doc or doc.get("exit") == 0 or not _failing_unresolved(doc):
        return []
    sha = str(doc.get("commit") or "<sha>")[:10]
    return ["None of the UNRESOLVED series is a confirmed drop: the A/B could not decide "
            "them within its time budget and rounds. To settle them, give the A/B time on the "
            f"runner (`COMMIT={sha} REGRESS_ARGS=\"--budget 1800\" bash ci/regress.sh`, then commit "
            "`verdicts/`); after a harness change too large to settle, move the anchor in a "
            "reviewed commit (docs/ci.md, \"When the job fails on UNRESOLVED series\").", ""]


def _failing_unresolved(doc: dict) -> int:
    """The UNRESOLVED series that fail the gate (gemm.track.gate.failed)."""
    return sum(1 for r in doc.get("rows", []) if isinstance(r, dict)
               and unresolved.fails(r, doc.get("config")))


def _counts_line(doc: dict) -> str:
    counts = doc.get("counts") or {}
    order = {v: i for i, v in enumerate(ORDER + ("ok",))}
    parts = [f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: order.get(kv[0], 99))]
    s = f"{sum(counts.values())} series: " + ", ".join(parts) if parts else "no series"
    if doc.get("anchor"):
        s += f"; anchor {str(doc['anchor'])[:10]}"
    if doc.get("narrowed"):
        s += f"; narrowed to {doc['narrowed']}"
    return s


def _verdict_rows(doc: dict) -> tuple[list[dict], list[dict]]:
    """(the rows that fail the gate or are UNRESOLVED, the other rows not ok), in ORDER."""
    rank = {v: i for i, v in enumerate(ORDER)}
    rows = [r for r in doc.get("rows", []) if isinstance(r, dict) and r.get("verdict") != "ok"]
    rows.sort(key=lambda r: (rank.get(r.get("verdict"), len(ORDER)), str(r.get("kernel")),
                             str(r.get("size")), str(r.get("metric"))))
    top = [r for r in rows if r.get("verdict") in FAILING + ("UNRESOLVED",)]
    return top, [r for r in rows if r not in top]


def _short(text: str, chars: int | None) -> str:
    return text if chars is None or len(text) <= chars else \
        text[:max(chars - 1, 0)].rstrip() + "…"


def _verdict_table(rows: list[dict], note_chars: int | None, config=None,
                   failures: dict | None = None) -> list[str]:
    """The rows' table; an UNRESOLVED row that does not fail the gate with its short note
    (gemm.record.unresolved); a FAILED row with what its record said (`failures`)."""
    out = ["| | kernel | size | metric | verdict | change | vs anchor | min effect | note |",
           "|---|---|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        v = str(r.get("verdict"))
        note = unresolved.note(r, config)
        said = (failures or {}).get((r.get("kernel"), r.get("size")))
        if v == "FAILED" and said:
            note = f"the record: {said}"
        if v == "UNRESOLVED" and unresolved.running(r) > 1:
            note = f"{unresolved.running(r)} commits running. {note}"
        note = _short(note, note_chars)
        me = r.get("min_effect")
        out.append("| " + " | ".join([
            MARK.get(v, ""), _cell(_kernel_label(str(r.get("kernel")))), _cell(r.get("size")),
            _cell(_metric_label(str(r.get("metric")))),
            f"**{_cell(v)}**" if v in MARK else _cell(v),
            _pct(r.get("change")), _pct(r.get("anchor_change")),
            "-" if me is None else _pct(me, signed=False, nd=1), _cell(note)]) + " |")
    return out


def _unresolved_lines(doc: dict, chars: int | None) -> tuple[list[str], list[str]]:
    """(a line per reason the UNRESOLVED series were left open, the notes they shorten, once
    each, in a collapsed list); ([], []) for a report that names no reasons."""
    rows = [r for r in doc.get("rows", []) if isinstance(r, dict)]
    why = unresolved.lines(rows, doc.get("config"))
    if not why:
        return [], []
    full = [f"- {', '.join(_cell(_name(r)) for r in rs)}: {_cell(_short(n, chars))}"
            for rs, n in unresolved.notes(rows)]
    return (["Why UNRESOLVED:", "", *(f"- 🟡 {_cell(w)}" for w in why), ""],
            ["<details><summary>The UNRESOLVED series' notes in full</summary>", "", *full,
             "", "</details>", ""])


def _name(r: dict) -> str:
    return (f"{_kernel_label(str(r.get('kernel')))} {r.get('size')} "
            f"{_metric_label(str(r.get('metric')))}")


def _why_lines(rows: list[dict], chars: int | None) -> list[str]:
    """A line per DROP kernel and size whose row carries an explanation (gemm explain)."""
    from ..store.verdicts import explanations, why
    out = []
    for (k, s), e in explanations(rows).items():
        line = why(e)
        if chars is not None and len(line) > chars:
            line = line[:max(chars - 1, 0)].rstrip() + "…"
        out.append(f"- 🔴 {_cell(_kernel_label(str(k)))} at {_cell(s)}: {_cell(line)}")
    return ["**Why** (`gemm explain`: what changed in the code since the commit the drop was "
            "confirmed against)", "", *out, ""] if out else []


def _flagged(doc: dict | None) -> dict:
    """{(kernel, size): the worst marked verdict of its series}."""
    out: dict = {}
    for r in (doc or {}).get("rows", []):
        v = r.get("verdict") if isinstance(r, dict) else None
        if v in MARK:
            key = (r.get("kernel"), r.get("size"))
            if key not in out or ORDER.index(v) < ORDER.index(out[key]):
                out[key] = v
    return out


def render(sweeps, regress, stages=(), max_chars: int = 60000) -> str:
    docs, missing = load_sweeps(sweeps)
    doc, why = load_regress(regress)
    if why:
        missing.insert(0, why)
    top, rest = _verdict_rows(doc) if doc else ([], [])
    device = next((d["device"].get("name") for d in docs if isinstance(d.get("device"), dict)
                   and d["device"].get("name")), None)
    records = [r for d in docs for r in d["records"]]
    table = results_table(records, _flagged(doc))
    failures = {(r.get("kernel"), r.get("size")): ": ".join(
                    str(x) for x in (r.get("status"), r.get("error")) if x)
                for r in records if r.get("role") == "kernel" and r.get("status") != "ok"}

    def build(note_chars, n_rest, n_top):
        who = []
        if doc and doc.get("commit"):
            who.append(f"commit `{str(doc['commit'])[:10]}`")
        if doc and doc.get("machine"):
            who.append(f"machine `{_cell(doc['machine'])}`")
        if device:
            who.append(_cell(device))
        lines = ["## GPU job" + (": " + ", ".join(who) if who else ""), ""]
        if stages:
            lines += [_stage_line(stages), ""]
        lines += [_headline(doc), ""]
        lines += _settle_lines(doc)
        for m in missing:
            lines.append(f"- ⚠️ {_cell(m)}")
        if missing:
            lines.append("")
        if doc:
            lines += [_counts_line(doc), ""]
            if doc.get("calibration") is None and doc.get("calibration_note"):
                lines += [f"Minimum effects are the size classes' floors: "
                          f"{_cell(doc['calibration_note'])}", ""]
            if top:
                why, full = _unresolved_lines(doc, note_chars)
                lines += ["### Failing and UNRESOLVED series", "", *why]
                lines += _verdict_table(top[:n_top], note_chars, doc.get("config"), failures)
                if n_top < len(top):
                    lines.append(f"\n… and {len(top) - n_top} more (regress.json in the job's "
                                 "artifact has them all)")
                lines.append("")
                lines += _why_lines(top, note_chars) + full
            if rest:
                lines += [f"<details><summary>{len(rest)} other series not ok (noise, improved,"
                          " new, ...)</summary>", ""]
                lines += _verdict_table(rest[:n_rest], note_chars, doc.get("config"))
                if n_rest < len(rest):
                    lines.append(f"\n… and {len(rest) - n_rest} more (regress.json in the job's "
                                 "artifact has them all)")
                lines += ["", "</details>", ""]
        lines += ["### This commit's results", ""]
        if table:
            lines += table
            if any(m in "".join(table) for m in set(MARK.values())):
                lines += ["", "🔴 a series here fails the gate; 🟡 UNRESOLVED"]
        else:
            lines.append("No results to show (no sweep records).")
        return "\n".join(lines) + "\n"

    # within max_chars: shorter notes, then fewer of the other rows, then fewer failing rows
    tries = [(None, len(rest), len(top)), (400, len(rest), len(top)), (160, len(rest), len(top))]
    tries += [(160, n, len(top)) for n in (50, 10, 0)] + [(80, 0, n) for n in (100, 30, 10)]
    for note_chars, n_rest, n_top in tries:
        text = build(note_chars, min(n_rest, len(rest)), min(n_top, len(top)))
        if len(text) <= max_chars:
            return text
    return text[:max_chars - 80].rsplit("\n", 1)[0] + "\n\n… (cut to the size limit)\n"
