#!/usr/bin/env bash
# A RepExp launch (verl-recipe's rep_exp/): started as a top-level package from inside the checkout, as its
# train_elliptical.sh does, with its own keys (written for tests/importer).
set -xeuo pipefail
PYTHONUNBUFFERED=1 python3 -u -m rep_exp.main_rep_exp \
    algorithm.adv_estimator=grpo \
    data.train_files=/data/math/train.parquet \
    data.val_files=/data/math/dev.parquet \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \
    actor_rollout_ref.rollout.n=8 \
    reward_model.enable=True \
    reward_model.model.path=Qwen/Qwen2.5-0.5B-Instruct \
    reward_model.elliptical.enable=True \
    reward_model.elliptical.sparse_dim=32 \
    reward_model.reward_manager=elliptical \
    reward_model.reward_kwargs.elliptical.beta=0.01 \
    trainer.logger='["console"]'
