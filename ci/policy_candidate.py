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
the history.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

POLICY_FILE = Path("gemm") / "core" / "policy.py"


def parse(spec: str) -> dict[str, str]:
    """"k=v,k=v" -> {k: v} (raw strings); an empty spec is no change."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"expected key=value, got {part!r}")
        out[key.strip()] = value.strip()
    return out


def typed(changes: dict[str, str], defaults: dict) -> dict:
    """The values as their fields' types (those of the tree's own defaults)."""
    out = {}
    for key, raw in changes.items():
        if key not in defaults:
            raise ValueError(f"{key!r} is not a Policy field (fields: {', '.join(defaults)})")
        kind = type(defaults[key])
        try:
            out[key] = raw if kind is str else kind(raw)
        except ValueError:
            raise ValueError(f"{key}={raw!r} is not of type {kind.__name__}") from None
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


def _suite_policy(tree: Path) -> dict:
    """The suite policy the tree's own package has (imported in a fresh process)."""
    code = "import json; from gemm.core.policy import SUITE; print(json.dumps(SUITE.as_dict()))"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True,
                         text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"the tree's gemm would not import: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    tree, spec = Path(argv[0]).resolve(), argv[1]
    path = tree / POLICY_FILE
    try:
        before = _suite_policy(tree)
        values = typed(parse(spec), before)
        new_text = rewrite(path.read_text(), values)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"policy_candidate: {exc}", file=sys.stderr)
        return 2
    old_text = path.read_text()
    path.write_text(new_text)
    try:
        after = _suite_policy(tree)
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
