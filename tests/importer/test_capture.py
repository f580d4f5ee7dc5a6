"""The launch capture runs real bash on real files, confined by the jail.

Every script here is written for these tests.
"""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from tutorrl.importer._confine import landlock_abi
from tutorrl.importer.capture import (Capture, CaptureError, capture, parse_python, split_hydra_args)



def test_the_jail_is_available_on_this_machine():
    # capture() refuses to run a script unconfined; every test below needs the jail.
    assert landlock_abi() >= 1, "the capture's jail needs Landlock (Linux >= 5.13)"

PPO = "python3 -m verl.trainer.main_ppo"


def run(tmp_path: Path, body: str, name: str = "run.sh", **kw) -> Capture:
    script = tmp_path / name
    script.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body))
    kw.setdefault("timeout", 20)
    return capture(script, vars=kw.pop("vars", {}), verl_checkout=kw.pop("verl_checkout", None), **kw)


def only_launch(cap: Capture):
    assert len(cap.launches) == 1, (cap.launches, cap.stderr_tail)
    return cap.launches[0]


def test_line_continuations_and_config_name(tmp_path):
    cap = run(tmp_path, f"""\
        set -euo pipefail
        {PPO} --config-name='ppo_megatron_trainer' \\
            data.train_batch_size=256 \\
            'trainer.logger=["console","wandb"]' \\
            actor_rollout_ref.actor.optim.lr=1e-6 $@
        """)
    launch = only_launch(cap)
    assert launch.entry_kind == "module" and launch.entry == "verl.trainer.main_ppo"
    assert launch.config_name == "ppo_megatron_trainer" and launch.config_path is None
    assert launch.overrides == ["data.train_batch_size=256", 'trainer.logger=["console","wandb"]',
                                "actor_rollout_ref.actor.optim.lr=1e-6"]
    assert launch.cwd_rel == "." and launch.via == []
    assert cap.exit_code == 0 and cap.unset == {} and cap.confinement.not_confined == []


def test_broken_continuation_is_what_bash_does(tmp_path):
    # A comment after the backslash ends the command: bash launches with one override.
    cap = run(tmp_path, f"""\
        {PPO} \\
            data.train_batch_size=256 \\  # the batch
            trainer.nnodes=2
        """)
    assert only_launch(cap).overrides == ["data.train_batch_size=256", " "]
    assert [c.argv for c in cap.commands] == [["trainer.nnodes=2"]]


def test_arrays_defaults_substitution_arithmetic_branches(tmp_path):
    cap = run(tmp_path, f"""\
        set -eu
        GPUS=${{GPUS:-8}}
        NODES=${{NODES:=2}}
        MODEL=${{MODEL_PATH:-$HOME/models/qwen}}
        NAME=$(basename "$MODEL")-$(echo grpo | tr a-z A-Z)
        ARGS=(
          "data.train_files=['$HOME/a.parquet', '$HOME/b.parquet']"
          trainer.n_gpus_per_node=$GPUS
        )
        if [ "$GPUS" -ge 8 ]; then ARGS+=(actor_rollout_ref.rollout.tensor_model_parallel_size=$((GPUS / 4))); fi
        for k in param_offload optimizer_offload; do
          ARGS+=("actor_rollout_ref.actor.fsdp_config.$k=False")
        done
        {PPO} "${{ARGS[@]}}" trainer.nnodes=$NODES trainer.experiment_name="$NAME" \\
            trainer.total_training_steps=$(( (7473 + 255) / 256 ))
        """)
    launch = only_launch(cap)
    home = cap.home
    assert launch.overrides == [
        f"data.train_files=['{home}/a.parquet', '{home}/b.parquet']",
        "trainer.n_gpus_per_node=8",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "actor_rollout_ref.actor.fsdp_config.param_offload=False",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
        "trainer.nnodes=2",
        "trainer.experiment_name=qwen-GRPO",
        "trainer.total_training_steps=30",
    ]
    assert cap.unset == {}  # every variable read has a default


