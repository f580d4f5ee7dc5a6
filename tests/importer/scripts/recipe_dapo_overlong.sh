#!/usr/bin/env bash
# A DAPO launch written before verl-recipe moved the overlong buffer (reward_model.overlong_buffer.*), as 11 of
# verl-recipe's own DAPO launches still are (written for tests/importer).
set -xeuo pipefail
max_response_length=$((1024 * 2))
python3 -m recipe.dapo.main_dapo \
    data.train_files=/data/gsm8k/train.parquet \
    data.val_files=/data/gsm8k/test.parquet \
    data.max_response_length=${max_response_length} \
    data.gen_batch_size=24 \
    algorithm.adv_estimator=grpo \
    algorithm.filter_groups.enable=True \
    reward_model.overlong_buffer.enable=True \
    reward_model.overlong_buffer.len=512 \
    reward_model.overlong_buffer.penalty_factor=1.0 \
    trainer.logger='["console"]'
