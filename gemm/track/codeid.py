"""Code identity, as git tells it: the same measured code, or a kernel's build changed?"""
from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

from ..core import git, registry

# what a measurement runs (git pathspecs): kernels and registry, the baseline's choice per GPU,
# the layers it imports but the git helper only the gate and gemm explain call, its entry
# point; a kernel's series need only its own build of kernels/
MEASURED_BY = ("kernels", "baselines", "gemm/core", ":(exclude)gemm/core/git.py",
               "gemm/cuda", "gemm/measure", "gemm/__init__.py", "gemm/__main__.py",
               "gemm/cli/__init__.py", "gemm/cli/main.py", "gemm/cli/measure.py",
               "gemm/cli/common.py")
HARNESS = tuple(p for p in MEASURED_BY if p != "kernels")

_ANGLE = re.compile(r'^\s*#\s*include\s*<([^>]+)>', re.MULTILINE)


def same_code(repo, older: str, newer: str, kernel: str, same_build=None) -> bool:
    """Does `newer` measure `kernel` with `older`'s code (git, else `same_build`)?"""
    try:
        registry.get(kernel)
    except (KeyError, ValueError):
        return False
    repo = Path(repo).resolve()
    if not _unchanged(repo, older, newer, HARNESS):
        return False
    if _unchanged(repo, older, newer, ("kernels",)):
        return True
    build = _kernel_build(repo, older, kernel)
    if build is not None and build == _kernel_build(repo, newer, kernel):
        return True
    return bool(same_build and same_build(older, newer, kernel))


def kernel_changed(repo, older: str, newer: str, kernel: str) -> bool:
    """Did `kernel`'s code or build change from `older` to `newer`? False where git cannot tell."""
    repo = Path(repo).resolve()
    a, b = _kernel_build(repo, older, kernel), _kernel_build(repo, newer, kernel)
    return a is not None and b is not None and a != b


@functools.lru_cache(maxsize=4096)
def _unchanged(repo: Path, older: str, newer: str, paths: tuple) -> bool:
    return git.returncode(repo, "diff", "--quiet", older, newer, "--", *paths) == 0


@functools.lru_cache(maxsize=1024)
def _kernel_build(repo, rev: str, kernel: str) -> dict | None:
    """What builds `kernel` at `rev` (git): entry, sources, tuned entries, nvcc options."""
    def show(path: str) -> str | None:
        return git.output(repo, "show", f"{rev}:{path}", timeout=30)
    try:
        entries = tomllib.loads(show("kernels/kernels.toml") or "").get("kernel") or []
    except tomllib.TOMLDecodeError:
        return None
    entry = next((e for e in entries if isinstance(e, dict) and e.get("name") == kernel), None)
    if entry is None or not isinstance(entry.get("file"), str):
        return None
    files = registry.kernel_sources(lambda name: show(f"kernels/{name}"), entry["file"])
    # nvcc also finds <name> in kernels/ (-I): a file there that a system header's name
    # would resolve to, present or not, is part of the build
    for name in {n for text in list(files.values()) for n in _ANGLE.findall(text or "")}:
        files.setdefault(f"<{name}>", show(f"kernels/{name}"))
    tuned = {}
    if entry.get("tuned") and git.returncode(repo, "cat-file", "-e",
                                             f"{rev}:kernels/tuned") == 0:
        names = git.run(repo, "ls-tree", "--name-only", f"{rev}:kernels/tuned", timeout=30)
        for fn in (n for n in names.split() if n.endswith(".toml")):
            try:
                won = tomllib.loads(show(f"kernels/tuned/{fn}") or "").get(kernel)
            except tomllib.TOMLDecodeError:
                won = show(f"kernels/tuned/{fn}")
            if won is not None:
                tuned[fn] = won
    entry = {k: v for k, v in entry.items() if k not in ("tune", "tuned")}
    return {"entry": entry, "files": files, "tuned": tuned,
            "loader": show("gemm/cuda/loader.py")}
