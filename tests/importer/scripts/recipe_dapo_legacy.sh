#!/usr/bin/env bash
# A DAPO launch (verl-recipe's recipe.dapo.main_dapo) choosing the legacy worker implementation, a switch only verl
# 0.7.x has (written for tests/importer).
set -xeuo pipefail
python3 -m recipe.dapo.main_dapo \
    data.train_files=/data/gsm8k/train.parquet \
    data.val_files=/data/gsm8k/test.parquet \
    data.gen_batch_size=24 \
    algorithm.adv_estimator=grpo \
    algorithm.filter_groups.enable=True \
    trainer.use_legacy_worker_impl=disable \
    trainer.logger='["console"]'
