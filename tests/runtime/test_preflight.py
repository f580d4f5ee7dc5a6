from types import SimpleNamespace as NS

import msgspec
import pytest

from tutorrl.compiler.spec.structs import Spec
from tutorrl.errors import RefusedError
from tutorrl.runtime import preflight
from tutorrl.runtime.cluster import Resources, is_loopback, normalise_address

def _spec(train="data/t.parquet", val="data/v.parquet", model="Qwen/Qwen2.5-0.5B", nodes=1, gpn=2, rgpus=1,
          verl="0.9.1", **sections):
    """A real (parsed) spec; ``None`` leaves a field unset, so verl's default applies."""
    resources = {k: v for k, v in (("nodes", nodes), ("trainer_gpus_per_node", gpn), ("reward_gpus", rgpus))
                 if v is not None}
    return msgspec.convert({"experiment": {"verl": verl},
                            "data": {k: v for k, v in (("train", train), ("val", val)) if v is not None},
                            "model": {} if model is None else {"path": model},
                            "resources": resources, **sections}, Spec)


def test_paths_uris_home_and_hub_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "v.parquet").write_bytes(b"")
    f = preflight.PreflightReport()
    preflight.check_paths(_spec(train="hdfs://nn/x.parquet", val="~/v.parquet"), tmp_path, f)
    assert f.problems == []
    assert any("remote" in n for n in f.notes) and any("Hub id" in n for n in f.notes)


def test_missing_paths_are_all_reported(tmp_path):
    f = preflight.PreflightReport()
    preflight.check_paths(_spec(train=["data/a.parquet", "s3://b/c"], model="./models/tutor"), tmp_path, f)
    text = "\n".join(f.problems)
    assert "data.train: 'data/a.parquet'" in text and "data.val" in text and "model.path" in text
    assert len(f.problems) == 3 and any("s3://b/c" in n and "remote" in n for n in f.notes)
    with pytest.raises(RefusedError, match="nothing was submitted"):
        f.raise_if_any("local checks")


def test_missing_paths_are_notes_in_a_dry_run(tmp_path):
    f = preflight.PreflightReport()
    preflight.check_paths(_spec(train="data/a.parquet", model="./models/tutor"), tmp_path, f, dry_run=True)
    assert f.problems == []
    assert sum("a real run would be refused" in n for n in f.notes) == 3


def _res(gpus, cpus=2.0, nodes=1):
    per = [{"CPU": cpus, "GPU": gpus / nodes, "memory": 1e10}] * nodes
    return Resources(alive_nodes=nodes, total={"CPU": cpus * nodes, "GPU": gpus}, per_node=per)


def test_gpu_shortfall_is_refused_and_explained():
    f = preflight.PreflightReport()
    preflight.check_cluster(_spec(nodes=2, gpn=2, rgpus=1), {"entrypoint_num_cpus": 1}, _res(4),
                            dry_run=False, where="the cluster", findings=f)
    assert len(f.problems) == 1
    assert "needs 5 GPU" in f.problems[0] and "has 4 GPU" in f.problems[0]
    assert "resources.nodes 2 x trainer_gpus_per_node 2 + reward_gpus 1" in f.problems[0]


def test_unset_resources_count_as_verls_defaults():
    # Unset: verl's defaults for the target release (one node of 8 GPUs), read
    # from the release's lock; the message says they are defaults.
    assert preflight.gpu_layout(_spec(nodes=None, gpn=None, rgpus=None)) == (1, 8, 0)
    assert preflight.needed_gpus(_spec(nodes=2, gpn=None, rgpus=1)) == 17
    f = preflight.PreflightReport()
    preflight.check_cluster(_spec(nodes=None, gpn=None, rgpus=None), {"entrypoint_num_cpus": 1}, _res(4),
                            dry_run=False, where="the cluster", findings=f)
    (problem,) = f.problems
    assert "needs 8 GPU" in problem
    assert ("resources.nodes 1 (verl 0.9.1's default) x trainer_gpus_per_node 8 (verl 0.9.1's default) "
            "+ reward_gpus 0") in problem


