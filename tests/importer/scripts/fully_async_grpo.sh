#!/usr/bin/env bash
# Fully asynchronous GRPO: the rollouter has its own GPUs and streams samples
# to the trainer, which syncs weights back every few steps (verl's
# experimental fully-async entry point, not main_ppo).
set -xeuo pipefail

NNODES_TRAIN=${NNODES_TRAIN:-1}
NNODES_ROLLOUT=${NNODES_ROLLOUT:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
MODEL=${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}
DATA=$HOME/data

n_resp=8
train_prompt_bsz=0  # fully-async draws prompts one at a time
mini_bsz=32
total_rollout_steps=$((512 * 100))
staleness=0.5
sync_every=4

python3 -m verl.experimental.fully_async_policy.fully_async_main \
    data.train_files="$DATA/gsm8k/train.parquet" \
    data.val_files="$DATA/gsm8k/test.parquet" \
    data.train_batch_size=${train_prompt_bsz} \
    data.max_prompt_length=1024 \
    data.max_response_length=2048 \
    data.return_raw_chat=True \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    actor_rollout_ref.hybrid_engine=False \
    actor_rollout_ref.model.path="${MODEL}" \
    actor_rollout_ref.model.use_remove_padding=True \
    actor_rollout_ref.actor.strategy=fsdp2 \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=${mini_bsz} \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.actor.use_kl_loss=False \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.mode=async \
    actor_rollout_ref.rollout.n=${n_resp} \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.8 \
    actor_rollout_ref.rollout.calculate_log_probs=True \
    trainer.logger='["console"]' \
    trainer.project_name='math' \
    trainer.experiment_name='gsm8k-fully-async' \
    trainer.val_before_train=False \
    trainer.save_freq=20 \
    trainer.test_freq=-1 \
    trainer.total_training_steps=100 \
    trainer.nnodes="${NNODES_TRAIN}" \
    trainer.n_gpus_per_node="${GPUS_PER_NODE}" \
    rollout.nnodes="${NNODES_ROLLOUT}" \
    rollout.n_gpus_per_node="${GPUS_PER_NODE}" \
    rollout.total_rollout_steps="${total_rollout_steps}" \
    async_training.staleness_threshold="${staleness}" \
    async_training.trigger_parameter_sync_step="${sync_every}" \
    async_training.require_batches=4 \
    async_training.partial_rollout=True "$@"
