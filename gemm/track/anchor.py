"""Drift: the anchor (--anchor, a perf-anchor* tag, anchor.toml) and where a series stepped."""
from __future__ import annotations

import tomllib
from pathlib import Path

from ..core import git
from ..store.history import finite

ANCHOR_TAGS = "perf-anchor*"
ANCHOR_FILE = "anchor.toml"
PENALTY = 4.0   # a change point costs PENALTY sigma^2 ln(n)


def _commit(repo, rev: str, source: str) -> str:
    sha = git.output(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", timeout=60)
    if not sha:
        raise ValueError(f"the anchor {rev!r} ({source}) is not a commit git knows here")
    return sha


def resolve(repo=".", explicit: str | None = None) -> tuple[str | None, str]:
    """(anchor sha or None, where it came from or why there is none); ValueError: unknown."""
    if explicit:
        return _commit(repo, explicit, "--anchor"), f"--anchor {explicit}"
    tags = git.output(repo, "tag", "--list", ANCHOR_TAGS, "--sort=-creatordate", timeout=60)
    if tags:
        tag = tags.split()[0]
        return _commit(repo, tag, f"tag {tag}"), f"tag {tag}"
    path = Path(repo) / ANCHOR_FILE
    if not path.is_file():
        return None, f"no anchor (no --anchor, no tag {ANCHOR_TAGS}, no {ANCHOR_FILE})"
    try:
        rev = tomllib.loads(path.read_text())["commit"]
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} must hold commit = \"<sha>\" ({exc})") from None
    return _commit(repo, str(rev), path.name), path.name


def unusable(repo, anchor: str, judged: str, earlier: set) -> str:
    """Why `anchor` cannot serve `judged`, recorded after the `earlier` commits ('' if it can)."""
    if judged == anchor:
        return "is the judged commit"
    if anchor not in earlier:
        return "has no recorded run before it on this machine"
    related = git.returncode(repo, "merge-base", "--is-ancestor", anchor, judged)
    if related not in (0, 1):   # a shallow clone, an unknown commit
        return "could not be placed by git (a shallow clone?)"
    return "" if related == 0 else "is not an ancestor of it"


def changepoints(points: list[tuple[str, float | None]]) -> list[dict]:
    """Where the (commit, value) points stepped, up or down, oldest first (docs/gate.md)."""
    import numpy as np
    import ruptures
    kept = [(c, v) for c, v in points if finite(v) and v > 0]
    if len(kept) < 3:
        return []
    y = np.log(np.array([v for _, v in kept]))
    d = np.diff(y)
    sigma = max(1.4826 * float(np.median(np.abs(d - np.median(d)))) / np.sqrt(2), 1e-4)
    algo = ruptures.Pelt(model="l2", min_size=1, jump=1).fit(y.reshape(-1, 1))
    ends = algo.predict(pen=PENALTY * sigma ** 2 * np.log(len(y)))
    bounds = list(zip([0] + ends[:-1], ends))
    out = []
    for (a0, b0), (a1, b1) in zip(bounds, bounds[1:]):
        before, after = float(np.exp(y[a0:b0].mean())), float(np.exp(y[a1:b1].mean()))
        out.append({"commit": kept[a1][0], "before": before, "after": after,
                    "change": after / before - 1})
    return out