def test_a_string_is_one_data_file_as_verl_reads_it(tmp_path):
    # The compiler hands a string to verl as one quoted string, which verl opens
    # as one file: a bracketed string is not a list (a TOML list is).
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.parquet").write_bytes(b"")
    f = preflight.PreflightReport()
    preflight.check_paths(_spec(train="[data/a.parquet]", val=None, model=None), tmp_path, f)
    assert [p.split(" does not")[0] for p in f.problems] == ["data.train: '[data/a.parquet]'"]


def test_a_release_this_tutorrl_does_not_map_still_gets_a_gpu_count():
    # A bundle compiled by another tutorrl for a release this one has no lock
    # for: the spec's own numbers count; unset ones are said to be unknown.
    spec = _spec(nodes=1, gpn=2, rgpus=1, verl="0.0.1")
    assert preflight.gpu_layout(spec) == (1, 2, 1)
    f = preflight.PreflightReport()
    preflight.check_cluster(_spec(nodes=None, gpn=None, rgpus=0, verl="0.0.1"), {"entrypoint_num_cpus": 1},
                            _res(1), dry_run=False, where="x", findings=f)
    (problem,) = f.problems
    assert "needs 8 GPU" in problem and "0.0.1" in problem


def test_dry_run_skips_gpus_and_says_so():
    f = preflight.PreflightReport()
    preflight.check_cluster(_spec(), {"entrypoint_num_cpus": 1, "entrypoint_num_gpus": 1}, _res(0),
                            dry_run=True, where="x", findings=f)
    assert f.problems == [] and any("GPU check skipped" in n for n in f.notes)


def test_entrypoint_must_fit_one_node():
    f = preflight.PreflightReport()
    preflight.check_cluster(_spec(gpn=1, rgpus=0), {"entrypoint_num_cpus": 4}, _res(2, cpus=2, nodes=2),
                            dry_run=False, where="x", findings=f)
    assert any("CPU=4" in p for p in f.problems)


def test_verl_mismatch(monkeypatch):
    monkeypatch.setattr(preflight, "installed_verl", lambda python=None: "0.9.1")
    f = preflight.PreflightReport()
    preflight.check_verl("0.8.0", f, "/py")
    assert "verl 0.9.1 is installed" in f.problems[0] and "0.8.0" in f.problems[0]


def test_the_job_pythons_verl_is_asked_of_that_environment(tmp_path):
    """TUTORRL_PYTHON may be another virtualenv: its verl is what launch.sh checks, not tutorrl's own.
    A virtualenv's python links to the base interpreter, so the folder, not the file, tells them apart."""
    import sys

    other = tmp_path / "other-env" / "bin"
    other.mkdir(parents=True)
    (other / "python").write_text("#!/bin/sh\necho 0.5.0\n")
    (other / "python").chmod(0o755)
    linked = tmp_path / "linked-env" / "bin"
    linked.mkdir(parents=True)
    (linked / "python").symlink_to(sys.executable)
    assert preflight.same_environment(sys.executable)
    assert not preflight.same_environment(str(linked / "python"))
    assert preflight.installed_verl(str(other / "python")) == "0.5.0"
    f = preflight.PreflightReport()
    preflight.check_verl("0.9.1", f, str(other / "python"))
    assert "verl 0.5.0 is installed for " + str(other / "python") in f.problems[0]


def test_an_embedded_head_for_another_environment_needs_its_ray(tmp_path):
    from tutorrl.runtime.head import EmbeddedHead

    env = tmp_path / "env" / "bin"
    env.mkdir(parents=True)
    (env / "python").write_text("#!/bin/sh\n")
    (env / "python").chmod(0o755)
    with pytest.raises(RefusedError, match="has no `ray` beside it"):
        EmbeddedHead(run_id="x", python=str(env / "python"))
    (env / "ray").write_text("#!/bin/sh\n")
    (env / "ray").chmod(0o755)
    head = EmbeddedHead(run_id="x", python=str(env / "python"))
    # The raylet -- and so every worker verl starts -- runs that environment's interpreter.
    assert head.ray == str(env / "ray")