def test_unset_variable_is_reported_and_stands_in(tmp_path):
    cap = run(tmp_path, f"""\
        OUT=${{OUT_DIR:-/tmp/out}}
        {PPO} actor_rollout_ref.model.path=$MODEL_PATH trainer.nnodes=$SLURM_JOB_NUM_NODES \\
            trainer.default_local_dir=$OUT
        """)
    launch = only_launch(cap)
    assert cap.unset == {"MODEL_PATH": "__UNSET_MODEL_PATH__",
                         "SLURM_JOB_NUM_NODES": "__UNSET_SLURM_JOB_NUM_NODES__"}
    assert launch.overrides == ["actor_rollout_ref.model.path=__UNSET_MODEL_PATH__",
                                "trainer.nnodes=__UNSET_SLURM_JOB_NUM_NODES__",
                                "trainer.default_local_dir=/tmp/out"]
    assert cap.rounds == 3 and launch.env == {}  # placeholders are inputs, not the script's environment


def test_given_vars_are_used(tmp_path):
    cap = run(tmp_path, f"""\
        export VLLM_USE_V1=1
        {PPO} actor_rollout_ref.model.path=$MODEL_PATH trainer.nnodes=${{NNODES:-1}}
        """, vars={"MODEL_PATH": "/models/q", "NNODES": "4"})
    launch = only_launch(cap)
    assert launch.overrides == ["actor_rollout_ref.model.path=/models/q", "trainer.nnodes=4"]
    assert cap.unset == {} and cap.vars == {"MODEL_PATH": "/models/q", "NNODES": "4"}
    assert launch.env == {"VLLM_USE_V1": "1"}


def test_positional_parameter_read_under_set_u(tmp_path):
    cap = run(tmp_path, f"""\
        {PPO} trainer.experiment_name=$1
        """)
    assert cap.unset == {"1": "__UNSET_ARG1__"}
    assert only_launch(cap).overrides == ["trainer.experiment_name=__UNSET_ARG1__"]
    cap = run(tmp_path, f"{PPO} trainer.experiment_name=$1\n", args=["given"])
    assert cap.unset == {} and only_launch(cap).overrides == ["trainer.experiment_name=given"]


def test_ray_job_submit_wrapper(tmp_path):
    cap = run(tmp_path, f"""\
        ray stop --force
        ray start --head --num-gpus 8
        ray job submit --address="http://127.0.0.1:8265" \\
            --runtime-env-json='{{"env_vars": {{"TOKENIZERS_PARALLELISM": "true"}}}}' \\
            -- {PPO} trainer.nnodes=1 algorithm.adv_estimator=grpo
        """)
    launch = only_launch(cap)
    assert launch.via[:3] == ["ray", "job", "submit"] and launch.via[-1] == "--"
    assert launch.overrides == ["trainer.nnodes=1", "algorithm.adv_estimator=grpo"]
    assert [c.argv[:2] for c in cap.commands] == [["ray", "stop"], ["ray", "start"]]


def test_srun_wrapper_and_script_entry(tmp_path):
    cap = run(tmp_path, """\
        srun --overlap --nodes=2 --ntasks=1 -w "$(hostname)" python3 -u verl/trainer/main_ppo.py trainer.nnodes=2
        """)
    launch = only_launch(cap)
    assert launch.entry_kind == "script" and launch.entry == "verl/trainer/main_ppo.py"
    assert launch.interpreter_options == ["-u"] and launch.via[0] == "srun"
    assert launch.overrides == ["trainer.nnodes=2"]
    assert [c.argv for c in cap.commands] == [["hostname"]]


def test_two_launches_and_other_python_calls(tmp_path):
    cap = run(tmp_path, f"""\
        python3 -m pip install -e .
        python -c "import verl; print(verl.__version__)"
        for seed in 1 2; do
          {PPO} data.seed=$seed
        done
        """)
    assert [l.overrides for l in cap.launches] == [["data.seed=1"], ["data.seed=2"]]
    assert [c.argv[:3] for c in cap.commands] == [["python3", "-m", "pip"], ["python", "-c", "import verl; print(verl.__version__)"]]


def test_no_launch(tmp_path):
    cap = run(tmp_path, """\
        python3 -m verl.trainer.fsdp_sft_trainer data.train_batch_size=8
        huggingface-cli download Qwen/Qwen2.5-0.5B
        """)
    assert cap.launches == []
    assert [c.argv[0] for c in cap.commands] == ["python3", "huggingface-cli"]


