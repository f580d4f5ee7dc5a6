"""Fixtures for the runtime tests: real bundles (compiled, then optionally
given a stand-in launch.sh and re-sealed so they verify), a separately started
Ray head on loopback, and helpers to run the real `tutorrl` command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import support
from runtime_helpers import clean_env

SPEC = """\
[experiment]
name = "runtime-test"
verl = "{verl}"
project = "tutorrl-tests"

[data]
train = {train}
val = {val}
train_batch_size = 8

[model]
path = "Qwen/Qwen2.5-0.5B-Instruct"

[actor]
ppo_mini_batch_size = 8
ppo_micro_batch_size_per_gpu = 1

[rollout]
engine = "vllm"
n = 2
# One GPU per engine: verl's default tensor-parallel size (2) divides no odd GPU count.
tensor_parallel = 1

[trainer]
total_steps = 1
output_dir = {output_dir}
loggers = {loggers}

[resources]
nodes = {nodes}
trainer_gpus_per_node = {gpus}
reward_gpus = 0

[reward]
module = "tutorrl_test_reward"
function = "compute_score"

[env]
set = {{ {env} }}
passthrough = [{passthrough}]
"""


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


@pytest.fixture
def make_bundle(tmp_path):
    """make_bundle(launch=None, env=None, passthrough=(), gpus=1, verl="0.9.1", spec_target=None, nodes=1, extra="") -> bundle path.

    ``launch`` replaces launch.sh (then re-sealed); None keeps the compiled one."""
    from tutorrl.compiler import compile_spec, write_bundle
    from tutorrl.compiler.bundle.manifest import reseal

    counter = [0]

    def make(launch: str | None = None, env: dict[str, str] | None = None, passthrough=(), gpus: int = 1,
             verl: str = "0.9.1", spec_target: str | None = None, train: str = "data/train.parquet",
             val: str = "data/val.parquet", output_dir: str = "out", loggers=("console",), nodes: int = 1,
             extra: str = "") -> Path:
        counter[0] += 1
        spec = tmp_path / f"spec{counter[0]}.toml"
        spec.write_text(SPEC.format(
            verl=verl, gpus=gpus, nodes=nodes, train=_toml_str(train), loggers=json.dumps(list(loggers)), val=_toml_str(val), output_dir=_toml_str(output_dir),
            env=", ".join(f"{k} = {_toml_str(v)}" for k, v in (env or {}).items()),
            passthrough=", ".join(_toml_str(p) for p in passthrough),
        ) + extra)
        compiled = compile_spec(spec)
        replaced: dict[str, bytes] = {}
        if launch is not None:
            # A stand-in launch.sh, sealed with the compiler's own reseal (test hook).
            replaced["launch_sh"] = launch.encode()
        if spec_target is not None:
            # Only verl 0.9.1 compiles here; a bundle for another release is
            # made by editing the normalised spec and re-sealing (test hook).
            text = compiled.files["spec.toml"].decode()
            replaced["spec_toml"] = text.replace(f'verl = "{verl}"', f'verl = "{spec_target}"', 1).encode()
            assert replaced["spec_toml"].decode() != text
        return write_bundle(reseal(compiled, **replaced), tmp_path / "bundles").path

    return make


REWARD_MODULE = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.0\n"


@pytest.fixture
def workdir(tmp_path):
    """A cwd where the test spec's relative data paths exist, and its reward
    module (`tutorrl_test_reward`, imported from the folder the job starts in)."""
    (tmp_path / "data").mkdir(exist_ok=True)
    for name in ("train.parquet", "val.parquet"):
        (tmp_path / "data" / name).write_bytes(b"")
    (tmp_path / "tutorrl_test_reward.py").write_text(REWARD_MODULE)
    return tmp_path


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory, monkeypatch):
    """The index of runs (``$XDG_STATE_HOME/tutorrl/runs``) of this test, not the user's: tests
    compile the same bundle in many folders, which would make run ids ambiguous across tests."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(scope="session")
def ray_cluster():
    """A Ray head started apart from tutorrl (plain `ray start`, token auth, loopback
    dashboard; support.RayNodes) playing an existing cluster. Its environment does not carry
    anything tutorrl would set on an embedded head, only what runtime_helpers.clean_env gives
    the run tests' own processes."""
    extra = {k: v for k, v in clean_env().items() if k.startswith("TUTORRL_")}
    nodes = support.RayNodes(str(Path(sys.executable).parent / "ray"), "TUTORRL_TEST_RAY_CLUSTER", env=extra)
    try:
        nodes.start_head("--num-gpus=0")
        yield {"url": nodes.url, "token": nodes.token}
    finally:
        nodes.stop()