def test_addresses():
    assert normalise_address("127.0.0.1:8265") == "http://127.0.0.1:8265"
    assert is_loopback("http://localhost:1") and is_loopback("http://[::1]:1")
    assert not is_loopback("http://head.example:8265")
    with pytest.raises(RefusedError):
        normalise_address("http://user:pw@head:8265")


def test_relative_paths_are_refused_for_a_real_run_on_an_existing_cluster():
    # The reward plug-in names the files its reward reads (here: the chess simulator's).
    spec = _spec(train=["data/a.parquet", "/abs/b.parquet"], val="hdfs://nn/v.parquet", model="Qwen/Qwen2.5-0.5B",
                 trainer={"output_dir": "checkpoints/x"},
                 reward={"plugin": "chess-simulator",
                         "options": {"table": "tables/r.json", "adapter": "/m/a", "heads_checkpoint": "~/h.pt",
                                     "heads_metrics": "../m.json"}})
    f = preflight.PreflightReport()
    preflight.check_relative_paths(spec, "http://head:8265", f)
    refused = sorted(p.split(":")[0] for p in f.problems)
    assert refused == ["data.train", "reward.options.heads_metrics", "reward.options.table", "trainer.output_dir"]
    assert all("do not run in this folder" in p for p in f.problems)
    # A reward file of the core spec (verl's custom_reward_function.path) is a path too.
    f = preflight.PreflightReport()
    preflight.check_relative_paths(_spec(train=None, val=None, model=None, reward={"path": "rewards/gsm8k.py"}),
                                   "http://head:8265", f)
    assert [p.split(":")[0] for p in f.problems] == ["reward.path"]


# -- roots: folders named by the job's environment ----------------------------

def _rooted(**roots):
    return _spec(train="$DATA_ROOT/t.parquet", val="/abs/v.parquet", model="$MODEL_ROOT/qwen",
                 trainer={"output_dir": "$DATA_ROOT/ckpt"}, roots=roots)


def test_roots_take_this_environment_else_the_default(tmp_path, monkeypatch):
    spec = _rooted(DATA_ROOT={"default": "data"}, MODEL_ROOT={})
    monkeypatch.delenv("DATA_ROOT", raising=False)
    monkeypatch.delenv("MODEL_ROOT", raising=False)
    f = preflight.PreflightReport()
    preflight.check_roots(spec, f)
    assert [p.split(":")[0] for p in f.problems] == ["roots.MODEL_ROOT"]
    assert "export MODEL_ROOT=" in f.problems[0]
    assert "root DATA_ROOT = 'data' (the spec's default)" in f.notes
    monkeypatch.setenv("MODEL_ROOT", str(tmp_path / "models"))
    assert preflight.root_values(spec) == {"MODEL_ROOT": str(tmp_path / "models")}  # defaults stay with launch.sh
    # Paths under a root are checked where the root points.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.parquet").write_bytes(b"")
    f = preflight.PreflightReport()
    preflight.check_paths(spec, tmp_path, f)
    text = "\n".join(f.problems)
    assert "data.train" not in text  # data/t.parquet exists under the cwd
    assert f"model.path ($MODEL_ROOT/qwen): '{tmp_path}/models/qwen' does not exist" in text  # never a Hub id


def test_on_a_cluster_a_root_must_be_absolute_and_paths_under_it_are_not_relative(monkeypatch):
    spec = _rooted(DATA_ROOT={"default": "data"}, MODEL_ROOT={"default": "/models"})
    monkeypatch.delenv("DATA_ROOT", raising=False)
    monkeypatch.delenv("MODEL_ROOT", raising=False)
    f = preflight.PreflightReport()
    preflight.check_roots(spec, f, cluster="http://head:8265")
    preflight.check_relative_paths(spec, "http://head:8265", f)
    assert [p.split(":")[0] for p in f.problems] == ["roots.DATA_ROOT"]
    assert "'data' (the spec's default) is relative" in f.problems[0]
    dry = preflight.PreflightReport()
    preflight.check_roots(spec, dry, cluster="http://head:8265", dry_run=True)
    assert dry.problems == []
    monkeypatch.setenv("DATA_ROOT", "/shared/data")
    f = preflight.PreflightReport()
    preflight.check_roots(spec, f, cluster="http://head:8265")
    assert f.problems == [] and "root DATA_ROOT = '/shared/data' (set here)" in f.notes


