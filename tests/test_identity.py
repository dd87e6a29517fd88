"""One asv machine identity per GPU model (gemm.record.machine): the committed history carries
one set of params per machine, the migration that made it so keeps every value and the host's
facts, and `gemm record` writes the same identity from now on."""
import json
from pathlib import Path

from gemm.record import machine, migrate, recorder
from gemm.store.history import load_runs
from tests.asvfake import write_benchmarks, write_run

ROOT = Path(__file__).resolve().parent.parent
K, S = ["05_2d"], ["1024", "4096"]


def test_the_committed_history_has_one_identity_per_machine():
    for mdir in (p for p in (ROOT / "results").iterdir() if p.is_dir()):
        ident = json.loads((mdir / "machine.json").read_text())
        assert set(ident) - {"version"} <= set(machine.IDENTITY)
        params = {json.dumps(json.loads(p.read_text())["params"], sort_keys=True)
                  for p in mdir.glob("*.json") if p.name != "machine.json"}
        assert len(params) == 1, params
        assert not set(machine.HOST) & set(json.loads(params.pop()))


def _hosts(res: Path, facts: list[dict]):
    write_benchmarks(res, K, S)
    for i, f in enumerate(facts):
        write_run(res, f"{i:02d}" * 20, 1000 + i, {(k, s): 10.0 + i for k in K for s in S}, K, S)
        p = next((res / "h200").glob(f"{i:02d}{i:02d}*.json"))
        d = json.loads(p.read_text())
        d["params"].update({"arch": "x86_64", "gpu": "NVIDIA H200", "gpu_arch": "sm_90", **f})
        p.write_text(json.dumps(d))
    (res / "h200" / "machine.json").write_text(json.dumps(
        {"machine": "h200", "arch": "x86_64", "gpu": "NVIDIA H200", "gpu_arch": "sm_90",
         "num_cpu": "32", "os": "Linux-b", "ram": "2", "version": 1}))


def test_unify_keeps_every_value_and_moves_the_host_facts(tmp_path):
    res = tmp_path / "results"
    facts = [{"num_cpu": "16", "os": "Linux-a", "ram": "1"},
             {"num_cpu": "32", "os": "Linux-b", "ram": "2"}]
    _hosts(res, facts)
    before, _ = load_runs(res, "h200")
    changed = migrate.unify(res)
    assert len(changed) == 3
    after, _ = load_runs(res, "h200")
    assert [(r.commit, r.points) for r in before] == [(r.commit, r.points) for r in after]
    files = sorted((res / "h200").glob("*-existing-py.json"))
    data = [json.loads(p.read_text()) for p in files]
    assert data[0]["params"] == data[1]["params"] == {
        "machine": "h200", "python": "3.12", "arch": "x86_64", "gpu": "NVIDIA H200",
        "gpu_arch": "sm_90"}
    assert [d[machine.HOST_KEY] for d in data] == facts
    assert json.loads((res / "h200" / "machine.json").read_text()) == {
        "machine": "h200", "arch": "x86_64", "gpu": "NVIDIA H200", "gpu_arch": "sm_90",
        "version": 1}
    assert migrate.unify(res) == []                      # idempotent
    assert migrate.main(["identity", str(res)]) == 0


def test_a_new_run_gets_the_identity_and_its_host_facts():
    data = {"params": {"machine": "h200", "gpu": "NVIDIA H200", "num_cpu": "64",
                       "os": "Linux-c", "python": "3.12"}}
    assert machine.unify_params(data, {"num_cpu": "64", "driver": "580"})
    assert data["params"] == {"machine": "h200", "gpu": "NVIDIA H200", "python": "3.12"}
    assert data[machine.HOST_KEY] == {"num_cpu": "64", "os": "Linux-c", "driver": "580"}
    fresh = {"params": {"machine": "h200", "python": "3.12"}}      # asv wrote the identity
    assert machine.unify_params(fresh, {"num_cpu": "8"})
    assert fresh[machine.HOST_KEY] == {"num_cpu": "8"}
    assert not machine.unify_params(fresh, {"num_cpu": "8"})        # once
    assert "host_facts" in recorder.__dict__                         # gemm record applies it


def test_write_machine_writes_only_the_identity(tmp_path, monkeypatch):
    import gemm.measure.facts
    monkeypatch.setattr(gemm.measure.facts, "machine_info", lambda name=None: {
        "machine": name or "h200", "arch": "x86_64", "os": "Linux-x", "cpu": "x86_64",
        "num_cpu": "16", "ram": "1", "gpu": "NVIDIA H200", "gpu_arch": "sm_90",
        "driver": "580", "cuda": "13.0"})
    path = tmp_path / "m.json"
    assert machine.write_machine(None, str(path)) == "h200"
    assert json.loads(path.read_text())["h200"] == {
        "machine": "h200", "arch": "x86_64", "gpu": "NVIDIA H200", "gpu_arch": "sm_90"}
    assert machine.host_facts()["num_cpu"] == "16"
