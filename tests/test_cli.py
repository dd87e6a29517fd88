"""The command line without a GPU: parsing, listing, one-sentence errors and exit codes."""
import subprocess
import sys

import pytest

from gemm import cli
from gemm.core import shapes


def run(*args):
    return subprocess.run([sys.executable, "-m", "gemm", *args], capture_output=True, text=True)


def test_list_shows_every_kernel():
    out = run("list")
    assert out.returncode == 0
    for name in ("01_naive", "05_2d_blocktiling"):
        assert name in out.stdout


def test_parser_defaults():
    args = cli.build_parser().parse_args(["bench"])
    assert args.sizes == list(shapes.TRACKED) and args.mode == "hot"
    args = cli.build_parser().parse_args(["bench", "-k", "05", "--sizes", "1000x832x504"])
    assert args.kernel == ["05"] and args.sizes == ["1000x832x504"]


@pytest.mark.parametrize("argv,msg", [
    (["bench", "--kernel", "zz"], "unknown kernel 'zz'"),
    (["bench", "--sizes", "12q"], "not N or MxNxK"),
    (["bench", "--sizes", "0"], "at least 1"),
    (["bench", "--mode", "warm"], "one of hot, cold, sustained"),
    (["check", "--shapes", "1x2"], "not N or MxNxK"),
])
def test_bad_arguments_are_one_sentence(argv, msg):
    out = run(*argv)
    assert out.returncode == 2
    assert msg in out.stderr and "Traceback" not in out.stderr


