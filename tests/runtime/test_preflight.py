from types import SimpleNamespace as NS

import pytest

from tutorrl.errors import RefusedError
from tutorrl.runtime import preflight
from tutorrl.runtime.cluster import Resources, is_loopback, normalise_address


def _spec(train="data/t.parquet", val="data/v.parquet", model="Qwen/Qwen2.5-0.5B", nodes=1, gpn=2, reward=1):
    return NS(data=NS(train=train, val=val), model=NS(path=model),
              resources=NS(nodes=nodes, trainer_gpus_per_node=gpn, reward_gpus=reward))


def test_paths_uris_home_and_hub_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "v.parquet").write_bytes(b"")
    f = preflight.Findings()
    preflight.check_paths(_spec(train="hdfs://nn/x.parquet", val="~/v.parquet"), tmp_path, f)
    assert f.problems == []
    assert any("remote" in n for n in f.notes) and any("Hub id" in n for n in f.notes)


def test_missing_paths_are_all_reported(tmp_path):
    f = preflight.Findings()
    preflight.check_paths(_spec(train="[data/a.parquet, s3://b/c]", model="./models/tutor"), tmp_path, f)
    text = "\n".join(f.problems)
    assert "data.train: 'data/a.parquet'" in text and "data.val" in text and "model.path" in text
    with pytest.raises(RefusedError, match="nothing was submitted"):
        f.raise_if_any("local checks")


def test_missing_paths_are_notes_in_a_dry_run(tmp_path):
    f = preflight.Findings()
    preflight.check_paths(_spec(train="data/a.parquet", model="./models/tutor"), tmp_path, f, dry_run=True)
    assert f.problems == []
    assert sum("a real run would be refused" in n for n in f.notes) == 3


def _res(gpus, cpus=2.0, nodes=1):
    per = [{"CPU": cpus, "GPU": gpus / nodes, "memory": 1e10}] * nodes
    return Resources(alive_nodes=nodes, total={"CPU": cpus * nodes, "GPU": gpus}, per_node=per)


def test_gpu_shortfall_is_refused_and_explained():
    f = preflight.Findings()
    preflight.check_cluster(_spec(nodes=2, gpn=2, reward=1), {"entrypoint_num_cpus": 1}, _res(4),
                            dry_run=False, where="the cluster", findings=f)
    assert len(f.problems) == 1
    assert "needs 5 GPU" in f.problems[0] and "has 4 GPU" in f.problems[0]


def test_dry_run_skips_gpus_and_says_so():
    f = preflight.Findings()
    preflight.check_cluster(_spec(), {"entrypoint_num_cpus": 1, "entrypoint_num_gpus": 1}, _res(0),
                            dry_run=True, where="x", findings=f)
    assert f.problems == [] and any("GPU check skipped" in n for n in f.notes)


def test_entrypoint_must_fit_one_node():
    f = preflight.Findings()
    preflight.check_cluster(_spec(gpn=1, reward=0), {"entrypoint_num_cpus": 4}, _res(2, cpus=2, nodes=2),
                            dry_run=False, where="x", findings=f)
    assert any("CPU=4" in p for p in f.problems)


def test_verl_mismatch(monkeypatch):
    monkeypatch.setattr(preflight, "installed_verl", lambda: "0.9.1")
    f = preflight.Findings()
    preflight.check_verl("0.8.0", f, "/py")
    assert "verl 0.9.1 is installed" in f.problems[0] and "0.8.0" in f.problems[0]


def test_addresses():
    assert normalise_address("127.0.0.1:8265") == "http://127.0.0.1:8265"
    assert is_loopback("http://localhost:1") and is_loopback("http://[::1]:1")
    assert not is_loopback("http://head.example:8265")
    with pytest.raises(RefusedError):
        normalise_address("http://user:pw@head:8265")


def test_relative_paths_are_refused_for_a_real_run_on_an_existing_cluster():
    spec = NS(data=NS(train="[data/a.parquet, /abs/b.parquet]", val="hdfs://nn/v.parquet"),
              model=NS(path="Qwen/Qwen2.5-0.5B"), trainer=NS(output_dir="checkpoints/x"),
              reward=NS(table="tables/r.json", simulator=NS(adapter="/m/a", heads_checkpoint="~/h.pt",
                                                             heads_metrics="../m.json")))
    f = preflight.Findings()
    preflight.check_relative_paths(spec, "http://head:8265", f)
    refused = sorted(p.split(":")[0] for p in f.problems)
    assert refused == ["data.train", "reward.simulator.heads_metrics", "reward.table", "trainer.output_dir"]
    assert all("do not run in this folder" in p for p in f.problems)
