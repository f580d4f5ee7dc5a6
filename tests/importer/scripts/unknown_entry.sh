#!/usr/bin/env bash
# A recipe's own entry point tutorrl has no entry for (its config is the recipe's).
set -x
python3 -m recipe.entropy.main_entropy \
    algorithm.adv_estimator=grpo \
    actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov \
    trainer.n_gpus_per_node=8 "$@"