# -- the reward function, imported in the job's Python -------------------------

import os  # noqa: E402
import sys  # noqa: E402

REWARD = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n"


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


@pytest.fixture
def reward_pkg(tmp_path):
    """A real reward package in a folder of its own, not on any path."""
    pkg = tmp_path / "lib" / "myrewards"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "gsm8k.py").write_text(REWARD + "def score_helper():\n    pass\n")
    (pkg / "needs_dep.py").write_text("import tutorrl_no_such_dependency\n" + REWARD)
    (pkg / "broken.py").write_text("print('imported')\nraise RuntimeError('no GPU here')\n")
    (pkg / "constant.py").write_text("compute_score = 3\n")
    (tmp_path / "elsewhere").mkdir()
    return tmp_path / "lib"


def test_reward_importable_only_where_the_job_env_says(reward_pkg, tmp_path):
    py, cwd = sys.executable, tmp_path / "elsewhere"
    (missing,) = preflight.reward_import_problems(py, "myrewards.gsm8k", "compute_score", env=_env(), cwd=cwd)
    assert f"the job's Python ({py}) cannot import myrewards.gsm8k: no module named 'myrewards'" in missing
    assert "pip install" in missing and "PYTHONPATH" in missing and "py_modules" in missing
    assert preflight.reward_import_problems(py, "myrewards.gsm8k", "compute_score",
                                            env=_env(PYTHONPATH=str(reward_pkg)), cwd=cwd) == []
    # The folder the job starts in is on the path, as for `python -m verl...` and Ray's workers.
    assert preflight.reward_import_problems(py, "myrewards.gsm8k", "compute_score", env=_env(), cwd=reward_pkg) == []
    (sub,) = preflight.reward_import_problems(py, "myrewards.nope", "compute_score",
                                              env=_env(PYTHONPATH=str(reward_pkg)), cwd=cwd)
    assert "no module named 'myrewards.nope'" in sub


def test_reward_problems_say_what_is_missing(reward_pkg, tmp_path):
    def problems(module, function="compute_score"):
        return preflight.reward_import_problems(sys.executable, module, function,
                                                env=_env(PYTHONPATH=str(reward_pkg)), cwd=tmp_path / "elsewhere")

    (p,) = problems("myrewards.gsm8k", "compute_scor")
    assert "has no 'compute_scor' (did you mean 'compute_score'?)" in p and "gsm8k.py" in p
    (p,) = problems("myrewards.gsm8k", "zzz")
    assert "(it defines: compute_score, score_helper)" in p
    (p,) = problems("myrewards.needs_dep")
    assert "'tutorrl_no_such_dependency' is not installed for the job's Python" in p
    (p,) = problems("myrewards.broken")
    assert "raised RuntimeError: no GPU here at " in p and "broken.py:2" in p
    (p,) = problems("myrewards.constant")
    assert "myrewards.constant.compute_score is a int, not a function" in p
    (p,) = preflight.reward_import_problems(str(tmp_path / "no-python"), "m", "f")
    assert "does not exist" in p


def _reward_spec(module, function="compute_score"):
    return NS(reward=NS(module=module, function=function))


