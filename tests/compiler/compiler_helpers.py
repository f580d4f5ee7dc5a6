"""Data shared by the compiler tests (a module of its own: tests import no other test module)."""

from __future__ import annotations

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
