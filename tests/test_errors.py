"""Bad input says one sentence and exits 2, before any GPU work and with nothing recorded
changed: a broken kernel registry, an unknown kernel for the gate, malformed or truncated
result files (gemm regress, gemm show, gemm publish), a calibration made on another GPU, a
missing extra; `gemm list` fits 100 columns, `gemm show` reads asv's result files, every option
has help, and the ci scripts make and use a virtual environment outside one."""
import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gemm import cli
from gemm.store.history import HistoryError, load_runs
from tests.asvfake import write_benchmarks, write_run
from tests.stubrepo import commits

ROOT = Path(__file__).resolve().parent.parent
K = ["04_1d_blocktiling", "05_2d_blocktiling"]
S = ["1024", "4096"]


def run(*args, cwd=None, env=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}   # this checkout's gemm
    return subprocess.run([sys.executable, "-m", "gemm", *args], capture_output=True, text=True,
                          cwd=cwd, env=env)


def one_sentence(out, *parts):
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    for p in parts:
        assert p in out.stderr, out.stderr


# --- the kernel registry ------------------------------------------------------------------

@pytest.fixture
def kernels(tmp_path):
    """A copy of kernels/ that GEMM_KERNELS_DIR points at."""
    d = tmp_path / "kernels"
    shutil.copytree(ROOT / "kernels", d)
    return d


DUPLICATE = '''
[[kernel]]
name = "01_naive"
file = "01_naive.cu"
main = "sgemm_naive"
block = [32, 32]
tile = [32, 32]
precision = "fp32"
baseline = "cublas_fp32"
'''


def _break(d: Path, how: str) -> str:
    """Break the registry copy in d; returns what the message must name besides the file."""
    toml = d / "kernels.toml"
    text = toml.read_text()
    if how == "duplicate":
        toml.write_text(text + DUPLICATE)
        return "kernel '01_naive' is registered twice"
    if how == "precision":
        toml.write_text(text.replace('precision = "fp32"', 'precision = "fp64"', 1))
        return "kernel '01_naive': precision 'fp64' is not one of fp32, tf32, bf16"
    if how == "syntax":
        toml.write_text(text + "\n[[kernel\n")
        return "is not valid TOML"
    if how == "missing_cu":
        (d / "05_2d_blocktiling.cu").unlink()
        return "kernel '05_2d_blocktiling' names 05_2d_blocktiling.cu, which is not in"
    if how == "bad_expression":
        toml.write_text(text.replace("tile = [\"BLOCK\", \"BLOCK\"]", "tile = [\"BLOCK +\", 32]", 1))
        return "kernel '01_naive'"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["duplicate", "precision", "syntax", "missing_cu",
                                 "bad_expression"])
@pytest.mark.parametrize("argv", [["list"], ["bench", "-k", "05"], ["check"]])
def test_a_broken_registry_is_one_sentence_naming_file_and_entry(kernels, how, argv):
    what = _break(kernels, how)
    out = run(*argv, env={"GEMM_KERNELS_DIR": str(kernels)})
    one_sentence(out, f"gemm {argv[0]}: {kernels / 'kernels.toml'}", what)
    assert "needs a CUDA GPU" not in out.stderr   # said before anything asks for a GPU


def test_record_says_a_broken_registry_of_the_tree_it_measures(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "kernels", repo / "kernels")
    what = _break(repo / "kernels", "missing_cu")
    git = functools.partial(subprocess.run, cwd=repo, check=True, capture_output=True)
    git(["git", "init", "-q"])
    git(["git", "add", "."])
    git(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "k"])
    out = run("record", "--repo", str(repo), "--results", str(tmp_path / "results"))
    one_sentence(out, f"gemm record: {repo / 'kernels' / 'kernels.toml'}: {what}")
    assert not (tmp_path / "results").exists()


def test_no_registry_at_all(tmp_path):
    out = run("list", env={"GEMM_KERNELS_DIR": str(tmp_path / "none")})
    one_sentence(out, f"the kernel registry {tmp_path / 'none' / 'kernels.toml'} cannot be read")


def test_the_registry_checks_cu_files_only_where_asked(tmp_path):
    from gemm.core.registry import RegistryError, load_registry
    (tmp_path / "kernels.toml").write_text(DUPLICATE)
    assert list(load_registry(tmp_path / "kernels.toml")) == ["01_naive"]
    with pytest.raises(RegistryError, match="names 01_naive.cu, which is not in"):
        load_registry(tmp_path / "kernels.toml", files=True)