def test_check_reward_refuses_a_run_and_notes_a_dry_run(reward_pkg, tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("TUTORRL_PYTHON", raising=False)
    cwd = tmp_path / "elsewhere"
    job = {"runtime_env": {"env_vars": {}}}
    f = preflight.PreflightReport()
    preflight.check_reward(_reward_spec("myrewards.gsm8k"), job, f, cwd=cwd)
    assert len(f.problems) == 1 and "cannot import myrewards.gsm8k" in f.problems[0]
    with pytest.raises(RefusedError, match="nothing was submitted"):
        f.raise_if_any("local checks")
    f = preflight.PreflightReport()
    preflight.check_reward(_reward_spec("myrewards.gsm8k"), job, f, cwd=cwd, dry_run=True)
    assert f.problems == [] and "a real run would be refused" in f.notes[0]
    # The bundle's own environment (spec [env] set) reaches the job, so it counts.
    f = preflight.PreflightReport()
    preflight.check_reward(_reward_spec("myrewards.gsm8k"), {"runtime_env": {"env_vars": {"PYTHONPATH": str(reward_pkg)}}},
                           f, cwd=cwd)
    assert f.problems == [] and f.notes == []
    # verl's default reward: nothing to import. A cluster's Python is not ours to check.
    f = preflight.PreflightReport()
    preflight.check_reward(_reward_spec(None), job, f, cwd=cwd)
    preflight.check_reward(_reward_spec(""), job, f, cwd=cwd)
    assert f.problems == [] and f.notes == []
    preflight.check_reward(_reward_spec("myrewards.gsm8k"), job, f, cwd=cwd, cluster="http://head:8265")
    assert f.problems == [] and "not checked here" in f.notes[0]


def test_tutorrl_python_chooses_the_interpreter(reward_pkg, tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("TUTORRL_PYTHON", str(tmp_path / "missing-python"))
    f = preflight.PreflightReport()
    preflight.check_reward(_reward_spec("myrewards.gsm8k"), {}, f, cwd=reward_pkg)
    assert "missing-python does not exist" in f.problems[0]


def test_run_is_refused_before_ray_when_the_reward_is_not_importable(make_bundle, workdir):
    """Through the real CLI: refused, before any Ray head starts, from a folder
    where the bundle's reward module cannot be imported."""
    from runtime_helpers import run_tutorrl

    bundle = make_bundle()
    (workdir / "tutorrl_test_reward.py").unlink()
    proc = run_tutorrl(["run", str(bundle)], workdir)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "reward function tutorrl_test_reward.compute_score: the job's Python" in proc.stderr
    assert "cannot import tutorrl_test_reward: no module named 'tutorrl_test_reward'" in proc.stderr
    assert "refused by preflight (local checks); nothing was submitted." in proc.stderr
    assert not (bundle / "runs").exists()


@pytest.mark.parametrize("length", [5000, 100_000])
def test_a_root_longer_than_any_path_is_a_problem_not_an_oserror(tmp_path, monkeypatch, length):
    spec = _rooted(DATA_ROOT={"default": "data"}, MODEL_ROOT={"default": "/models"})
    monkeypatch.setenv("DATA_ROOT", "/" + "d" * (length - 1))
    f = preflight.PreflightReport()
    preflight.check_roots(spec, f)
    preflight.check_paths(spec, tmp_path, f)
    text = "\n".join(f.problems)
    assert f"roots.DATA_ROOT: the value (set here) is {length} characters" in text
    assert "data.train ($DATA_ROOT/t.parquet):" in text and "cannot be checked (File name too long)" in text
    assert len(text) < 2000  # the value is named, not printed whole


def _split(entry="one_step_off", gpn=1, overrides=(), verl="0.9.1"):
    """A spec of a split-pool entry point; ``overrides`` are its [verl] extra_overrides."""
    return msgspec.convert({"experiment": {"verl": verl, "entry": entry}, "model": {"path": "m"},
                            "resources": {"nodes": 1, "trainer_gpus_per_node": gpn, "reward_gpus": 0},
                            "verl": {"extra_overrides": list(overrides)}}, Spec)


def test_a_split_pool_entry_counts_the_rollouts_gpus_from_its_overrides():
    spec = _split(overrides=["rollout.nnodes=1", "rollout.n_gpus_per_node=3"])
    assert preflight.needed_gpus(spec) == 1 + 3
    f = preflight.PreflightReport()
    preflight.check_cluster(spec, {"entrypoint_num_cpus": 1}, _res(3), dry_run=False, where="the cluster",
                            findings=f)
    (problem,) = f.problems
    assert "needs 4 GPU" in problem and "has 3 GPU" in problem
    assert ("trainer pool resources.nodes 1 x trainer_gpus_per_node 1 + rollout pool rollout.nnodes 1 x "
            "rollout.n_gpus_per_node 3 + reward_gpus 0") in problem
    f = preflight.PreflightReport()
    preflight.check_cluster(spec, {"entrypoint_num_cpus": 1}, _res(4), dry_run=False, where="x", findings=f)
    assert f.problems == []


@pytest.mark.parametrize("entry", ["fully_async", "one_step_off",
                                   "verl.experimental.one_step_off_policy.main_ppo"])
def test_an_unset_rollout_pool_is_the_entrys_own_default(entry):
    # fully_async's and one_step_off's yaml: rollout.nnodes 1 x rollout.n_gpus_per_node 8.
    spec = _split(entry=entry, gpn=2)
    assert preflight.needed_gpus(spec) == 2 + 8
    f = preflight.PreflightReport()
    preflight.check_cluster(spec, {"entrypoint_num_cpus": 1}, _res(8), dry_run=False, where="x", findings=f)
    (problem,) = f.problems
    assert "rollout.n_gpus_per_node 8 (" in problem and "default at verl 0.9.1" in problem


def test_the_rollout_pool_takes_the_last_override_and_its_own_nodes():
    spec = _split(overrides=["rollout.nnodes=1", "+rollout.nnodes=2", "rollout.n_gpus_per_node=1"])
    assert preflight.needed_gpus(spec) == 1 + 2
    assert preflight.needed_nodes(spec) == 2
    f = preflight.PreflightReport()
    preflight.check_cluster(spec, {"entrypoint_num_cpus": 1}, _res(4, nodes=1), dry_run=False, where="x",
                            findings=f)
    assert f.problems == ["the spec needs 2 nodes, but x has 1 ALIVE node(s)"]


def test_a_rollout_pool_tutorrl_cannot_count_is_refused_naming_the_key():
    spec = _split(overrides=["rollout.nnodes=${oc.env:NODES}", "rollout.n_gpus_per_node=1"])
    with pytest.raises(RefusedError, match=r"rollout\.nnodes.*extra_overrides as rollout\.nnodes=N"):
        preflight.needed_gpus(spec)


def test_main_ppo_and_a_hybrid_recipe_have_no_rollout_pool():
    # main_ppo's rollout shares the trainer's GPUs (no top-level rollout section);
    # an override naming the keys does not conjure a pool it never builds.
    from tutorrl.compiler.pipeline import gpu_pool

    assert not gpu_pool(_spec()).split
    assert preflight.needed_gpus(_spec(nodes=1, gpn=2, rgpus=0)) == 2
    dapo = _split(entry="dapo", gpn=2, verl="0.9.0", overrides=["rollout.n_gpus_per_node=4"])
    assert not gpu_pool(dapo).split and gpu_pool(dapo).total == 2


def test_the_one_step_off_cpu_spec_fits_two_gpus():
    # specs/tiny_cpu_one_step_off.toml runs under `tutorrl run --num-gpus 2`: 1 trainer + 1 rollout.
    from pathlib import Path

    from tutorrl.compiler.spec import parse_spec

    path = Path(__file__).resolve().parents[2] / "specs" / "tiny_cpu_one_step_off.toml"
    spec, _ = parse_spec(path.read_bytes(), str(path))
    assert preflight.needed_gpus(spec) == 2
    f = preflight.PreflightReport()
    preflight.check_cluster(spec, {"entrypoint_num_cpus": 1}, _res(2), dry_run=False, where="x", findings=f)
    assert f.problems == []
    f = preflight.PreflightReport()
    preflight.check_cluster(spec, {"entrypoint_num_cpus": 1}, _res(1), dry_run=False, where="x", findings=f)
    assert "rollout pool" in f.problems[0]