def test_writes_outside_the_sandbox_do_not_escape(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("untouched")
    cap = run(tmp_path / "outside", f"""\
        echo owned > {victim} || true
        echo new > {outside}/new.txt || true
        rm -f {victim}
        cp /bin/sh {outside}/sh
        /usr/bin/touch {outside}/touched || true
        /bin/sh -c 'echo x > {outside}/via-sh' || true
        awk 'BEGIN {{ print "x" > "{outside}/via-awk" }}' || true
        sed -n 'w {outside}/via-sed' /dev/null || true
        echo inside > "$HOME/fine.txt" && cat "$HOME/fine.txt"
        {PPO} trainer.nnodes=1
        """, name="evil.sh")
    assert victim.read_text() == "untouched"
    assert sorted(p.name for p in outside.iterdir()) == ["evil.sh", "victim.txt"]
    assert str(victim) in cap.denied and "/usr/bin/touch" in cap.denied
    assert cap.stdout_tail == "inside"
    assert [c.argv[0] for c in cap.commands] == ["rm", "cp"]
    assert len(cap.launches) == 1


def test_script_folder_is_copied_and_sourced(tmp_path):
    (tmp_path / "common.sh").write_text("MODEL=/models/from-common\n")
    cap = run(tmp_path, f"""\
        source "$(dirname "$0")/common.sh"
        source /etc/profile.d/conda.sh
        . ~/.bashrc
        cd /no/such/folder
        {PPO} actor_rollout_ref.model.path=$MODEL
        """)
    assert only_launch(cap).overrides == ["actor_rollout_ref.model.path=/models/from-common"]
    assert [c.argv for c in cap.commands] == [["source", "/etc/profile.d/conda.sh"],
                                             ["source", f"{cap.home}/.bashrc"],
                                             ["cd", "/no/such/folder"]]


def test_checkout_is_the_working_folder_and_config_path_is_kept(tmp_path):
    checkout = tmp_path / "verl"
    (checkout / "examples" / "multiturn" / "config").mkdir(parents=True)
    script = checkout / "examples" / "multiturn" / "run.sh"
    script.write_text(textwrap.dedent(f"""\
        set -x
        PROJECT_DIR="$(pwd)"
        CONFIG_PATH="$PROJECT_DIR/examples/multiturn/config"
        {PPO} --config-path="$CONFIG_PATH" --config-name gsm8k_multiturn trainer.nnodes=1 --cfg job
        """))
    cap = capture(script, vars={}, timeout=20, verl_checkout=checkout)
    launch = only_launch(cap)
    assert launch.config_path == f"{cap.workdir}/examples/multiturn/config"
    assert launch.config_name == "gsm8k_multiturn" and launch.hydra_flags == ["--cfg", "job"]
    assert launch.overrides == ["trainer.nnodes=1"] and launch.cwd_rel == "."


def test_date_is_fixed_and_machine_facts_are_not_read(tmp_path):
    cap = run(tmp_path, f"""\
        N=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
        {PPO} trainer.experiment_name=run-$(date +%Y-%m-%d) trainer.n_gpus_per_node=$N
        """)
    assert only_launch(cap).overrides == ["trainer.experiment_name=run-2000-01-01", "trainer.n_gpus_per_node=0"]


def test_a_script_that_never_ends_is_stopped(tmp_path):
    started = time.monotonic()
    cap = run(tmp_path, """\
        sleep infinity            # recorded, not run
        ( while true; do :; done ) &
        while true; do :; done
        """, timeout=2)
    assert cap.timed_out and cap.exit_code is None
    assert time.monotonic() - started < 10
    assert cap.commands[0].argv == ["sleep", "infinity"]


def test_a_script_that_floods_commands_is_stopped(tmp_path):
    cap = run(tmp_path, "while true; do sleep 1; done\n", max_commands=50)
    assert cap.truncated and not cap.timed_out and len(cap.commands) > 50


def test_missing_script_is_a_clear_error(tmp_path):
    with pytest.raises(CaptureError, match="no such script"):
        capture(tmp_path / "nope.sh", vars={}, timeout=5, verl_checkout=None)
    with pytest.raises(CaptureError, match="not a shell variable"):
        run(tmp_path, "true\n", vars={"A-B": "1"})


def test_parse_python_and_hydra_args():
    call = parse_python(["python3", "-u", "-X", "dev", "-m", "verl.trainer.main_ppo", "a=1"])
    assert (call.options, call.entry_kind, call.entry, call.args) == (["-u", "-X", "dev"], "module",
                                                                      "verl.trainer.main_ppo", ["a=1"])
    assert parse_python(["python", "-uBm", "mod", "x"]).entry == "mod"
    assert parse_python(["python", "-c", "print(1)"]).entry_kind == "code"
    assert parse_python(["python", "main_ppo.py", "x=1"]).entry_kind == "script"
    name, path, overrides, flags = split_hydra_args(
        ["-cn", "n", "--config-path=p", "+a.b=1", "~c", "--cfg", "job", "--multirun", "d=-1"])
    assert (name, path, overrides, flags) == ("n", "p", ["+a.b=1", "~c", "d=-1"], ["--cfg", "job", "--multirun"])


def test_nothing_left_behind(tmp_path):
    import tempfile

    before = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("tutorrl-capture-")}
    run(tmp_path, f"{PPO} a=1\n")
    after = {p for p in os.listdir(tempfile.gettempdir()) if p.startswith("tutorrl-capture-")}
    assert after <= before


