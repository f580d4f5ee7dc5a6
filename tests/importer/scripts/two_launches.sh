#!/usr/bin/env bash
for lr in 1e-6 2e-6; do
  python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.optim.lr=$lr
done
