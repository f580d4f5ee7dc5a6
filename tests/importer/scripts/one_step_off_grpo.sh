#!/usr/bin/env bash
# One-step-off-policy GRPO: generation of step N+1 overlaps training of step N
# on GPUs of its own (verl's experimental one-step-off entry point, launched
# with its own config folder and name, as that module's examples do).
set -x

ENGINE=${1:-vllm}
TRAIN_GPUS=4
GEN_GPUS=4
MODEL=${MODEL:-Qwen/Qwen3-0.6B}
DATA=$HOME/data/gsm8k

python3 -m verl.experimental.one_step_off_policy.main_ppo \
    --config-path=config \
    --config-name='one_step_off_ppo_trainer.yaml' \
    algorithm.adv_estimator=grpo \
    data.train_files=$DATA/train.parquet \
    data.val_files=$DATA/test.parquet \
    data.train_batch_size=256 \
    data.max_prompt_length=512 \
    data.max_response_length=1024 \
    data.filter_overlong_prompts=True \
    data.truncation='error' \
    actor_rollout_ref.hybrid_engine=False \
    actor_rollout_ref.model.path=$MODEL \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=64 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \
    actor_rollout_ref.actor.fsdp_config.param_offload=False \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
    actor_rollout_ref.rollout.name=$ENGINE \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    actor_rollout_ref.rollout.n=5 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.ref.fsdp_config.param_offload=True \
    algorithm.use_kl_in_reward=False \
    trainer.critic_warmup=0 \
    trainer.logger='["console"]' \
    trainer.project_name='verl_grpo_gsm8k' \
    trainer.experiment_name='qwen3_0.6b_one_step_off' \
    trainer.nnodes=1 \
    trainer.n_gpus_per_node=$TRAIN_GPUS \
    rollout.nnodes=1 \
    rollout.n_gpus_per_node=$GEN_GPUS \
    trainer.save_freq=-1 \
    trainer.test_freq=5 \
    trainer.total_epochs=2 "$@"
