#!/usr/bin/env bash
# A recipe's own entry point tutorrl has no entry for (its config is the recipe's).
set -x
python3 -m recipe.spin.main_spin \
    algorithm.adv_estimator=grpo \
    trainer.n_gpus_per_node=8 "$@"
