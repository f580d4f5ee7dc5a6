#!/usr/bin/env bash
# tutorrl launch script: experiment "chess-tutor-grpo-lr_1e-06-n_16", verl 0.9.1 (fsdp).
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
# rather than at the first save, hours in. Checked without importing it (that
# loads verl's trainer and torch: seconds); the trainer imports it once.
if ! evidence_problem="$("$python_bin" -c 'import sys; from tutorrl.evidence.hook_check import main; main(sys.argv[1])' "$bundle_dir" 2>&1)"; then
  evidence_problem="${evidence_problem##*$'\n'}"
  echo "tutorrl: the job's Python ($python_bin) cannot run tutorrl.evidence.callback: ${evidence_problem:-no reason given}; install tutorrl where the job runs, or set trainer.evidence_callback = false" >&2
  exit 3
fi

exec "$python_bin" -m verl.trainer.main_ppo --config-name ppo_trainer "$@" \
  'trainer.experiment_name="chess-tutor-grpo-lr_1e-06-n_16"' \
  'trainer.project_name="chess-tutor"' \
  'data.train_files="data/chess/playground_train.parquet"' \
  'data.val_files="data/chess/playground_val.parquet"' \
  data.train_batch_size=56 \
  data.max_prompt_length=1024 \
  data.max_response_length=512 \
  data.seed=7 \
  'actor_rollout_ref.model.path="models/tutor-sft-merged"' \
  actor_rollout_ref.model.lora_rank=0 \
  'algorithm.adv_estimator="grpo"' \
  algorithm.use_kl_in_reward=false \
  actor_rollout_ref.actor.optim.lr=1e-06 \
  actor_rollout_ref.actor.ppo_mini_batch_size=28 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
  actor_rollout_ref.actor.use_kl_loss=true \
  'actor_rollout_ref.actor.kl_loss_type="low_var_kl"' \
  actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.actor.entropy_coeff=0.0 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4 \
  'actor_rollout_ref.rollout.name="sglang"' \
  actor_rollout_ref.rollout.n=16 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.top_p=1.0 \
  actor_rollout_ref.rollout.top_k=-1 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \
  trainer.total_training_steps=200 \
  trainer.save_freq=20 \
  trainer.test_freq=20 \
  'trainer.default_local_dir="checkpoints/chess-tutor/grpo"' \
  'trainer.logger=["console"]' \
  'trainer.checkpoint_callback_class="tutorrl.evidence.callback.EvidenceCallback"' \
  trainer.nnodes=1 \
  trainer.n_gpus_per_node=7 \
  'reward.custom_reward_function.path="pkg://studentsim.tutor_rl._reward_entry"' \
  'reward.custom_reward_function.name="compute_score"' \
  '+reward.custom_reward_function.reward_kwargs.adapter_path="models/student-sim/adapter"' \
  +reward.custom_reward_function.reward_kwargs.alpha_perception=0.3 \
  +reward.custom_reward_function.reward_kwargs.alpha_style=0.5 \
  '+reward.custom_reward_function.reward_kwargs.device="cuda:7"' \
  '+reward.custom_reward_function.reward_kwargs.heads_checkpoint="models/student-sim/heads.pt"' \
  '+reward.custom_reward_function.reward_kwargs.heads_metrics="models/student-sim/heads_metrics.json"' \
  +reward.custom_reward_function.reward_kwargs.illegal_reward=-1.0 \
  +reward.custom_reward_function.reward_kwargs.mate_clip_cp=1000 \
  '+reward.custom_reward_function.reward_kwargs.reward_table="data/chess/reward_table.json"' \
  +reward.custom_reward_function.reward_kwargs.scale_cp=400.0 \
  reward.num_workers=1

