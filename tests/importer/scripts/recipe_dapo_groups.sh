#!/usr/bin/env bash
# A DAPO launch (verl-recipe's recipe.dapo.main_dapo) with its own keys (written for tests/importer).
set -xeuo pipefail
python3 -m recipe.dapo.main_dapo \
    data.train_files=/data/gsm8k/train.parquet \
    data.val_files=/data/gsm8k/test.parquet \
    data.gen_batch_size=24 \
    algorithm.adv_estimator=grpo \
    algorithm.filter_groups.enable=True \
    algorithm.filter_groups.metric=acc \
    actor_rollout_ref.rollout.n=8 \
    trainer.logger='["console"]'
