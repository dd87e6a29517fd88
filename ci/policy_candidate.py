"""A candidate measurement policy, for a policy study (ci/device-run.sh EXTRAS=policystudy).

    python3 ci/policy_candidate.py TREE "min_time_s=0.1,max_samples=40"

rewrites the defaults of the Policy dataclass in TREE/gemm/core/policy.py (a throwaway
worktree, never main), then imports the rewritten package in a fresh process and checks that
its suite policy has exactly the asked-for values. Every key must be a Policy field and every
value must parse as that field's type; otherwise nothing is written and the exit status is 2.
Prints the resulting policy as JSON.

Why a rewrite and not an option: the policy is part of every series' benchmark version, so
the suite has no switch for it on purpose. A candidate is measured as a commit of its own (its
own fingerprint), by `gemm calibrate --repo TREE` and `gemm bench` in TREE, never recorded into
the history. The rewrite changes the dataclass defaults, so SUITE's; CONFIRM (the A/B's and
the calibration's policy) is derived from SUITE but sets its own stop rule and operand sets,
so a candidate of those fields changes what `gemm bench` spends, not the A/A the study
measures through the A/B's path.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

POLICY_FILE = Path("gemm") / "core" / "policy.py"


# set per run by `gemm bench/measure --mode`, which overrides the default: not a candidate's
NOT_CANDIDATES = {"mode": "set by --mode on every run, which overrides a default"}
KINDS = {"float": float, "int": int, "str": str}


def parse(spec: str) -> dict[str, str]:
    """"k=v,k=v" -> {k: v} (raw strings); at least one pair (a study measures today's policy
    as the candidate "today", not as an empty rewrite)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"expected key=value, got {part!r}")
        out[key.strip()] = value.strip()
    if not out:
        raise ValueError("an empty candidate changes nothing (today's policy is the candidate "
                         "'today' of ci/device-run.sh's policystudy)")
    return out


def typed(changes: dict[str, str], kinds: dict[str, str]) -> dict:
    """The values as their fields' annotated types (`kinds`: field -> 'float', 'int', 'str', as
    the tree's own Policy declares them); finite numbers only."""
    out = {}
    for key, raw in changes.items():
        if key in NOT_CANDIDATES:
            raise ValueError(f"{key!r} is not a candidate: {NOT_CANDIDATES[key]}")
        if key not in kinds:
            raise ValueError(f"{key!r} is not a Policy field (fields: {', '.join(kinds)})")
        kind = KINDS.get(kinds[key])
        if kind is None:
            raise ValueError(f"{key!r} has type {kinds[key]}, which this tool cannot set")
        try:
            out[key] = raw if kind is str else kind(raw)
        except ValueError:
            raise ValueError(f"{key}={raw!r} is not of type {kind.__name__}") from None
        if kind is float and not math.isfinite(out[key]):
            raise ValueError(f"{key}={raw!r} is not a finite number")
    return out


def rewrite(text: str, values: dict) -> str:
    """The policy module's source with the dataclass defaults of `values` replaced (each field's
    line `    name: type = default  # comment` keeps its annotation and comment)."""
    for key, value in values.items():
        pat = re.compile(rf"^(    {re.escape(key)}: [\w\[\], |]+ = )([^#\n]*?)(\s*(?:#[^\n]*)?)$",
                         re.M)
        text, n = pat.subn(lambda m: m.group(1) + repr(value) + m.group(3), text, count=1)
        if n != 1:
            raise ValueError(f"no default line for {key!r} in {POLICY_FILE}")
    return text


_PROBE = """
import dataclasses, json, typing
from gemm.core.policy import SUITE, Policy
hints = typing.get_type_hints(Policy)
print(json.dumps({"values": dataclasses.asdict(SUITE),
                  "kinds": {f.name: getattr(hints[f.name], "__name__", str(hints[f.name]))
                            for f in dataclasses.fields(Policy)}}))
"""


def _suite_policy(tree: Path) -> tuple[dict, dict]:
    """The suite policy the tree's own package has (imported in a fresh process, the tree
    first on the path), and its fields' annotated types."""
    path = os.pathsep.join([str(tree)] + [p for p in os.environ.get("PYTHONPATH", "")
                                          .split(os.pathsep) if p])
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=tree,
                         env={**os.environ, "PYTHONPATH": path}, capture_output=True,
                         text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"the tree's gemm would not import: {out.stderr.strip()[-400:]}")
    got = json.loads(out.stdout)
    return got["values"], got["kinds"]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    tree, spec = Path(argv[0]).resolve(), argv[1]
    path = tree / POLICY_FILE
    try:
        before, kinds = _suite_policy(tree)
        values = typed(parse(spec), kinds)
        new_text = rewrite(path.read_text(), values)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"policy_candidate: {exc}", file=sys.stderr)
        return 2
    old_text = path.read_text()
    path.write_text(new_text)
    try:
        after, _ = _suite_policy(tree)
    except RuntimeError as exc:   # e.g. the Policy's own checks refuse the combination
        path.write_text(old_text)
        print(f"policy_candidate: {exc}; left as it was", file=sys.stderr)
        return 2
    wrong = {k: after.get(k) for k, v in values.items() if after.get(k) != v}
    others = {k for k in before if k not in values and before[k] != after.get(k)}
    if wrong or others:
        path.write_text(old_text)
        print(f"policy_candidate: the rewrite did not take (got {wrong}, also moved {others}); "
              "left as it was", file=sys.stderr)
        return 2
    print(json.dumps(after))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
