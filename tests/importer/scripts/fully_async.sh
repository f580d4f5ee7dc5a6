#!/usr/bin/env bash
# verl's fully-async trainer and a module tutorrl knows nothing of (written for tests/importer).
python3 -m verl.experimental.fully_async_policy.fully_async_main \
    --config-name fully_async_ppo_trainer actor_rollout_ref.rollout.n=4
python -m my_lab.trainers.main_grpo trainer.total_epochs=1