def test_gpu_commands_without_a_gpu(monkeypatch, capsys):
    import gemm.cuda.device as dev
    monkeypatch.setattr(dev, "probe", lambda: (False, "the CUDA driver sees no GPU"))
    for argv in (["bench"], ["check"], ["measure"], ["measure", "--probe"], ["machine"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert "needs a CUDA GPU" in err and "sees no GPU" in err and len(err.splitlines()) == 1


def test_real_no_gpu_path_has_no_traceback():
    from gemm.cuda.device import probe
    if probe()[0]:
        pytest.skip("a GPU is present")
    out = run("bench", "--sizes", "64")
    assert out.returncode == 2 and "needs a CUDA GPU" in out.stderr
    assert "Traceback" not in out.stderr


def test_regress_without_results(tmp_path):
    out = run("regress", "--results", str(tmp_path / "none"), "--machine", "h200")
    assert out.returncode == 2 and "no results directory" in out.stderr


def test_the_time_split_of_a_sweep():
    """Where a sweep's wall time went (the per-commit job's time budget is spent there)."""
    from gemm.cli.main import _time_split
    docs = [{"workers": [{"ready_s": 2.5, "wall_s": 9.0}, {"ready_s": 1.5, "wall_s": 5.0}]}]
    recs = [{"wall": {"check_s": 0.25, "time_s": 0.75}}, {"wall": {"check_s": 0.75}}, {}]
    assert _time_split(docs, recs) == (" (4 s starting 2 worker processes, 1 s checking, "
                                       "1 s timing)")
    assert _time_split([{}], [{}]) == ""     # documents from before the split was kept
    recs[0]["wall"]["open_s"] = {"kernel_load": 1.25, "baseline_open": 0.5}
    assert _time_split(docs, recs) == (" (4 s starting 2 worker processes, 2 s opening "
                                       "targets, 1 s checking, 1 s timing)")


@pytest.mark.parametrize("argv,msg", [
    (["measure", "--task", "05@4096", "--kernel", "05"], "not both"),
    (["measure", "--task", "05@4096", "--sizes", "1024"], "not both"),
    (["measure", "--task", "05-4096"], "KERNEL@SIZE"),
    (["measure", "--task", "@4096"], "KERNEL@SIZE"),
    (["measure", "--task", "zz@4096"], "unknown kernel 'zz'"),
    (["measure", "--task", "05@12q"], "not N or MxNxK"),
])
def test_measure_task_is_checked_before_the_gpu(argv, msg, monkeypatch, capsys):
    import gemm.cuda.device as dev
    monkeypatch.setattr(dev, "probe", lambda: (True, ""))   # a GPU: the error still comes first
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.splitlines()) == 1


@pytest.fixture
def sweep_jobs(monkeypatch):
    """A GPU that answers and a sweep whose worker passes every task without running it: the
    jobs the command handed to it."""
    import gemm.cuda.device as dev
    import gemm.measure.sweep as sw
    monkeypatch.setattr(dev, "probe", lambda: (True, ""))
    jobs = []

    def worker(job, timeout=None):
        jobs.append(job)
        for name, p in job["tasks"]:
            yield "result", {"kernel": name, "role": "kernel", "size": str(p["M"]),
                             "status": "ok", "checks": []}
        yield "exit", {"code": 0, "stderr": "", "timed_out": False}
    monkeypatch.setattr(sw, "run_worker", worker)
    return jobs


def test_measure_tasks_are_the_pairs_measured_in_their_order(sweep_jobs, capsys):
    """`gemm measure --task K@S ...` hands exactly those pairs to the sweep, in order (the A/B
    measures one arm in one process with it); --kernel x --sizes is the cross product."""
    jobs = sweep_jobs
    assert cli.main(["measure", "--task", "07@2048", "--task", "05@4096x4096x1024",
                     "--task", "07@8192"]) == 0
    assert [(n, p["M"], p["N"], p["K"]) for n, p in jobs[-1]["tasks"]] == [
        ("07_bank_conflict_free", 2048, 2048, 2048), ("05_2d_blocktiling", 4096, 4096, 1024),
        ("07_bank_conflict_free", 8192, 8192, 8192)]
    assert cli.main(["measure", "-k", "07", "-k", "05", "--sizes", "512", "1024"]) == 0
    assert [(n[:2], p["M"]) for n, p in jobs[-1]["tasks"]] == [
        ("07", 512), ("07", 1024), ("05", 512), ("05", 1024)]
    capsys.readouterr()


def test_check_takes_one_alpha_beta_pair(sweep_jobs, capsys):
    """`gemm check --alpha-beta A,B` checks that pair alone (ci/memcheck.sh's racecheck and
    synccheck passes); without it, every pair of the gate."""
    jobs = sweep_jobs
    assert cli.main(["check", "-k", "06", "--shapes", "136x264x108", "--alpha-beta", "1.5,0.5"]) == 0
    assert jobs[-1]["ab"] == [[1.5, 0.5]] and jobs[-1]["time"] is False
    assert cli.main(["check", "-k", "06", "--shapes", "64", "--alpha-beta", "1,0",
                     "--alpha-beta=-1,2"]) == 0
    assert jobs[-1]["ab"] == [[1.0, 0.0], [-1.0, 2.0]]
    assert cli.main(["check", "-k", "06", "--shapes", "64"]) == 0
    assert jobs[-1]["ab"] == [list(x) for x in shapes.CHECK_AB]
    capsys.readouterr()
    out = run("check", "--alpha-beta", "1.5")
    assert out.returncode == 2 and "'1.5' is not ALPHA,BETA" in out.stderr


def test_version_is_the_packages():
    """`gemm --version`: the installed package's version, else the source's gemm.__version__."""
    import importlib.metadata
    import gemm
    from gemm.cli.main import version
    try:
        want = importlib.metadata.version("gemm")
    except importlib.metadata.PackageNotFoundError:
        want = gemm.__version__
    out = run("--version")
    assert out.returncode == 0 and out.stdout == f"gemm {want}\n" and not out.stderr
    assert version() == want


def test_version_without_package_metadata(monkeypatch, capsys):
    import importlib.metadata
    import gemm

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"gemm {gemm.__version__}\n"


def test_measure_takes_task_pairs_as_the_ab_gives_them():
    """The A/B's arms call `gemm measure --task K@S ... --policy confirm` (gemm.track.abtest)."""
    args = cli.build_parser().parse_args(["measure", "--task", "05@4096"])
    assert args.task == ["05@4096"]