# --- gemm list ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["list"], ["list", "-v"]])
def test_gemm_list_fits_100_columns(argv):
    from gemm.core import registry
    out = run(*argv)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    for s in registry.registry().values():
        assert any(line.startswith(s.name) for line in lines)
    words = out.stdout.split()
    # every word of every summary is there (wrapped, not cut)
    for s in registry.registry().values():
        assert all(w in words for w in s.summary.split()), s.name
    if "-v" in argv:   # the constants, files and baselines moved here
        assert "BM=128 BN=256 STAGES=4 GROUP_M=16 PRODUCER_REGS=40 CONSUMER_REGS=232" in out.stdout
        assert "14_bf16_wgmma_tma.cu" in out.stdout and "cublas_bf16_nk" in out.stdout


# --- gemm regress, gemm show: kernels and result files ----------------------------------------

def history(tmp_path, n=3):
    res = tmp_path / "results"
    write_benchmarks(res, K, S)
    for i in range(n):
        write_run(res, f"{i:02d}" + "ab" * 19, 1_000_000 + i, {(k, s): 30.0 for k in K for s in S},
                  K, S)
    return res


def regress(res, *extra):
    return cli.main(["regress", "--results", str(res), "--machine", "h200", "--no-confirm",
                     "--calibration", str(res.parent / "calibration"), "--no-anchor", *extra])


@pytest.mark.parametrize("name,msg", [
    ("nope", "gemm regress: --kernels: unknown kernel 'nope'; known: 01_naive, 02_coalesced, "
             "03_smem_tiling, 04_1d_blocktiling, 05_2d_blocktiling, 06_vectorized"),
    ("0", "gemm regress: --kernels: kernel name '0' is ambiguous: 01_naive, 02_coalesced"),
    ("1", "gemm regress: --kernels: kernel name '1' is ambiguous: 10_autotuned, 11_tf32_wmma"),
])
def test_regress_names_an_unknown_kernel_and_the_known_ones(tmp_path, capsys, name, msg):
    """Recorded kernels and registered ones are known; before, such a name narrowed the run
    to nothing and the gate failed (exit 1) as if a kernel had not been measured."""
    res = history(tmp_path)
    assert regress(res, "--kernels", "05", name) == 2
    out = capsys.readouterr()
    assert msg in out.err and len(out.err.splitlines()) == 1 and not out.out


def test_regress_kernels_still_take_prefixes_and_registered_names(tmp_path, capsys):
    res = history(tmp_path)
    assert regress(res, "--kernels", "05") == 0
    assert "narrowed on purpose to kernels 05_2d_blocktiling;" in capsys.readouterr().out
    assert regress(res, "--kernels", "01_naive") == 1   # registered, not in the run: EMPTY
    assert "EMPTY" in capsys.readouterr().out


@pytest.mark.parametrize("bad,msg", [
    (lambda d: {**d, "results": list(d["results"].values())},
     "is not an asv version-2 result file (its 'results' is a JSON array, not an object)"),
    (lambda d: [d], "is not an asv version-2 result file (it holds a JSON array, not an object)"),
    (lambda d: {k: v for k, v in d.items() if k != "results"},
     "is not an asv version-2 result file (it has no 'results')"),
])
def test_a_malformed_result_file_is_one_sentence(tmp_path, capsys, bad, msg):
    res = history(tmp_path)
    path = sorted((res / "h200").glob("01*.json"))[0]
    path.write_text(json.dumps(bad(json.loads(path.read_text()))))
    with pytest.raises(HistoryError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        load_runs(res, "h200")
    assert regress(res) == 2
    err = capsys.readouterr().err
    assert f"gemm regress: {path} {msg}" in err and len(err.splitlines()) == 1
    one_sentence(run("show", str(path)), f"gemm show: {path} ")
    one_sentence(run("plot", "--results", str(res), "--out", str(tmp_path / "p")), str(path))


def test_show_reads_an_asv_result_file(tmp_path):
    res = history(tmp_path, n=1)
    path, = (res / "h200").glob("00*.json")
    out = run("show", str(path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("h200 (?): commit 00abababab") and "asv's medians" in lines[0]
    assert lines[1].split() == ["TFLOPS", "(%", "of", "cuBLAS)", "1024", "4096"]
    assert lines[3].split() == ["04_1d_blocktiling", "30.00", "(60", "%)", "30.00", "(60", "%)"]


def test_show_reads_the_recorded_history_as_the_readme_quotes_it():
    path, = (ROOT / "results" / "h200").glob("1ed380e6-*.json")
    out = run("show", str(path))
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("05_2d_blocktiling"))
    # README, "Results on the H200": 512 ... 4096 of 05_2d_blocktiling at commit 1ed380e
    assert row.split()[1:3] == ["6.05", "(28"] and "29.42 (57 %)" in row
    blas = next(line for line in out.stdout.splitlines() if line.startswith("cublas_fp32"))
    assert blas.split()[1:3] == ["21.82", "38.82"]


# --- gemm publish ---------------------------------------------------------------------------

@pytest.fixture
def site(tmp_path):
    """A git repository with three recorded runs and the project's asv config."""
    repo = tmp_path / "site"
    shas = commits(repo, 3)
    res = repo / "results"
    write_benchmarks(res, K, S)
    for i, sha in enumerate(shas):
        write_run(res, sha, 1_700_000_000_000 + i * 60_000, {(k, s): 30.0 for k in K for s in S},
                  K, S)
    shutil.copy(ROOT / "asv.conf.json", repo / "asv.conf.json")
    return repo


def _html(repo):
    return repo / json.loads((repo / "asv.conf.json").read_text())["html_dir"]


@pytest.mark.parametrize("damage,msg", [
    (lambda p: p.write_text(p.read_text()[:300]), "is not valid JSON"),
    (lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "results": []})),
     "is not an asv version-2 result file (its 'results' is a JSON array"),
])
def test_publish_refuses_a_result_file_asv_would_leave_out(site, damage, msg):
    path = sorted((site / "results" / "h200").glob("*-existing-py.json"))[1]
    damage(path)
    before = path.read_bytes()
    out = run("publish", cwd=site)
    one_sentence(out, f"gemm publish: results/h200/{path.name} {msg}",
                 "asv publish would leave that run out of the history")
    assert not _html(site).exists()          # nothing published without it
    assert path.read_bytes() == before       # nor anything recorded changed


