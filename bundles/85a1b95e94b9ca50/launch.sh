#!/usr/bin/env bash
# tutorrl launch script: experiment "gsm8k-custom-reward", verl 0.9.1 (fsdp).
# Generated from spec.toml by tutorrl. Edit the spec and recompile rather than
# this file: `tutorrl verify` refuses a bundle whose files were changed.
# Arguments given to this script (e.g. `--cfg job`) are passed to verl first.
set -euo pipefail

bundle_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$bundle_dir/bundle.env"


python_bin="${TUTORRL_PYTHON:-python}"
installed="$("$python_bin" -c 'import importlib.metadata as m; print(m.version("verl"))' 2>/dev/null)" || installed="no verl"
if [ "$installed" != "0.9.1" ]; then
  echo "tutorrl: this bundle targets verl 0.9.1, but the job's Python ($python_bin) has ${installed}" >&2
  exit 3
fi

exec "$python_bin" -m verl.trainer.main_ppo --config-name ppo_trainer "$@" \
  'trainer.experiment_name="gsm8k-custom-reward"' \
  'trainer.project_name="math"' \
  'data.train_files="data/gsm8k/train.parquet"' \
  'data.val_files="data/gsm8k/test.parquet"' \
  data.train_batch_size=256 \
  'actor_rollout_ref.model.path="Qwen/Qwen2.5-1.5B-Instruct"' \
  'actor_rollout_ref.actor.strategy="fsdp2"' \
  actor_rollout_ref.actor.ppo_mini_batch_size=64 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
  'actor_rollout_ref.rollout.name="vllm"' \
  actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.max_num_batched_tokens=16384 \
  +actor_rollout_ref.rollout.engine_kwargs.vllm.enforce_eager=true \
  trainer.total_training_steps=50 \
  trainer.save_freq=10 \
  'trainer.logger=["console"]' \
  'trainer.resume_mode="disable"' \
  trainer.n_gpus_per_node=8 \
  'reward.custom_reward_function.path="pkg://my_rewards.gsm8k"' \
  'reward.custom_reward_function.name="score"' \
  '+reward.custom_reward_function.reward_kwargs.answer_tag="####"' \
  +reward.custom_reward_function.reward_kwargs.format_weight=0.1 \
  +reward.custom_reward_function.reward_kwargs.strict=true \
  trainer.ray_wait_register_center_timeout=600

