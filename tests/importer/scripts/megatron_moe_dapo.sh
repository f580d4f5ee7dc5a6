#!/usr/bin/env bash
# A Megatron MoE run with DAPO's overlong penalty: pass-through dicts and an unset node count.
NODES=${SLURM_JOB_NUM_NODES}
offload=true
python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer \
    data.train_files=/data/dapo/train.parquet \
    data.val_files=/data/aime/test.parquet \
    data.train_batch_size=512 \
    actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B \
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4 \
    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2 \
    actor_rollout_ref.actor.megatron.expert_model_parallel_size=8 \
    actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=1 \
    actor_rollout_ref.actor.megatron.param_offload=${offload} \
    +actor_rollout_ref.actor.megatron.override_transformer_config.moe_router_dtype=fp32 \
    +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform \
    actor_rollout_ref.actor.clip_ratio_low=0.2 \
    actor_rollout_ref.actor.clip_ratio_high=0.28 \
    actor_rollout_ref.actor.loss_agg_mode=token-mean \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.val_kwargs.top_p=0.7 \
    reward_model.reward_manager=dapo \
    +reward_model.reward_kwargs.overlong_buffer_cfg.enable=True \
    +reward_model.reward_kwargs.overlong_buffer_cfg.len=4096 \
    +reward_model.reward_kwargs.max_resp_len=20480 \
    trainer.nnodes=$NODES \
    trainer.n_gpus_per_node=8 \
    trainer.total_training_steps=100