def test_publish_runs_this_pythons_asv_not_one_on_the_path(site, tmp_path):
    pytest.importorskip("asv")
    impostor = tmp_path / "bin"
    impostor.mkdir()
    (impostor / "asv").write_text(f"#!/bin/sh\ntouch {tmp_path / 'impostor-ran'}\nexit 0\n")
    (impostor / "asv").chmod(0o755)
    out = run("publish", cwd=site, env={"PATH": f"{impostor}{os.pathsep}{os.environ['PATH']}"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (tmp_path / "impostor-ran").exists()
    assert (_html(site) / "asv" / "index.json").is_file()   # asv's pages, under asv/


@pytest.mark.parametrize("argv,module", [(["plot"], "matplotlib"), (["publish"], "asv"),
                                         (["publish", "--config", "none.json"], "asv")])
def test_a_missing_extra_is_named_in_one_sentence(monkeypatch, capsys, argv, module):
    monkeypatch.setitem(sys.modules, module, None)     # import fails, find_spec finds nothing
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err == (f"gemm {argv[0]}: this command needs {module}, which {sys.executable} does "
                   f"not have: install the package's track extra (pip install -e \".[track]\" "
                   f"in the checkout, or \"gemm[track]\")\n")


# --- GPU and calibration messages -------------------------------------------------------------

def test_calibrate_without_a_gpu_says_it_once(monkeypatch, capsys):
    import gemm.cuda.device as dev
    import gemm.track.confirm
    why = "the CUDA driver sees no GPU"
    monkeypatch.setattr(dev, "probe", lambda: (False, why))
    monkeypatch.setattr(gemm.track.confirm, "gpu_present", lambda: (
        False, f"gemm measure: this command needs a CUDA GPU, and none is usable here: {why}"))
    assert cli.main(["calibrate", "--sizes", "1024"]) == 2
    assert capsys.readouterr().err == ("gemm calibrate: this command needs a CUDA GPU, and none "
                                       f"is usable here: {why}\n")


def test_calibrate_without_a_gpu_for_real():
    from gemm.cuda.device import probe
    if probe()[0]:
        pytest.skip("a GPU is present")
    out = run("calibrate")
    one_sentence(out, "gemm calibrate: this command needs a CUDA GPU")
    assert out.stderr.count("needs a CUDA GPU") == 1 and "gemm measure" not in out.stderr


def test_regress_says_why_a_calibration_of_another_gpu_is_not_used(tmp_path, monkeypatch, capsys):
    import gemm.measure.facts
    from gemm.store import calibration
    res = history(tmp_path)
    calibration.save(tmp_path / "calibration", "h200", {"gpu_name": "NVIDIA H200", "noise": [
        {"kernel": "05_2d_blocktiling", "size": "4096", "metric": "tflops", "sigma": 0.001,
         "dof": 20}]})
    for gpu, used in (("NVIDIA H200", True), ("NVIDIA H100 80GB HBM3", False)):
        monkeypatch.setattr(gemm.measure.facts, "gpu_name", lambda g=gpu: g)
        assert regress(res, "--json", str(tmp_path / "r.json")) == 0
        out = capsys.readouterr().out
        note = (f"gemm regress: minimum effects are the size classes' floors: "
                f"{tmp_path / 'calibration' / 'h200.json'} was made on a NVIDIA H200, this GPU "
                f"is a NVIDIA H100 80GB HBM3")
        assert (note in out) != used, out
        assert (json.loads((tmp_path / "r.json").read_text())["calibration"] is None) != used


# --- help, install --------------------------------------------------------------------------

def _options(parser, prefix=("gemm",)):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for c in a._choices_actions:
                yield prefix + (c.dest,), c.help
            for name, sub in a.choices.items():
                yield from _options(sub, prefix + (name,))
        elif not isinstance(a, argparse._HelpAction):
            yield prefix + (a.option_strings[0] if a.option_strings else a.dest,), a.help


def test_every_command_and_option_has_help():
    missing = [" ".join(where) for where, text in _options(cli.build_parser()) if not text]
    assert not missing, missing


def _bash(script: str, cwd: Path, python: str, **env):
    """bash -c script with python3 being `python` (not a virtual environment's), no VIRTUAL_ENV."""
    bindir = cwd / "fakebin"
    bindir.mkdir(exist_ok=True)
    (bindir / "python3").unlink(missing_ok=True)
    (bindir / "python3").symlink_to(python)
    base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True,
                          env={**base, "PATH": f"{bindir}{os.pathsep}/usr/bin:/bin", **env})


@pytest.fixture
def ci_copy(tmp_path):
    shutil.copytree(ROOT / "ci", tmp_path / "ci")
    return tmp_path


@pytest.mark.slow
def test_ci_scripts_make_and_use_a_venv_outside_one(ci_copy):
    base = getattr(sys, "_base_executable", sys.executable)   # this Python, not a venv's
    if subprocess.run([base, "-c", "import venv, ensurepip"]).returncode != 0:
        pytest.skip(f"{base} cannot make virtual environments")
    # a module this Python lacks, which the checkout's package brings (pip install -e .)
    (ci_copy / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "civenvprobe"\nversion = "0"\n[tool.setuptools]\n'
        'py-modules = ["civenvprobe"]\npackage-dir = {"" = "src"}\n')
    (ci_copy / "src").mkdir()
    (ci_copy / "src" / "civenvprobe.py").write_text("")
    script = ("set -euo pipefail; source ci/venv.sh; ci_python test json civenvprobe; "
              "python3 -c 'import sys; print(sys.prefix)'; source ci/lib.sh; "
              "python3 -c 'import sys; print(sys.prefix)'")
    assert "making one" not in _bash("source ci/venv.sh; ci_python test json", ci_copy,
                                     base).stdout   # everything imports: python3 as it is
    out = _bash(script, ci_copy, base)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert "making one in .venv" in lines[0] and "civenvprobe missing" in out.stdout
    assert lines[-2] == lines[-1] == str(ci_copy / ".venv")   # ci/lib.sh's scripts use it too
    again = _bash(script, ci_copy, base)                         # made once, used after
    assert again.returncode == 0 and "making one" not in again.stdout
    assert again.stdout.splitlines()[-1] == str(ci_copy / ".venv")


def test_ci_scripts_keep_a_virtual_environment_they_are_in(ci_copy):
    script = "set -euo pipefail; source ci/venv.sh; ci_python test json; echo ok"
    out = _bash(script, ci_copy, sys.executable, VIRTUAL_ENV=str(ci_copy / "somewhere"))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
    assert not (ci_copy / ".venv").exists()


def test_venv_is_ignored_by_git():
    out = subprocess.run(["git", "check-ignore", "-q", ".venv/bin/python3"], cwd=ROOT)
    assert out.returncode == 0


def test_a_results_directory_that_is_not_there_is_said_so(tmp_path, capsys):
    """gemm plot / regress with --results at nothing: one sentence naming what is missing
    (not 'name a --machine'), exit 2."""
    for cmd in (["plot"], ["regress"]):
        assert cli.main([*cmd, "--results", str(tmp_path / "nowhere")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "no results directory" in err[0], err
    (tmp_path / "empty").mkdir()
    assert cli.main(["regress", "--results", str(tmp_path / "empty")]) == 2
    assert "holds no machine's results yet" in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["--processes", "1"], "--processes must be 0 (the file's noise) or at least 2"),
    (["--shares", "0.01", "1.5"], "--shares must lie in (0, 1), got 1.5"),
    (["--trials", "-1"], "--trials must be 0 or more, got -1"),
])
def test_gemm_calibrate_names_the_one_setting_that_is_wrong(args, says):
    """Bad settings of gemm calibrate: the sentence names the one that is wrong, before any
    GPU is asked for."""
    one_sentence(run("calibrate", *args), says)
