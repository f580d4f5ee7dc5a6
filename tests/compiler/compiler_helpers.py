"""Data and helpers shared by the compiler tests (a module of its own: tests import no other test module)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
from unittest import mock

from hypothesis import strategies as st

import support

# Characters that each mean something to TOML, Hydra, OmegaConf or bash, and some that mean nothing.
ALPHABET = [" ", "'", '"', "\\", "$", "${", "}", ",", "[", "]", "{", "=", "#", "~", "\t", "é", "日本", "→", "✓",
            "😀", "a", "b", "x.y", ":", "/", "%", "@", "pkg://", "true", "null", "8"]
strings = st.lists(st.sampled_from(ALPHABET), max_size=12).map("".join)


# A full spec for verl 0.9.1 (the chess tutor's GRPO launch), and one that sets an FSDP custom table with LoRA.
CHESS = support.spec_doc(
    experiment={"name": "chess-tutor-grpo", "project": "chess-tutor"},
    data={"train": "/data/chess/train.parquet", "val": "/data/chess/val.parquet", "train_batch_size": 56},
    model={"path": "/models/tutor-sft-merged"},
    actor={"ppo_mini_batch_size": 28, "ppo_micro_batch_size_per_gpu": 4, "use_kl_loss": True},
    rollout={"engine": "sglang", "n": 8, "tensor_parallel": 1},
    trainer={"total_steps": 100, "loggers": support.DROP},  # verl's default loggers, as the team's launcher
    resources={"trainer_gpus_per_node": 7, "reward_gpus": 1},
    reward=support.Whole(
        plugin="chess-simulator",
        options={"table": "/data/chess/reward_table.json", "adapter": "/models/sim/adapter",
                 "heads_checkpoint": "/models/sim/heads.pt", "heads_metrics": "/models/sim/heads_metrics.json",
                 "device": "cuda:7"},
    ),
    env={"set": {"TOKENIZERS_PARALLELISM": "false"}, "passthrough": ["WANDB_API_KEY"]},
)

FSDP_CUSTOM = support.spec_doc(
    experiment={"name": "custom-lora"},
    # Quotes, an apostrophe and an interpolation: the path must reach verl as written.
    data={"train": 'it\'s ${not} "here".parquet', "val": "v.parquet", "train_batch_size": 8, "seed": 7},
    model={"path": "m", "lora": {"rank": 8, "alpha": 16, "target_modules": ["q_proj", "v_proj"]}},
    actor=support.Whole(ppo_mini_batch_size=4, strategy="fsdp2"),
    rollout={"engine": "vllm", "n": 2},
    trainer={"total_steps": 3, "resume_mode": "resume_path", "resume_from": "/ckpt/x",
             "loggers": ["console", "tensorboard"]},
    resources={"trainer_gpus_per_node": 2},
    reward=support.Whole(module="tutorrl_test_reward.rewards", function="score",
                         kwargs={"a": 1, "b": "x y", "c": [1, 2], "d": True}),
    verl={"extra_overrides": ["trainer.default_hdfs_dir=null"]},
)


def spec_at(release: str, spec: dict, **tables) -> str:
    """``spec`` as TOML text for verl ``release``, with ``tables`` merged in (support.spec_doc's rules)."""
    return support.spec_toml(support.spec_doc(spec, experiment={"verl": release}), **tables)


# -- launch.sh read without a shell --------------------------------------------------------------------------------

# launch.sh's lines this reads, as the templates (templates/launch.sh.tmpl, roots_program.tmpl) write them.
_ROOT_DEFAULT = re.compile(r'^if \[ -z "\$\{([A-Za-z_][A-Za-z0-9_]*):-\}" \]; then export \1=(.*); fi$', re.M)
_ROOTS_PROGRAM = re.compile(r"^roots_program=('(?:[^']|'\"'\"')*')$", re.M)
_ROOTED = re.compile(r'^(rooted_\d+)="\$\("\$python_bin" -c "\$roots_program" (.*)\)" \|\| exit 3$', re.M)
_EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.M)
# A whole word of the exec line that is a variable in double quotes ("$@", "$rooted_0"): a value's own quotes are
# Hydra-escaped (\") inside a single-quoted word, so never preceded by a blank.
_VARIABLE_WORD = re.compile(r'(?<=\s)"\$(@|rooted_\d+)"(?=\s|$)')


def launch_in_process(bundle, env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """What ``bundle``'s launch.sh hands verl -- the argv after the interpreter, and what bundle.env exports --
    with no shell run: the words read with POSIX quoting (shlex), the roots' defaults applied as launch.sh applies
    them, the program it runs for each path under a root run in this Python (its output taken as ``"$(...)"``
    takes it: trailing newlines dropped), and no arguments given to launch.sh. ``env`` is the job's environment.

    The property tests drive many examples through this; each keeps a real-bash sample (support.StandinPython)
    that checks bash hands verl what this reads."""
    text = (bundle / "launch.sh").read_text(encoding="utf-8")
    job_env = dict(env or {})
    for name, word in _ROOT_DEFAULT.findall(text):
        if not job_env.get(name):
            job_env[name] = shlex.split(word)[0]
    programs = [shlex.split(f"p={quoted}")[0][2:] for quoted in _ROOTS_PROGRAM.findall(text)]
    rooted = {}
    for name, args in _ROOTED.findall(text):
        (program,) = programs
        printed = io.StringIO()
        with mock.patch.object(sys, "argv", ["-c", *shlex.split(args)]), \
                mock.patch.dict(os.environ, job_env, clear=True), contextlib.redirect_stdout(printed):
            exec(compile(program, "<launch.sh roots_program>", "exec"), {"__name__": "__main__"})
        rooted[name] = printed.getvalue().rstrip("\n")
    exec_line = text.split("\nexec ", 1)[1].replace("\\\n", " ")
    words = shlex.split(_VARIABLE_WORD.sub(lambda m: f"'\0{m.group(1)}'", exec_line))
    assert words[0] == "$python_bin", words[:2]
    argv = [rooted[w[1:]] if w.startswith("\0rooted_") else w for w in words[1:] if w != "\0@"]
    assert not [w for w in argv if "\0" in w], argv
    exported = {name: shlex.split(word)[0] for name, word in
                _EXPORT.findall((bundle / "bundle.env").read_text(encoding="utf-8"))}
    return argv, exported
