#!/usr/bin/env bash
# A launch in the shape of verl-recipe's grpo_mindspeed_mm/run_qwen3_5-27b_npu.sh: its module reads verl's own
# trainer config (written for tests/importer).
set -xeuo pipefail
python3 -m recipe.grpo_mindspeed_mm.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=/data/geo3k/train.parquet \
    data.val_files=/data/geo3k/test.parquet \
    data.train_batch_size=64 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.rollout.n=5 \
    actor_rollout_ref.actor.strategy=fsdp2 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=8192 \
    trainer.use_legacy_worker_impl=auto \
    trainer.logger='["console"]'
