#!/usr/bin/env bash
# An Entropy-Mechanism launch (verl-recipe's recipe.entropy.main_entropy) in the shape of its 32b_kl_cov.sh and
# 32b_clip_cov.sh: each loss key set at actor.policy_loss.* and again at actor.*, a spelling no config declares
# (written for tests/importer).
set -xeuo pipefail
python3 -m recipe.entropy.main_entropy \
    data.train_files=/data/gsm8k/train.parquet \
    data.val_files=/data/gsm8k/test.parquet \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.loss_mode=kl_cov \
    actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov \
    actor_rollout_ref.actor.policy_loss.kl_cov_ratio=0.0002 \
    actor_rollout_ref.actor.clip_cov_ratio=0.0004 \
    trainer.logger='["console"]'
