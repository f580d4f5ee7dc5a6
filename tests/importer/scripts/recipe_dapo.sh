#!/usr/bin/env bash
# A recipe launch: verl's DAPO trainer, not main_ppo (written for tests/importer).
set -xeuo pipefail
python3 examples/data_preprocess/gsm8k.py --local_dir ~/data/gsm8k
ray job submit --no-wait -- \
    python3 -m recipe.dapo.main_dapo \
    data.train_files="$HOME/data/gsm8k/train.parquet" \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.rollout.n=8
