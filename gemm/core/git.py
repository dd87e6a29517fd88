"""git, as the gate and gemm explain ask it: a command's output, or whether it succeeded."""
from __future__ import annotations

import subprocess


class GitError(RuntimeError):
    """git could not run, or the command failed; the message says which and why."""


def run(repo, *args, timeout: float = 120) -> str:
    """`git -C repo args...`'s output, stripped; GitError where it fails."""
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                             timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if out.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {out.stderr.strip()[-300:]}")
    return out.stdout.strip()


def output(repo, *args, timeout: float = 120) -> str | None:
    """`run`'s output; None where git fails."""
    try:
        return run(repo, *args, timeout=timeout)
    except GitError:
        return None


def returncode(repo, *args, timeout: float = 60) -> int | None:
    """`git -C repo args...`'s exit status (for questions git answers with it: diff --quiet,
    merge-base --is-ancestor); None where git could not run."""
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                              timeout=timeout).returncode
    except (OSError, subprocess.SubprocessError):
        return None
