"""The experiment spec: one TOML file per experiment, as msgspec structs.

The spec speaks verl's own vocabulary, grouped in sections people review
(`[data]`, `[actor]`, `[rollout]`, `[critic]`, `[reward]`, ...). Each field is
documented where it is declared; the text travels into the JSON Schema that
``tutorrl schema`` emits.

One promise shapes every field: **a launch is exactly what the spec says.**
Every verl setting is optional and ``None`` means *not set*: nothing is
emitted and verl's own default for the target release applies (the bundle's
``spec.toml`` states that default, read from the release's key set). Only the
target release is required. Where a field writes a dict that verl reads whole
(Megatron's transformer-config overrides, reward keyword arguments, engine
kwargs), it is a *table*: each entry becomes one verl key.

Which verl key each field is written to, per release, is data:
``keymap/verl.toml``. A field's dotted path here is its setting name there.
Team-specific reward logic is a plug-in (:mod:`tutorrl.compiler.rewards`),
configured under ``[reward.options]`` with its own typed options.
"""

# No `from __future__ import annotations`: evaluated annotations spare
# msgspec and the loader re-parsing every type string on each compile.
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Meta, Struct, field

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
# `\Z`, not `$`: `$` also matches before a trailing newline.
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z"
_RELEASE = r"^[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?\Z"
_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*\Z"
_MODULE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z"

