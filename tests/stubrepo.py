"""Stand-in `gemm` packages in real git commits, for the CPU tests of the A/B and the gate:
each commit's `python -m gemm measure` reports numbers fixed (or scripted) in that commit.

ARGS: the argument handling every stand-in `gemm/__main__.py` starts with (the entry point's
contract: `measure --task KERNEL@SIZE... --json FILE`, `--help` answers 0): `pairs` the
(kernel, size) asked for, `kernels` their kernels in order. commit_package gives each commit a
gemm/cli/main.py that declares "--task", which is how the A/B tells its `gemm measure` takes it.
commit_fixed: a commit whose `gemm measure` reports a fixed TFLOPS (and logs the kernels asked
for to calls.log in its working directory).
"""
import subprocess
import textwrap

ARGS = '''
args = sys.argv[1:]
if args[:1] != ["measure"]:
    sys.exit(2)
if "--help" in args:
    sys.exit(0)
pairs = [tuple(args[i + 1].split("@")) for i, a in enumerate(args) if a == "--task"]
kernels = list(dict.fromkeys(k for k, _ in pairs))
kernel = kernels[0]
'''


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def commits(repo, n: int) -> list[str]:
    """A new git repository on branch main at `repo` (made if absent) with `n` commits, each
    changing f.txt; their shas, oldest first."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(n):
        (repo / "f.txt").write_text(str(i))
        git(repo, "add", "f.txt")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"c{i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def new_repo(path):
    path.mkdir()
    git(path, "init", "-q")
    return path


def commit_package(repo, msg: str) -> str:
    """Commit what is in repo/gemm now (with a gemm/cli/main.py declaring --task, if it has
    none); returns the commit's sha."""
    cli = repo / "gemm" / "cli" / "main.py"
    if not cli.exists():
        cli.parent.mkdir(parents=True, exist_ok=True)
        cli.write_text('measure.add_argument("--task", action="append")\n')
    git(repo, "add", "-A", "gemm")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", msg)
    return git(repo, "rev-parse", "HEAD")


FIXED_MAIN = '''
import json, os, sys
TFLOPS = {tflops}
''' + ARGS + '''
with open("calls.log", "a") as f:
    f.write(" ".join(kernels) + "\\n")
doc = {{"schema": "gemm.measure/1",
        "package": os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.py"),
        "values": [{{"kernel": kernel, "size": s, "status": "ok", "error": "",
                    "metrics": {{"tflops": TFLOPS, "pct_of_cublas": 2 * TFLOPS}}}}
                   for kernel, s in pairs]}}
open(args[args.index("--json") + 1], "w").write(json.dumps(doc))
'''


def commit_fixed(repo, tflops, msg):
    """A commit whose `gemm` measures `tflops` through `python -m gemm measure`."""
    pkg = repo / "gemm"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    # the message in the code: each commit's measured code differs (codeid.same_code), so
    # the gate measures it even where it runs at the same speed
    (pkg / "__main__.py").write_text(textwrap.dedent(FIXED_MAIN.format(tflops=tflops))
                                     + f"# {msg}\n")
    return commit_package(repo, msg)
