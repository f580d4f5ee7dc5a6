#!/usr/bin/env bash
# A recipe's own entry point tutorrl has no entry for (fault_recover: no Hydra config of its own to key).
set -x
python3 -m recipe.fault_recover.main_ppo \
    algorithm.adv_estimator=grpo \
    trainer.n_gpus_per_node=8 "$@"