# verl's integers are Python ints that end up in torch and C++ (int64).
_I64 = 2**63 - 1
Int = Annotated[int, Meta(ge=-_I64, le=_I64)]
PosInt = Annotated[int, Meta(ge=1, le=_I64)]
NonNegInt = Annotated[int, Meta(ge=0, le=_I64)]
# Steps/frequencies where verl uses -1 for "never" or "all".
StepInt = Annotated[int, Meta(ge=-1, le=_I64)]
# Bounded both ways so that inf and nan (valid TOML) are refused: verl and
# Hydra cannot take them back.
Float = Annotated[float, Meta(ge=-1e300, le=1e300)]
NonNegFloat = Annotated[float, Meta(ge=0.0, le=1e300)]
PosFloat = Annotated[float, Meta(gt=0.0, le=1e300)]
Fraction = Annotated[float, Meta(ge=0.0, le=1.0)]
Probability = Annotated[float, Meta(gt=0.0, le=1.0)]
Text = Annotated[str, Meta(min_length=1)]
# A dict verl reads whole; nested tables become dotted keys.
Table = dict[Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*\Z")], Any]
Files = Union[Text, Annotated[list[Text], Meta(min_length=1)]]


def opt(tp, doc: str):
    """An optional field: ``None`` (unset) keeps verl's default."""
    return Annotated[Union[tp, None], Meta(description=doc)]


AdvEstimator = Literal[
    "gae", "grpo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo",
    "opo", "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized",
    "optimal_token_baseline", "tir_optimal_token_baseline", "gdpo",
]
KlType = Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"]
Logger = Literal["console", "wandb", "tensorboard", "mlflow", "swanlab", "vemlp_wandb", "clearml", "trackio", "file",
                 "rl_insight"]
LossAgg = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


class Section(Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Base of every spec section (and of reward plug-in options)."""


class Experiment(Section):
    verl: Annotated[str, Meta(pattern=_RELEASE, description=(
        "Target verl release, e.g. \"0.9.1\". Selects the key map; launch.sh refuses any other installed release."))]
    name: opt(Annotated[str, Meta(pattern=_NAME, max_length=128)],
              "Experiment name (verl's trainer.experiment_name); also names the bundle in listings.") = None
    project: opt(Annotated[str, Meta(pattern=_NAME, max_length=128)],
                 "Project name (verl's trainer.project_name, the tracker project).") = None
    config_name: opt(Annotated[str, Meta(pattern=_NAME)], (
        "Another trainer config to compose (verl's --config-name), e.g. a multi-turn config of your own. "
        "Unset: verl's ppo_trainer (or its Megatron config with actor.strategy = \"megatron\").")) = None
    config_path: opt(Text, (
        "Folder holding config_name (verl's --config-path), relative to where the job runs; ship it with the job. "
        "Keys are still checked against the release's own trainer config.")) = None


class Data(Section):
    train: opt(Files, "Training data: a parquet file, or a list of files (verl's data.train_files).") = None
    val: opt(Files, "Validation data: a file or a list of files (verl's data.val_files).") = None
    prompt_key: opt(Text, "Column holding the prompt.") = None
    train_batch_size: opt(PosInt, "Prompts per training step.") = None
    val_batch_size: opt(PosInt, "Prompts per validation batch (unset: the whole set at once).") = None
    max_prompt_length: opt(PosInt, "Longest prompt in tokens.") = None
    max_response_length: opt(PosInt, "Longest generated response in tokens.") = None
    truncation: opt(Literal["error", "left", "right", "middle"], "What to do with a prompt over max_prompt_length.") = None
    filter_overlong_prompts: opt(bool, "Drop prompts longer than max_prompt_length before training.") = None
    filter_overlong_prompts_workers: opt(PosInt, "Processes used to filter overlong prompts.") = None
    return_raw_chat: opt(bool, "Hand the raw chat to the rollout (needed by multi-turn and agent loops).") = None
    return_full_prompt: opt(bool, "Also return the prompt with its chat template applied.") = None
    shuffle: opt(bool, "Shuffle the training data.") = None
    seed: opt(NonNegInt, "Seed of the data sampler.") = None
    dataloader_num_workers: opt(NonNegInt, "Data loader worker processes.") = None
    image_key: opt(Text, "Column holding images (vision-language data).") = None
    trust_remote_code: opt(bool, "Let the tokenizer/processor run code from the model repository.") = None


class Lora(Section):
    rank: opt(NonNegInt, "LoRA rank; 0 trains the full model.") = None
    alpha: opt(PosInt, "LoRA alpha (scaling numerator).") = None
    target_modules: opt(Union[str, list[Text]], "Modules that get adapters: \"all-linear\" or a list of module names.") = None


class Model(Section):
    path: opt(Text, "The policy's starting checkpoint (a Hugging Face model folder or hub id).") = None
    attn_implementation: opt(Literal["flash_attention_2", "sdpa", "eager"], (
        "Attention kernel, written into the model's override_config; \"sdpa\" for machines without flash-attn.")) = None
    use_remove_padding: opt(bool, "Pack sequences without padding (needs flash-attn).") = None
    enable_gradient_checkpointing: opt(bool, "Recompute activations in the backward pass to save memory.") = None
    enable_activation_offload: opt(bool, "Offload activations to the CPU.") = None
    use_fused_kernels: opt(bool, "Use verl's fused log-prob/entropy kernels.") = None
    use_shm: opt(bool, "Load the model through shared memory.") = None
    trust_remote_code: opt(bool, "Let the model repository run its own code.") = None
    external_lib: opt(Text, "A Python module imported before the model is built (custom architectures).") = None
    override_config: opt(Table, "Entries merged into the Hugging Face model config (verl's model.override_config).") = None
    lora: opt(Lora, "LoRA adapter on the policy.") = None


class KlCtrl(Section):
    type: opt(Literal["fixed", "adaptive"], "KL controller of the in-reward KL penalty.") = None
    kl_coef: opt(NonNegFloat, "Initial KL coefficient of the in-reward penalty.") = None
    target_kl: opt(NonNegFloat, "Target KL of the adaptive controller.") = None
    horizon: opt(PosInt, "Horizon of the adaptive controller.") = None


class Algorithm(Section):
    adv_estimator: opt(AdvEstimator, "Advantage estimator.") = None
    use_kl_in_reward: opt(bool, "Apply the KL penalty inside the reward.") = None
    gamma: opt(Fraction, "Discount factor.") = None
    lam: opt(Fraction, "GAE lambda.") = None
    norm_adv_by_std_in_grpo: opt(bool, "Divide GRPO advantages by the group's standard deviation.") = None
    kl_ctrl: opt(KlCtrl, "The in-reward KL controller.") = None


class MegatronLayout(Section):
    tensor_parallel: opt(PosInt, "Megatron tensor-parallel size.") = None
    pipeline_parallel: opt(PosInt, "Megatron pipeline-parallel size.") = None
    virtual_pipeline: opt(PosInt, "Virtual pipeline stages per pipeline rank (interleaved schedule).") = None
    context_parallel: opt(PosInt, "Megatron context-parallel size.") = None
    expert_parallel: opt(PosInt, "Expert-parallel size (MoE models).") = None
    expert_tensor_parallel: opt(PosInt, "Tensor parallelism inside each expert (MoE); unset: Megatron uses tensor_parallel.") = None
    sequence_parallel: opt(bool, "Megatron sequence parallelism (with tensor parallelism).") = None
    use_dist_checkpointing: opt(bool, "Load weights from a Megatron distributed checkpoint.") = None
    dist_checkpointing_path: opt(Text, "Where that distributed checkpoint is.") = None
    use_mbridge: opt(bool, "Build the Megatron model through mbridge (Hugging Face <-> Megatron weights).") = None
    transformer_overrides: opt(Table, (
        "Entries passed whole into Megatron's TransformerConfig (verl's override_transformer_config), "
        "e.g. MoE routing, fusions, recomputation.")) = None


class Actor(Section):
    strategy: opt(Literal["fsdp", "fsdp2", "megatron"], (
        "Training backend. \"megatron\" selects verl's Megatron config and allows [actor.megatron]; unset: FSDP.")) = None
    lr: opt(Annotated[float, Meta(gt=0.0, le=1.0)], "Actor learning rate.") = None
    lr_warmup_steps_ratio: opt(Fraction, "Share of the steps spent warming up the learning rate.") = None
    lr_warmup_steps: opt(StepInt, "Warm-up steps (-1: use lr_warmup_steps_ratio).") = None
    warmup_style: opt(Literal["constant", "cosine"], "Learning-rate schedule after warm-up.") = None
    weight_decay: opt(NonNegFloat, "AdamW weight decay.") = None
    ppo_mini_batch_size: opt(PosInt, "Prompts per PPO update; divides data.train_batch_size.") = None
    ppo_micro_batch_size_per_gpu: opt(PosInt, "Sequences per GPU per forward/backward pass.") = None
    ppo_micro_batch_size: opt(PosInt, "Legacy global micro-batch (verl divides it by the GPUs); prefer the per-GPU field.") = None
    use_dynamic_bsz: opt(bool, "Pack micro-batches by token count instead of sequence count.") = None
    ppo_max_token_len_per_gpu: opt(PosInt, "Token budget per GPU per micro-batch with dynamic batch sizes.") = None
    ppo_epochs: opt(PosInt, "Passes over each batch.") = None
    use_kl_loss: opt(bool, "Add a KL loss against the reference policy (GRPO-style).") = None
    kl_loss_type: opt(KlType, "KL estimator of the KL loss.") = None
    kl_loss_coef: opt(NonNegFloat, "Weight of the KL loss.") = None
    entropy_coeff: opt(Float, "Entropy bonus weight.") = None
    clip_ratio: opt(NonNegFloat, "PPO clip range.") = None
    clip_ratio_low: opt(NonNegFloat, "Lower clip range (DAPO's clip-higher).") = None
    clip_ratio_high: opt(NonNegFloat, "Upper clip range (DAPO's clip-higher).") = None
    clip_ratio_c: opt(NonNegFloat, "Dual-clip constant.") = None
    loss_agg_mode: opt(LossAgg, "How token losses are aggregated.") = None
    policy_loss: opt(Text, "Policy loss function (verl's policy_loss.loss_mode), e.g. \"vanilla\", \"gspo\".") = None
    grad_clip: opt(NonNegFloat, "Gradient-norm clipping.") = None
    ulysses_sequence_parallel_size: opt(PosInt, "Ulysses sequence parallelism (FSDP).") = None
    param_offload: opt(bool, "Offload parameters to the CPU (FSDP's fsdp_config, or Megatron's).") = None
    optimizer_offload: opt(bool, "Offload optimizer state to the CPU (FSDP's fsdp_config, or Megatron's).") = None
    grad_offload: opt(bool, "Offload gradients to the CPU (Megatron).") = None
    use_torch_compile: opt(bool, "torch.compile the actor's loss and log-prob computations.") = None
    fsdp_size: opt(Annotated[int, Meta(ge=-1, le=_I64)], "FSDP shard group size (-1: all GPUs).") = None
    mixed_precision: opt(Table, "FSDP mixed precision (param_dtype, reduce_dtype, buffer_dtype), read whole by verl.") = None
    megatron: opt(MegatronLayout, "Megatron parallel layout of the actor; only with strategy = \"megatron\".") = None


class Ref(Section):
    strategy: opt(Literal["fsdp", "fsdp2"], "Backend of the reference policy (FSDP runs).") = None
    log_prob_micro_batch_size_per_gpu: opt(PosInt, "Sequences per GPU per reference log-prob pass.") = None
    log_prob_micro_batch_size: opt(PosInt, "Legacy global micro-batch of the reference pass.") = None
    log_prob_max_token_len_per_gpu: opt(PosInt, "Token budget per GPU with dynamic batch sizes.") = None
    log_prob_use_dynamic_bsz: opt(bool, "Dynamic batch sizes for the reference pass.") = None
    param_offload: opt(bool, "Offload the reference model's parameters to the CPU.") = None
    ulysses_sequence_parallel_size: opt(PosInt, "Ulysses sequence parallelism of the reference pass.") = None
    use_torch_compile: opt(bool, "torch.compile the reference pass.") = None
    megatron: opt(MegatronLayout, "Megatron layout of the reference model (Megatron runs).") = None


class RolloutVal(Section):
    temperature: opt(NonNegFloat, "Sampling temperature during validation.") = None
    top_p: opt(Probability, "Nucleus mass during validation.") = None
    top_k: opt(Annotated[int, Meta(ge=-1, le=_I64)], "Top-k during validation; -1 disables it.") = None
    n: opt(PosInt, "Responses per validation prompt.") = None
    do_sample: opt(bool, "Sample during validation (false: greedy).") = None


class MultiTurn(Section):
    enable: opt(bool, "Multi-turn rollouts with tools or interactions.") = None
    max_assistant_turns: opt(PosInt, "Most assistant turns per conversation.") = None
    max_user_turns: opt(PosInt, "Most user turns per conversation.") = None
    tool_config_path: opt(Text, "Tool configuration file.") = None
    interaction_config_path: opt(Text, "Interaction configuration file.") = None
    format: opt(Text, "Chat format of tool calls, e.g. \"hermes\".") = None


class Agent(Section):
    num_workers: opt(PosInt, "Agent-loop workers.") = None
    default_agent_loop: opt(Text, "Agent loop used when a sample names none.") = None
    agent_loop_config_path: opt(Text, "Agent-loop configuration file.") = None


class Rollout(Section):
    engine: opt(Literal["sglang", "vllm", "hf"], "Rollout engine (verl's rollout.name).") = None
    mode: opt(Literal["sync", "async"], "Rollout mode (async: server-based, needed by agent loops).") = None
    n: opt(PosInt, "Responses sampled per prompt (group estimators need at least 2).") = None
    temperature: opt(NonNegFloat, "Sampling temperature.") = None
    top_p: opt(Probability, "Nucleus sampling mass.") = None
    top_k: opt(Annotated[int, Meta(ge=-1, le=_I64)], "Top-k sampling; -1 disables it.") = None
    do_sample: opt(bool, "Sample (false: greedy).") = None
    dtype: opt(Literal["bfloat16", "float16", "float32"], "Engine weight dtype.") = None
    gpu_memory_utilization: opt(Probability, "Fraction of GPU memory the engine may take.") = None
    tensor_parallel: opt(PosInt, "Rollout tensor-parallel size (one engine may span nodes).") = None
    data_parallel: opt(PosInt, "Rollout data-parallel size inside one engine.") = None
    expert_parallel: opt(PosInt, "Rollout expert-parallel size (MoE).") = None
    log_prob_micro_batch_size_per_gpu: opt(PosInt, "Sequences per GPU when recomputing old log-probs.") = None
    log_prob_micro_batch_size: opt(PosInt, "Legacy global micro-batch of the old log-prob pass.") = None
    log_prob_max_token_len_per_gpu: opt(PosInt, "Token budget per GPU for the log-prob pass with dynamic batch sizes.") = None
    log_prob_use_dynamic_bsz: opt(bool, "Dynamic batch sizes for the log-prob pass.") = None
    layered_summon: opt(bool, "Gather FSDP weights layer by layer when syncing them to the engine (saves memory).") = None
    enable_chunked_prefill: opt(bool, "Chunked prefill in the engine.") = None
    max_num_batched_tokens: opt(PosInt, "Most tokens the engine batches at once.") = None
    max_num_seqs: opt(PosInt, "Most sequences the engine runs at once.") = None
    max_model_len: opt(PosInt, "Context length the engine allocates for.") = None
    enforce_eager: opt(bool, "Disable CUDA graphs.") = None
    free_cache_engine: opt(bool, "Free the KV cache between rollouts.") = None
    load_format: opt(Text, "How the engine loads weights (e.g. \"dummy_dtensor\", \"safetensors\").") = None
    calculate_log_probs: opt(bool, "Let the engine return log-probs of what it sampled.") = None
    update_weights_bucket_megabytes: opt(PosInt, "Bucket size when pushing trained weights to the engine.") = None
    engine_kwargs: opt(Table, "Engine arguments passed whole (e.g. { vllm = { swap_space = 32 } }).") = None
    val: opt(RolloutVal, "Sampling during validation (verl's rollout.val_kwargs).") = None
    multi_turn: opt(MultiTurn, "Multi-turn rollouts, tools and interactions.") = None
    agent: opt(Agent, "Agent loops.") = None


class Critic(Section):
    strategy: opt(Literal["fsdp", "fsdp2", "megatron"], "Backend of the critic.") = None
    model_path: opt(Text, "The critic's starting checkpoint.") = None
    lr: opt(Annotated[float, Meta(gt=0.0, le=1.0)], "Critic learning rate.") = None
    lr_warmup_steps_ratio: opt(Fraction, "Share of the steps spent warming up the critic's learning rate.") = None
    weight_decay: opt(NonNegFloat, "AdamW weight decay of the critic.") = None
    ppo_mini_batch_size: opt(PosInt, "Prompts per critic update.") = None
    ppo_micro_batch_size_per_gpu: opt(PosInt, "Sequences per GPU per critic pass.") = None
    ppo_micro_batch_size: opt(PosInt, "Legacy global micro-batch of the critic.") = None
    ppo_max_token_len_per_gpu: opt(PosInt, "Token budget per GPU with dynamic batch sizes.") = None
    use_dynamic_bsz: opt(bool, "Dynamic batch sizes for the critic.") = None
    ppo_epochs: opt(PosInt, "Critic passes over each batch.") = None
    cliprange_value: opt(NonNegFloat, "Value-function clip range.") = None
    grad_clip: opt(NonNegFloat, "Gradient-norm clipping of the critic.") = None
    use_remove_padding: opt(bool, "Pack the critic's sequences without padding.") = None
    enable_gradient_checkpointing: opt(bool, "Gradient checkpointing in the critic.") = None
    param_offload: opt(bool, "Offload the critic's parameters to the CPU.") = None
    optimizer_offload: opt(bool, "Offload the critic's optimizer state to the CPU.") = None
    grad_offload: opt(bool, "Offload the critic's gradients to the CPU (Megatron).") = None
    ulysses_sequence_parallel_size: opt(PosInt, "Ulysses sequence parallelism of the critic.") = None
    megatron: opt(MegatronLayout, "Megatron layout of the critic.") = None


class Trainer(Section):
    total_epochs: opt(PosInt, "Passes over the training data (verl computes the steps).") = None
    total_steps: opt(PosInt, "Training steps; wins over total_epochs (verl's trainer.total_training_steps).") = None
    save_freq: opt(StepInt, "Save a checkpoint every N steps; -1 never.") = None
    test_freq: opt(StepInt, "Validate every N steps; -1 never.") = None
    val_before_train: opt(bool, "Validate once before the first step.") = None
    val_only: opt(bool, "Only validate, never train.") = None
    critic_warmup: opt(NonNegInt, "Steps that train only the critic.") = None
    output_dir: opt(Text, (
        "Checkpoint folder (verl's trainer.default_local_dir). Relative paths are relative to where the job runs "
        "(the folder `tutorrl run` is started in, on its embedded Ray head).")) = None
    loggers: opt(Union[Logger, Annotated[list[Logger], Meta(min_length=1)]], (
        "Trackers (verl's trainer.logger): a list, or one name as verl also accepts.")) = None
    log_val_generations: opt(NonNegInt, "Validation generations logged per validation.") = None
    resume_mode: opt(Literal["auto", "disable", "resume_path"], "Resume from the latest checkpoint, start fresh, or from resume_from.") = None
    resume_from: opt(Text, "Checkpoint to resume from with resume_mode = \"resume_path\".") = None
    max_actor_ckpt_to_keep: opt(PosInt, "Actor checkpoints kept (older ones are deleted).") = None
    max_critic_ckpt_to_keep: opt(PosInt, "Critic checkpoints kept.") = None
    balance_batch: opt(bool, "Balance sequence lengths across data-parallel ranks.") = None
    device: opt(Literal["cuda", "npu", "cpu"], "Accelerator kind.") = None
    rollout_data_dir: opt(Text, "Dump rollouts here.") = None
    validation_data_dir: opt(Text, "Dump validation generations here.") = None
    evidence_callback: opt(bool, (
        "tutorrl's checkpoint-evidence hook inside verl (verl 0.9.1+, trainer.checkpoint_callback_class); the job's "
        "Python must then import tutorrl. Unset or false: `tutorrl run` records checkpoints after the run.")) = None


class Resources(Section):
    nodes: opt(PosInt, "Machines for verl's trainer (verl's trainer.nnodes).") = None
    trainer_gpus_per_node: opt(PosInt, "GPUs per machine for verl's trainer and rollout (verl's trainer.n_gpus_per_node).") = None
    reward_gpus: opt(NonNegInt, (
        "GPUs kept out of verl's pool for the reward (e.g. a reward model of a plug-in); tutorrl's preflight counts them.")) = None


class RewardModel(Section):
    enable: opt(bool, "Score responses with a reward model.") = None
    path: opt(Text, "The reward model's checkpoint.") = None
    micro_batch_size_per_gpu: opt(PosInt, "Sequences per GPU per reward-model pass.") = None
    use_dynamic_bsz: opt(bool, "Dynamic batch sizes for the reward model.") = None
    max_length: opt(PosInt, "Longest sequence the reward model scores.") = None
    param_offload: opt(bool, "Offload the reward model's parameters to the CPU.") = None
    use_remove_padding: opt(bool, "Pack the reward model's sequences without padding.") = None
    use_reward_loop: opt(bool, "Score through verl 0.7.0's reward loop (0.7.1 always does).") = None


class Reward(Section):
    module: opt(Annotated[str, Meta(pattern=_MODULE)], (
        "Installed Python module exporting the reward function (a dotted name such as \"my_rewards.gsm8k\"). "
        "Unset (and no path): verl's default reward for the data source.")) = None
    path: opt(Text, "A Python file exporting the reward function (verl's custom_reward_function.path as a file).") = None
    function: opt(Annotated[str, Meta(pattern=_IDENT)], "Name of the reward function.") = None
    kwargs: opt(Table, "Keyword arguments passed to the reward function, verbatim.") = None
    workers: opt(PosInt, "Reward workers (verl's reward.num_workers).") = None
    manager: opt(Text, "Reward manager, e.g. \"naive\", \"dapo\", \"prime\", \"batch\".") = None
    manager_kwargs: opt(Table, "Arguments of the reward manager (e.g. DAPO's overlong_buffer_cfg).") = None
    launch_reward_fn_async: opt(bool, "Compute rewards asynchronously with the next rollout (verl before 0.7.1).") = None
    model: opt(RewardModel, "A reward model.") = None
    plugin: opt(Annotated[str, Meta(pattern=_NAME)], (
        "A reward plug-in (Python entry point in group tutorrl.rewards) that fills module, function, kwargs "
        "and more from its own [reward.options].")) = None
    options: opt(dict[str, Any], "Options of the reward plug-in, checked against the plug-in's own schema.") = None


class Env(Section):
    set: Annotated[dict[Annotated[str, Meta(pattern=_ENV_NAME)], str], Meta(description=(
        "Environment the job (and verl's Ray workers) see, as literal values. Never secrets: pass those through."))] = field(
        default_factory=dict)
    passthrough: Annotated[list[Annotated[str, Meta(pattern=_ENV_NAME)]], Meta(description=(
        "Names whose values are read from the submitter's environment at run time and never written (API keys, tokens)."))] = field(
        default_factory=list)
    allow: Annotated[list[Annotated[str, Meta(pattern=_ENV_NAME)]], Meta(description=(
        "Variables that change which program or code the launch runs (PATH, PYTHONPATH, LD_PRELOAD, BASH_ENV, ...) "
        "that this spec sets or passes through on purpose; without a name here, setting one is refused."))] = field(
        default_factory=list)


class Root(Section):
    default: opt(Text, (
        "Value used where the job's environment does not set the root (e.g. \"data\" on a laptop, relative to "
        "where the job runs); unset: the root must be set there.")) = None


class Verl(Section):
    extra_overrides: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(description=(
        "Raw Hydra overrides for what the spec has no field for, appended last; each key is still checked against the release."))] = field(
        default_factory=list)


class Evidence(Section):
    on_failure: opt(Literal["record", "stop"], (
        "What a failed checkpoint-evidence check (files or publication) does during the run (needs "
        "trainer.evidence_callback = true): \"record\" (unset) records the failure, training goes on, and `tutorrl "
        "run` exits 4 after a successful job; \"stop\" stops training at the save that finds it (the job fails; "
        "`tutorrl run` exits 5).")) = None
    publication_control: opt(bool, (
        "With trainer.evidence_callback: after each checkpoint is published, snapshot the rollout engines, reset every "
        "served tensor to random values, republish and compare (sglang's /weights_checker), proving the check can see a "
        "change. It perturbs the engines and costs a second push; unset or false: off.")) = None


class Spec(Section):
    """One experiment."""

    experiment: Annotated[Experiment, Meta(description="What this run is called and which verl release it targets.")]
    data: Annotated[Data, Meta(description="Prompt data and batch sizes.")] = field(default_factory=Data)
    model: Annotated[Model, Meta(description="The policy model.")] = field(default_factory=Model)
    algorithm: Annotated[Algorithm, Meta(description="Advantage estimation and the in-reward KL.")] = field(
        default_factory=Algorithm)
    actor: Annotated[Actor, Meta(description="The policy update: backend, optimiser, batches, losses, offload.")] = field(
        default_factory=Actor)
    ref: Annotated[Ref, Meta(description="The reference policy's log-prob pass.")] = field(default_factory=Ref)
    rollout: Annotated[Rollout, Meta(description="How responses are sampled, and the engine that samples them.")] = field(
        default_factory=Rollout)
    critic: Annotated[Critic, Meta(description="The critic (PPO with GAE).")] = field(default_factory=Critic)
    trainer: Annotated[Trainer, Meta(description="Length, checkpoints, validation, logging and resumption.")] = field(
        default_factory=Trainer)
    resources: Annotated[Resources, Meta(description="Machines and GPUs.")] = field(default_factory=Resources)
    reward: Annotated[Reward, Meta(description="Where the reward comes from.")] = field(default_factory=Reward)
    env: Annotated[Env, Meta(description="Environment of the job and of verl's Ray workers.")] = field(default_factory=Env)
    verl: Annotated[Verl, Meta(description="Escape hatch: raw overrides, still checked against the release.")] = field(
        default_factory=Verl)
    evidence: Annotated[Evidence, Meta(description="tutorrl's checkpoint evidence inside the run (not verl settings).")] = field(
        default_factory=Evidence)
    roots: Annotated[dict[Annotated[str, Meta(pattern=_ENV_NAME)], Root], Meta(description=(
        "Folders named by an environment variable of the job, e.g. DATA_ROOT = { default = \"data\" }. A path "
        "setting written \"$DATA_ROOT/gsm8k/train.parquet\" keeps the name in the bundle; launch.sh puts the "
        "job's value in at start, so one bundle runs on a laptop and on a cluster."))] = field(default_factory=dict)


def to_builtins(spec: Struct) -> dict:
    """The spec as plain data: unset (``None``) fields and sections with nothing set left out.

    Tables keep every entry, empty ones included: an empty table entry is a
    value verl receives (``+key={}``), so the bundle's spec.toml must say it.
    """
    out = {}
    for name in spec.__struct_fields__:
        value = getattr(spec, name)
        if value is None:
            continue
        if isinstance(value, Struct):
            value = to_builtins(value)
            if not value:
                continue
        else:
            value = msgspec.to_builtins(value)
            if isinstance(value, (dict, list)) and not value and name in ("set", "passthrough", "allow", "extra_overrides", "roots"):
                continue
        out[name] = value
    return out


def get_field(spec: Struct, path: str):
    """The value at a dotted field path, or ``None`` where a section is unset."""
    value: Any = spec
    for part in path.split("."):
        if value is None:
            return None
        value = getattr(value, part)
    return value
