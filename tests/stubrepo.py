"""Stand-in `gemm` packages in real git commits, for the CPU tests of the A/B and the gate:
each commit's `python -m gemm measure` reports numbers fixed (or scripted) in that commit.

ARGS: the argument handling every stand-in `gemm/__main__.py` starts with (the entry point's
contract: `measure [--kernel K]... --sizes S... --json FILE`, `--help` answers 0).
"""
import subprocess

ARGS = '''
args = sys.argv[1:]
if args[:1] != ["measure"]:
    sys.exit(2)
if "--help" in args:
    sys.exit(0)
kernels = [args[i + 1] for i, a in enumerate(args) if a == "--kernel"]
kernel = kernels[0]
sizes = args[args.index("--sizes") + 1:args.index("--json")]
'''


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def new_repo(path):
    path.mkdir()
    git(path, "init", "-q")
    return path


def commit_package(repo, msg: str) -> str:
    """Commit what is in repo/gemm now; returns the commit's sha."""
    git(repo, "add", "-A", "gemm")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", msg)
    return git(repo, "rev-parse", "HEAD")
