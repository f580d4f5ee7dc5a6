"""Issue 20: `tutorrl import` is exact on launches written like verl's own examples.

Each test is a small script in the shape verl's examples have, for one cause
the corpus measured: a relative --config-path, a variable nobody set, folders
of the importing machine, settings the release declares and never reads, the
release chosen, several launches in one script, and clock reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import support

# `tutorrl import` proves each launch by composing it with the release's trainer config, from its wheel.
pytestmark = pytest.mark.wheels

FAKE_HOME = "/home/user"
HEAD = "#!/usr/bin/env bash\nset -x\n"
LAUNCH = "python3 -m verl.trainer.main_ppo \\\n"
COMMON = """    algorithm.adv_estimator=grpo \\
    data.train_batch_size=256 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \\
    actor_rollout_ref.rollout.n=4 \\
    trainer.n_gpus_per_node=8 \\
    trainer.logger=['console'] \\
"""


def _script(tmp_path: Path, body: str, name: str = "run_qwen.sh") -> Path:
    folder = tmp_path / "examples"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(HEAD + body)
    return path


def _import(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": FAKE_HOME}
    return subprocess.run([sys.executable, "-m", "tutorrl", "import", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, check=False)


def _json(proc):
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("config_path", ["config", "./config", "config/"])
def test_relative_config_path_is_verls_own_config_folder(config_path, tmp_path):
    # Hydra takes it relative to verl/trainer/main_ppo.py: verl's own configs, not the script's folder.
    script = _script(tmp_path, LAUNCH + f"    --config-path {config_path} \\\n    --config-name ppo_trainer \\\n"
                     + COMMON + "    trainer.total_epochs=2\n")
    out = tmp_path / "spec.toml"
    proc = _import(str(script), "--verl", "0.9.1", "-o", str(out), "--format", "json", cwd=tmp_path)
    report = _json(proc)
    assert report["exact"] is True and proc.returncode == 0, report["not_checked"]
    spec = tomllib.loads(out.read_text())
    assert "config_path" not in spec["experiment"]


def test_unset_variable_is_a_value_the_round_trip_proves(tmp_path):
    script = _script(tmp_path, LAUNCH + COMMON + "    actor_rollout_ref.model.path=$MODEL_PATH \\\n"
                     "    trainer.nnodes=$NNODES \\\n    trainer.total_epochs=2\n")
    out = tmp_path / "spec.toml"
    proc = _import(str(script), "--verl", "0.9.1", "-o", str(out), "--format", "json", cwd=tmp_path)
    report = _json(proc)
    assert report["placeholders"] == ["MODEL_PATH", "NNODES"]
    assert report["exact"] is True and proc.returncode == 0, report["not_checked"]
    assert any("__UNSET_MODEL_PATH__ = UNSET_MODEL_PATH" in n for n in report["notes"])
    # The spec keeps the placeholders, and the compiler refuses them until they are filled.
    assert '"__UNSET_MODEL_PATH__"' in out.read_text()
    compiled = support.cli("compile", str(out), "--out", str(tmp_path / "b"))
    assert compiled.returncode == 2 and "placeholder for the shell variable MODEL_PATH" in compiled.stderr


def test_home_and_script_folder_become_roots(tmp_path):
    script = _script(tmp_path, "DATA=$HOME/data/gsm8k\nHERE=$(pwd)\n" + LAUNCH + COMMON
                     + "    data.train_files=$DATA/train.parquet \\\n    data.val_files=$HERE/test.parquet \\\n"
                     "    actor_rollout_ref.model.path=$HOME/models/Qwen2.5-0.5B \\\n    trainer.total_epochs=2\n")
    out = tmp_path / "spec.toml"
    proc = _import(str(script), "--verl", "0.9.1", "-o", str(out), "--format", "json", cwd=tmp_path)
    report = _json(proc)
    assert report["exact"] is True, report
    spec = tomllib.loads(out.read_text())
    assert spec["data"]["train"] == "$HOME_DATA/gsm8k/train.parquet"
    assert spec["data"]["val"] == "$SCRIPT_DIR/test.parquet"
    assert spec["model"]["path"] == "$HOME_MODELS/Qwen2.5-0.5B"
    assert spec["roots"] == {"HOME_DATA": {"default": f"{FAKE_HOME}/data"},
                             "HOME_MODELS": {"default": f"{FAKE_HOME}/models"},
                             "SCRIPT_DIR": {"default": str(script.parent)}}
    # Written as a spec author writes roots, and a spec like any other: it compiles.
    assert 'HOME_DATA = { default = "/home/user/data" }' in out.read_text()
    assert support.cli("compile", str(out), "--out", str(tmp_path / "b")).returncode == 0


def test_a_setting_the_release_never_reads_is_kept_as_written_and_said(tmp_path):
    # A 0.4-era script imported at 0.9.1: verl declares custom_reward_function and never reads it.
    # The spec keeps both keys in [verl] unread_overrides: the launch is the script's (exact), and
    # the report says verl 0.9.1 runs without them and offers the setting it reads.
    script = _script(tmp_path, LAUNCH + COMMON + "    custom_reward_function.path=./reward.py \\\n"
                     "    custom_reward_function.name=compute_score \\\n    trainer.total_epochs=2\n")
    proc = _import(str(script), "--verl", "0.9.1", "--format", "json", "-o", str(tmp_path / "s.toml"), cwd=tmp_path)
    report = _json(proc)
    assert report["exact"] is True and report["differences"] == [] and proc.returncode == 0
    assert {m["override"].split("=")[0] for m in report["mapped"] if m["how"] == "unread"} == {
        "custom_reward_function.path", "custom_reward_function.name"}
    assert any("never reads custom_reward_function.name, custom_reward_function.path: the launch as written "
               "runs with them ignored" in n for n in report["notes"])
    assert any(w.startswith("verl.unread_overrides: verl 0.9.1 never reads the 2 overrides") for w in report["warnings"])
    spec = (tmp_path / "s.toml").read_text()
    assert "unread_overrides = [" in spec and "#   [reward] path = \"./reward.py\"" in spec


def test_default_release_is_the_newest_that_reads_every_key(tmp_path):
    script = _script(tmp_path, LAUNCH + COMMON + "    custom_reward_function.path=./reward.py \\\n"
                     "    trainer.total_epochs=2\n")
    proc = _import(str(script), "--format", "json", cwd=tmp_path)
    report = _json(proc)
    assert report["release"] == "0.8.0", report["release_reason"]
    assert "are read in" in report["release_reason"]
    assert "verl 0.9.1 declares and never reads custom_reward_function.path" in report["release_reason"]
    assert report["exact"] is True


def test_several_launches_each_become_a_spec(tmp_path):
    script = _script(tmp_path, "for stage in 1 2; do\n  " + LAUNCH + COMMON
                     + "    data.max_response_length=$((stage * 1024)) \\\n"
                     "    trainer.experiment_name=curriculum_stage$stage\ndone\n", name="curriculum.sh")
    out = tmp_path / "specs"
    proc = _import(str(script), "--verl", "0.9.1", "-o", f"{out}/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["curriculum-1-experiment_name_curriculum_stage1.toml",
                     "curriculum-2-experiment_name_curriculum_stage2.toml"]
    second = tomllib.loads((out / names[1]).read_text())
    assert second["data"]["max_response_length"] == 2048
    assert proc.stdout.count("round trip: exact") == 2


def test_clock_reads_are_frozen_and_reported(tmp_path):
    script = _script(tmp_path, "NOW=$(date +%Y%m%d)\n" + LAUNCH + COMMON
                     + "    trainer.experiment_name=grpo_$NOW \\\n    trainer.total_epochs=2\n")
    proc = _import(str(script), "--verl", "0.9.1", "--format", "json", cwd=tmp_path)
    report = _json(proc)
    assert report["exact"] is True
    assert report["clock"] == ["date +%Y%m%d: the script read the clock; it was frozen at 2000-01-01 00:00:00 UTC "
                               "('20000101'), which went into trainer.experiment_name=grpo_20000101"]
    assert not any(c.startswith("date") for c in report["other_commands"])


def test_a_key_the_spec_field_writes_is_accepted_in_extra_overrides(tmp_path):
    # reward.manager_kwargs writes '+reward.reward_kwargs.<entry>': verl reads that dict whole, so the very same
    # key written raw is accepted (a warning names the field), never "verl would never read it".
    spec = tmp_path / "s.toml"
    spec.write_text('[experiment]\nverl = "0.9.1"\nname = "x"\n[trainer]\nloggers = ["console"]\n'
                    '[verl]\nextra_overrides = ["+reward.reward_kwargs.overlong_buffer_cfg.len=4096"]\n')
    proc = support.cli("compile", str(spec), "--out", str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr
    assert "never read" not in proc.stderr
    assert "has a home in the spec: reward.manager_kwargs.overlong_buffer_cfg.len" in proc.stderr


def test_default_release_is_one_where_the_launch_as_written_composes(tmp_path):
    # '+trainer.val_before_train' appends a key verl 0.3.0.post1 lacks; later releases declare it, and Hydra
    # refuses the '+' there ("An item is already at"): the script composes only up to 0.3.0.post1.
    script = _script(tmp_path, LAUNCH + COMMON + "    +trainer.val_before_train=False \\\n    trainer.total_epochs=2\n")
    proc = _import(str(script), "--format", "json", cwd=tmp_path)
    report = _json(proc)
    assert report["release"] == "0.3.0.post1", report["release_reason"]
    assert "where the launch as written composes" in report["release_reason"]
    assert report["exact"] is True, report["not_checked"]


def test_a_folder_the_environment_may_replace_becomes_a_root(tmp_path):
    # ${NAME:-/folder}: the author let the environment choose the folder; the spec names it by a root.
    script = _script(tmp_path, "MODEL=${MODEL_PATH:-/opt/models/Qwen2.5-0.5B}\n"
                     "data_dir=${data_dir:-/mnt/shared/data}\nCKPT=${CKPT:-./ckpt}\n"
                     "LIB=${PYTHONPATH:-/opt/lib}\n" + LAUNCH + COMMON
                     + "    actor_rollout_ref.model.path=$MODEL \\\n"
                     "    data.train_files=\"['$data_dir/gsm8k/train.parquet','/mnt/shared/data/more.parquet']\" \\\n"
                     "    data.val_files=$LIB/test.parquet \\\n"
                     "    trainer.default_local_dir=$CKPT \\\n    trainer.total_epochs=2\n")
    out = tmp_path / "spec.toml"
    proc = _import(str(script), "--verl", "0.9.1", "-o", str(out), "--format", "json", cwd=tmp_path)
    report = _json(proc)
    assert report["exact"] is True, report
    spec = tomllib.loads(out.read_text())
    assert spec["model"]["path"] == "$MODEL_PATH"
    # The same folder written out is the same place: it is named by the root too.
    assert spec["data"]["train"] == ["$data_dir/gsm8k/train.parquet", "$data_dir/more.parquet"]
    # A name that takes the launch over cannot name a folder: its value stays literal.
    assert spec["data"]["val"] == "/opt/lib/test.parquet"
    assert spec["roots"]["MODEL_PATH"] == {"default": "/opt/models/Qwen2.5-0.5B"}
    assert spec["roots"]["data_dir"] == {"default": "/mnt/shared/data"}
    assert "CKPT" not in spec["roots"]  # a relative default is where the job runs, not this machine's
    assert "PYTHONPATH" not in spec["roots"]
    assert report["roots"]["MODEL_PATH"] == "/opt/models/Qwen2.5-0.5B"
    assert support.cli("compile", str(out), "--out", str(tmp_path / "b")).returncode == 0
