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
# verl calls tutorrl's checkpoint-evidence class after every save; fail now
# rather than at the first save, hours in.
if ! "$python_bin" -c 'import tutorrl.evidence.callback' 2>/dev/null; then
  echo "tutorrl: the job's Python ($python_bin) cannot import tutorrl.evidence.callback; install tutorrl where the job runs, or set trainer.evidence_callback = false" >&2
  exit 3
fi

exec "$python_bin" -m verl.trainer.main_ppo --config-name ppo_trainer "$@" \
  'trainer.project_name="math"' \
  'trainer.experiment_name="gsm8k-custom-reward"' \
  'data.train_files="data/gsm8k/train.parquet"' \
  'data.val_files="data/gsm8k/test.parquet"' \
  data.seed=1 \
  data.train_batch_size=256 \
  data.max_prompt_length=512 \
  data.max_response_length=512 \
  'actor_rollout_ref.model.path="Qwen/Qwen2.5-1.5B-Instruct"' \
  actor_rollout_ref.model.lora_rank=0 \
  'algorithm.adv_estimator="grpo"' \
  algorithm.use_kl_in_reward=false \
  'actor_rollout_ref.actor.strategy="fsdp2"' \
  'actor_rollout_ref.ref.strategy="fsdp2"' \
  actor_rollout_ref.actor.optim.lr=1e-06 \
  actor_rollout_ref.actor.ppo_mini_batch_size=64 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.actor.use_kl_loss=false \
  actor_rollout_ref.actor.entropy_coeff=0.0 \
  'actor_rollout_ref.rollout.name="vllm"' \
  actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.top_p=1.0 \
  actor_rollout_ref.rollout.top_k=-1 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.5 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  trainer.total_training_steps=50 \
  trainer.save_freq=10 \
  trainer.test_freq=-1 \
  'trainer.default_local_dir="checkpoints/math/gsm8k-custom-reward"' \
  'trainer.logger=["console"]' \
  'trainer.checkpoint_callback_class="tutorrl.evidence.callback.EvidenceCallback"' \
  'trainer.resume_mode="disable"' \
  trainer.nnodes=1 \
  trainer.n_gpus_per_node=8 \
  reward.num_workers=1 \
  'reward.custom_reward_function.path="pkg://my_rewards.gsm8k"' \
  'reward.custom_reward_function.name="score"' \
  '+reward.custom_reward_function.reward_kwargs.answer_tag="####"' \
  +reward.custom_reward_function.reward_kwargs.format_weight=0.1 \
  +reward.custom_reward_function.reward_kwargs.strict=true \
  actor_rollout_ref.rollout.max_num_batched_tokens=16384 \
  +actor_rollout_ref.rollout.engine_kwargs.vllm.enforce_eager=true