def test_array_element_from_empty_output_gets_a_last_round_without_set_u(tmp_path):
    cap = run(tmp_path, f"""\
        nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
        nodes_array=($nodes)
        head_node=${{nodes_array[0]}}
        {PPO} +ray_kwargs.ray_init.address=$head_node:6379
        """)
    assert cap.unset == {"SLURM_JOB_NODELIST": "__UNSET_SLURM_JOB_NODELIST__"}
    assert cap.unresolved == ["nodes_array[0]"]
    assert only_launch(cap).overrides == ["+ray_kwargs.ray_init.address=:6379"]


def test_the_exit_waiter_says_when_the_script_is_done():
    """capture waits for its jail through a pidfd: False while the process runs, True once it exited."""
    import subprocess

    from tutorrl.importer.capture import _exit_waiter

    proc = subprocess.Popen(["bash", "-c", "read -r _"], stdin=subprocess.PIPE)
    waited = _exit_waiter(proc)
    assert waited(0.01) is False and proc.returncode is None
    proc.stdin.close()  # bash's read sees EOF and the process ends
    assert waited(60) is True and proc.returncode is not None
    assert waited(0.01) is True


def _child_pids() -> list[int]:
    """This process's children (every thread's), running or ended and not yet waited for."""
    pids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as fh:
            pids += [int(p) for p in fh.read().split()]
    return pids


def _children() -> list[str]:
    """The command lines of this process's children."""
    out = []
    for pid in _child_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                out.append(fh.read().replace(b"\0", b" ").decode())
        except OSError:
            pass  # ended since the listing
    return out


def test_meanwhile_runs_once_while_the_first_round_runs(tmp_path, monkeypatch):
    # The import command loads Hydra in it: after the first round's jail started and before
    # it is waited for (a fast script may have ended already); the rounds after run without it.
    import subprocess

    started, seen = [], []

    class Recorded(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    cap = run(tmp_path, f"{PPO} a=$NEEDED\n", meanwhile=lambda: seen.append((list(started), _child_pids())))
    assert cap.rounds == 2 and only_launch(cap).overrides == ["a=__UNSET_NEEDED__"]
    assert len(started) == 2 and len(seen) == 1, (started, seen)
    jails_then, children_then = seen[0]
    assert jails_then == started[:1] and started[0] in children_then


def test_what_meanwhile_raises_stops_the_jail_and_is_raised(tmp_path):
    class Stop(Exception):
        pass

    def fail():
        raise Stop

    with pytest.raises(Stop):
        run(tmp_path, "while true; do :; done\n", timeout=600, meanwhile=fail)
    assert not any("_jail.py" in c for c in _children())
