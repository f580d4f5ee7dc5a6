"""The experiment spec: one TOML file per experiment, as msgspec structs.

The spec speaks verl's own vocabulary, grouped in sections people review
(`[data]`, `[actor]`, `[rollout]`, `[critic]`, `[reward]`, ...). Each field is
documented where it is declared, by the string beneath it; ``tutorrl schema``
reads those strings from this source (:mod:`tutorrl.review.fielddocs`) into
the JSON Schema it emits. They are not ``Meta(description=...)``: a bare string
in a class body costs nothing at import, where ~220 ``Annotated`` descriptions
cost every ``tutorrl compile`` milliseconds it has not got.

One promise shapes every field: **a launch is exactly what the spec says.**
Every verl setting is optional (``X | None = None``) and ``None`` means *not
set*: nothing is emitted and verl's own default for the target release applies (the bundle's
``spec.toml`` states that default, read from the release's key set). Only the
target release is required. Where a field writes a dict that verl reads whole
(Megatron's transformer-config overrides, reward keyword arguments, engine
kwargs), it is a *table*: each entry becomes one verl key.

Which verl key each field is written to, per release, is data:
``keymap/verl.toml``. A field's dotted path here is its setting name there.
Team-specific reward logic is a plug-in (:mod:`tutorrl.compiler.spec.rewards`),
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
PosInt = Annotated[int, Meta(ge=1, le=_I64)]
NonNegInt = Annotated[int, Meta(ge=0, le=_I64)]
# Steps/frequencies where verl uses -1 for "never" or "all".
StepInt = Annotated[int, Meta(ge=-1, le=_I64)]
# Bounded both ways so that inf and nan (valid TOML) are refused: verl and
# Hydra cannot take them back.
Float = Annotated[float, Meta(ge=-1e300, le=1e300)]
NonNegFloat = Annotated[float, Meta(ge=0.0, le=1e300)]
Fraction = Annotated[float, Meta(ge=0.0, le=1.0)]
Probability = Annotated[float, Meta(gt=0.0, le=1.0)]
Text = Annotated[str, Meta(min_length=1)]
# A dict verl reads whole; nested tables become dotted keys.
Table = dict[Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_\-]*\Z")], Any]
Files = Union[Text, Annotated[list[Text], Meta(min_length=1)]]


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


class Recipe(Section):
    """The code of a recipe entry point (one outside verl's wheel, such as dapo), pinned into the bundle."""

    path: Text
    """The recipe's package folder, named as the module's first part (`recipe` for recipe.dapo.main_dapo); launch.sh
    puts the folder above it on PYTHONPATH. For an entry whose package is a folder inside the checkout (rep_exp), the
    checkout itself, any name, which launch.sh puts on PYTHONPATH. Relative to where tutorrl runs, as data paths are;
    may start with a root ($RECIPE_ROOT/recipe)."""
    git: Text | None = None
    """The repository it was cloned from (recorded, never fetched)."""
    commit: Annotated[str, Meta(pattern=r"^[0-9a-f]{40}\Z")] | None = None
    """The commit the folder must be checked out at, with nothing changed: compile refuses another HEAD or a dirty
    tree."""
    digest: Annotated[str, Meta(pattern=r"^sha256:[0-9a-f]{64}\Z")] | None = None
    """Written by the compiler: the sha256 of the folder's files (`files`). launch.sh and `tutorrl verify` re-hash
    the folder and refuse other code."""
    files: dict[Text, Annotated[str, Meta(pattern=r"^[0-9a-f]{64}\Z")]] = {}
    """Written by the compiler: each file's sha256 by its path in the folder, so a change is named."""


class Experiment(Section):
    verl: Annotated[str, Meta(pattern=_RELEASE)]
    """Target verl release, e.g. "0.9.1". Selects the key map; launch.sh refuses any other installed release."""
    name: Annotated[str, Meta(pattern=_NAME, max_length=128)] | None = None
    """Experiment name (verl's trainer.experiment_name); also names the bundle in listings."""
    project: Annotated[str, Meta(pattern=_NAME, max_length=128)] | None = None
    """Project name (verl's trainer.project_name, the tracker project)."""
    config_name: Annotated[str, Meta(pattern=_NAME)] | None = None
    """Another trainer config to compose (verl's --config-name), e.g. a multi-turn config of your own. Unset: verl's
    ppo_trainer (or its Megatron config with actor.strategy = "megatron")."""
    config_path: Text | None = None
    """Folder holding config_name (verl's --config-path), relative to where the job runs; ship it with the job. Keys
    are still checked against the release's own trainer config."""
    entry: Annotated[str, Meta(pattern=_MODULE)] | None = None
    """The verl entry point launch.sh starts: a known name ("fully_async", "one_step_off") or its module. Unset:
    "ppo", verl.trainer.main_ppo. Keys are checked against that entry's own config at the target release."""
    recipe: Recipe | None = None
    """Where a recipe entry point's code is (dapo); its files' digest is pinned into the bundle."""


class Data(Section):
    train: Files | None = None
    """Training data: a parquet file, or a list of files (verl's data.train_files)."""
    val: Files | None = None
    """Validation data: a file or a list of files (verl's data.val_files)."""
    prompt_key: Text | None = None
    """Column holding the prompt."""
    train_batch_size: PosInt | None = None
    """Prompts per training step."""
    val_batch_size: PosInt | None = None
    """Prompts per validation batch (unset: the whole set at once)."""
    max_prompt_length: PosInt | None = None
    """Longest prompt in tokens."""
    max_response_length: PosInt | None = None
    """Longest generated response in tokens."""
    truncation: Literal["error", "left", "right", "middle"] | None = None
    """What to do with a prompt over max_prompt_length."""
    filter_overlong_prompts: bool | None = None
    """Drop prompts longer than max_prompt_length before training."""
    filter_overlong_prompts_workers: PosInt | None = None
    """Processes used to filter overlong prompts."""
    return_raw_chat: bool | None = None
    """Hand the raw chat to the rollout (needed by multi-turn and agent loops)."""
    return_full_prompt: bool | None = None
    """Also return the prompt with its chat template applied."""
    shuffle: bool | None = None
    """Shuffle the training data."""
    seed: NonNegInt | None = None
    """Seed of the data sampler."""
    dataloader_num_workers: NonNegInt | None = None
    """Data loader worker processes."""
    image_key: Text | None = None
    """Column holding images (vision-language data)."""
    trust_remote_code: bool | None = None
    """Let the tokenizer/processor run code from the model repository."""


class Lora(Section):
    rank: NonNegInt | None = None
    """LoRA rank; 0 trains the full model."""
    alpha: PosInt | None = None
    """LoRA alpha (scaling numerator)."""
    target_modules: Union[str, list[Text]] | None = None
    """Modules that get adapters: "all-linear" or a list of module names."""


class Model(Section):
    path: Text | None = None
    """The policy's starting checkpoint (a Hugging Face model folder or hub id)."""
    attn_implementation: Literal["flash_attention_2", "sdpa", "eager"] | None = None
    """Attention kernel, written into the model's override_config; "sdpa" for machines without flash-attn."""
    use_remove_padding: bool | None = None
    """Pack sequences without padding (needs flash-attn)."""
    enable_gradient_checkpointing: bool | None = None
    """Recompute activations in the backward pass to save memory."""
    enable_activation_offload: bool | None = None
    """Offload activations to the CPU."""
    use_fused_kernels: bool | None = None
    """Use verl's fused log-prob/entropy kernels."""
    use_shm: bool | None = None
    """Load the model through shared memory."""
    trust_remote_code: bool | None = None
    """Let the model repository run its own code."""
    external_lib: Text | None = None
    """A Python module imported before the model is built (custom architectures)."""
    override_config: Table | None = None
    """Entries merged into the Hugging Face model config (verl's model.override_config)."""
    lora: Lora | None = None
    """LoRA adapter on the policy."""


class KlCtrl(Section):
    type: Literal["fixed", "adaptive"] | None = None
    """KL controller of the in-reward KL penalty."""
    kl_coef: NonNegFloat | None = None
    """Initial KL coefficient of the in-reward penalty."""
    target_kl: NonNegFloat | None = None
    """Target KL of the adaptive controller."""
    horizon: PosInt | None = None
    """Horizon of the adaptive controller."""


class Algorithm(Section):
    adv_estimator: AdvEstimator | None = None
    """Advantage estimator."""
    use_kl_in_reward: bool | None = None
    """Apply the KL penalty inside the reward."""
    gamma: Fraction | None = None
    """Discount factor."""
    lam: Fraction | None = None
    """GAE lambda."""
    norm_adv_by_std_in_grpo: bool | None = None
    """Divide GRPO advantages by the group's standard deviation."""
    kl_ctrl: KlCtrl | None = None
    """The in-reward KL controller."""


class MegatronLayout(Section):
    tensor_parallel: PosInt | None = None
    """Megatron tensor-parallel size."""
    pipeline_parallel: PosInt | None = None
    """Megatron pipeline-parallel size."""
    virtual_pipeline: PosInt | None = None
    """Virtual pipeline stages per pipeline rank (interleaved schedule)."""
    context_parallel: PosInt | None = None
    """Megatron context-parallel size."""
    expert_parallel: PosInt | None = None
    """Expert-parallel size (MoE models)."""
    expert_tensor_parallel: PosInt | None = None
    """Tensor parallelism inside each expert (MoE); unset: Megatron uses tensor_parallel."""
    sequence_parallel: bool | None = None
    """Megatron sequence parallelism (with tensor parallelism)."""
    use_dist_checkpointing: bool | None = None
    """Load weights from a Megatron distributed checkpoint."""
    dist_checkpointing_path: Text | None = None
    """Where that distributed checkpoint is."""
    use_mbridge: bool | None = None
    """Build the Megatron model through mbridge (Hugging Face <-> Megatron weights)."""
    transformer_overrides: Table | None = None
    """Entries passed whole into Megatron's TransformerConfig (verl's override_transformer_config), e.g. MoE routing,
    fusions, recomputation."""


class Actor(Section):
    strategy: Literal["fsdp", "fsdp2", "megatron"] | None = None
    """Training backend. "megatron" selects verl's Megatron config and allows [actor.megatron]; unset: FSDP."""
    lr: Annotated[float, Meta(gt=0.0, le=1.0)] | None = None
    """Actor learning rate."""
    lr_warmup_steps_ratio: Fraction | None = None
    """Share of the steps spent warming up the learning rate."""
    lr_warmup_steps: StepInt | None = None
    """Warm-up steps (-1: use lr_warmup_steps_ratio)."""
    warmup_style: Literal["constant", "cosine"] | None = None
    """Learning-rate schedule after warm-up."""
    weight_decay: NonNegFloat | None = None
    """AdamW weight decay."""
    ppo_mini_batch_size: PosInt | None = None
    """Prompts per PPO update; divides data.train_batch_size."""
    ppo_micro_batch_size_per_gpu: PosInt | None = None
    """Sequences per GPU per forward/backward pass."""
    ppo_micro_batch_size: PosInt | None = None
    """Legacy global micro-batch (verl divides it by the GPUs); prefer the per-GPU field."""
    use_dynamic_bsz: bool | None = None
    """Pack micro-batches by token count instead of sequence count."""
    ppo_max_token_len_per_gpu: PosInt | None = None
    """Token budget per GPU per micro-batch with dynamic batch sizes."""
    ppo_epochs: PosInt | None = None
    """Passes over each batch."""
    use_kl_loss: bool | None = None
    """Add a KL loss against the reference policy (GRPO-style)."""
    kl_loss_type: KlType | None = None
    """KL estimator of the KL loss."""
    kl_loss_coef: NonNegFloat | None = None
    """Weight of the KL loss."""
    entropy_coeff: Float | None = None
    """Entropy bonus weight."""
    clip_ratio: NonNegFloat | None = None
    """PPO clip range."""
    clip_ratio_low: NonNegFloat | None = None
    """Lower clip range (DAPO's clip-higher)."""
    clip_ratio_high: NonNegFloat | None = None
    """Upper clip range (DAPO's clip-higher)."""
    clip_ratio_c: NonNegFloat | None = None
    """Dual-clip constant."""
    loss_agg_mode: LossAgg | None = None
    """How token losses are aggregated."""
    policy_loss: Text | None = None
    """Policy loss function (verl's policy_loss.loss_mode), e.g. "vanilla", "gspo"."""
    grad_clip: NonNegFloat | None = None
    """Gradient-norm clipping."""
    ulysses_sequence_parallel_size: PosInt | None = None
    """Ulysses sequence parallelism (FSDP)."""
    param_offload: bool | None = None
    """Offload parameters to the CPU (FSDP's fsdp_config, or Megatron's)."""
    optimizer_offload: bool | None = None
    """Offload optimizer state to the CPU (FSDP's fsdp_config, or Megatron's)."""
    grad_offload: bool | None = None
    """Offload gradients to the CPU (Megatron)."""
    use_torch_compile: bool | None = None
    """torch.compile the actor's loss and log-prob computations."""
    fsdp_size: Annotated[int, Meta(ge=-1, le=_I64)] | None = None
    """FSDP shard group size (-1: all GPUs)."""
    mixed_precision: Table | None = None
    """FSDP mixed precision (param_dtype, reduce_dtype, buffer_dtype), read whole by verl."""
    megatron: MegatronLayout | None = None
    """Megatron parallel layout of the actor; only with strategy = "megatron"."""


class Ref(Section):
    strategy: Literal["fsdp", "fsdp2"] | None = None
    """Backend of the reference policy (FSDP runs)."""
    log_prob_micro_batch_size_per_gpu: PosInt | None = None
    """Sequences per GPU per reference log-prob pass."""
    log_prob_micro_batch_size: PosInt | None = None
    """Legacy global micro-batch of the reference pass."""
    log_prob_max_token_len_per_gpu: PosInt | None = None
    """Token budget per GPU with dynamic batch sizes."""
    log_prob_use_dynamic_bsz: bool | None = None
    """Dynamic batch sizes for the reference pass."""
    param_offload: bool | None = None
    """Offload the reference model's parameters to the CPU."""
    ulysses_sequence_parallel_size: PosInt | None = None
    """Ulysses sequence parallelism of the reference pass."""
    use_torch_compile: bool | None = None
    """torch.compile the reference pass."""
    megatron: MegatronLayout | None = None
    """Megatron layout of the reference model (Megatron runs)."""


class RolloutVal(Section):
    temperature: NonNegFloat | None = None
    """Sampling temperature during validation."""
    top_p: Probability | None = None
    """Nucleus mass during validation."""
    top_k: Annotated[int, Meta(ge=-1, le=_I64)] | None = None
    """Top-k during validation; -1 disables it."""
    n: PosInt | None = None
    """Responses per validation prompt."""
    do_sample: bool | None = None
    """Sample during validation (false: greedy)."""


class MultiTurn(Section):
    enable: bool | None = None
    """Multi-turn rollouts with tools or interactions."""
    max_assistant_turns: PosInt | None = None
    """Most assistant turns per conversation."""
    max_user_turns: PosInt | None = None
    """Most user turns per conversation."""
    tool_config_path: Text | None = None
    """Tool configuration file."""
    interaction_config_path: Text | None = None
    """Interaction configuration file."""
    format: Text | None = None
    """Chat format of tool calls, e.g. "hermes"."""


class Agent(Section):
    num_workers: PosInt | None = None
    """Agent-loop workers."""
    default_agent_loop: Text | None = None
    """Agent loop used when a sample names none."""
    agent_loop_config_path: Text | None = None
    """Agent-loop configuration file."""


class Rollout(Section):
    engine: Literal["sglang", "vllm", "hf"] | None = None
    """Rollout engine (verl's rollout.name)."""
    mode: Literal["sync", "async"] | None = None
    """Rollout mode (async: server-based, needed by agent loops)."""
    n: PosInt | None = None
    """Responses sampled per prompt (group estimators need at least 2)."""
    temperature: NonNegFloat | None = None
    """Sampling temperature."""
    top_p: Probability | None = None
    """Nucleus sampling mass."""
    top_k: Annotated[int, Meta(ge=-1, le=_I64)] | None = None
    """Top-k sampling; -1 disables it."""
    do_sample: bool | None = None
    """Sample (false: greedy)."""
    dtype: Literal["bfloat16", "float16", "float32"] | None = None
    """Engine weight dtype."""
    gpu_memory_utilization: Probability | None = None
    """Fraction of GPU memory the engine may take."""
    tensor_parallel: PosInt | None = None
    """Rollout tensor-parallel size (one engine may span nodes)."""
    data_parallel: PosInt | None = None
    """Rollout data-parallel size inside one engine."""
    expert_parallel: PosInt | None = None
    """Rollout expert-parallel size (MoE)."""
    log_prob_micro_batch_size_per_gpu: PosInt | None = None
    """Sequences per GPU when recomputing old log-probs."""
    log_prob_micro_batch_size: PosInt | None = None
    """Legacy global micro-batch of the old log-prob pass."""
    log_prob_max_token_len_per_gpu: PosInt | None = None
    """Token budget per GPU for the log-prob pass with dynamic batch sizes."""
    log_prob_use_dynamic_bsz: bool | None = None
    """Dynamic batch sizes for the log-prob pass."""
    layered_summon: bool | None = None
    """Gather FSDP weights layer by layer when syncing them to the engine (saves memory)."""
    enable_chunked_prefill: bool | None = None
    """Chunked prefill in the engine."""
    max_num_batched_tokens: PosInt | None = None
    """Most tokens the engine batches at once."""
    max_num_seqs: PosInt | None = None
    """Most sequences the engine runs at once."""
    max_model_len: PosInt | None = None
    """Context length the engine allocates for."""
    enforce_eager: bool | None = None
    """Disable CUDA graphs."""
    free_cache_engine: bool | None = None
    """Free the KV cache between rollouts."""
    load_format: Text | None = None
    """How the engine loads weights (e.g. "dummy_dtensor", "safetensors")."""
    calculate_log_probs: bool | None = None
    """Let the engine return log-probs of what it sampled."""
    update_weights_bucket_megabytes: PosInt | None = None
    """Bucket size when pushing trained weights to the engine."""
    engine_kwargs: Table | None = None
    """Engine arguments passed whole (e.g. { vllm = { swap_space = 32 } })."""
    val: RolloutVal | None = None
    """Sampling during validation (verl's rollout.val_kwargs)."""
    multi_turn: MultiTurn | None = None
    """Multi-turn rollouts, tools and interactions."""
    agent: Agent | None = None
    """Agent loops."""


class Critic(Section):
    strategy: Literal["fsdp", "fsdp2", "megatron"] | None = None
    """Backend of the critic."""
    model_path: Text | None = None
    """The critic's starting checkpoint."""
    lr: Annotated[float, Meta(gt=0.0, le=1.0)] | None = None
    """Critic learning rate."""
    lr_warmup_steps_ratio: Fraction | None = None
    """Share of the steps spent warming up the critic's learning rate."""
    weight_decay: NonNegFloat | None = None
    """AdamW weight decay of the critic."""
    ppo_mini_batch_size: PosInt | None = None
    """Prompts per critic update."""
    ppo_micro_batch_size_per_gpu: PosInt | None = None
    """Sequences per GPU per critic pass."""
    ppo_micro_batch_size: PosInt | None = None
    """Legacy global micro-batch of the critic."""
    ppo_max_token_len_per_gpu: PosInt | None = None
    """Token budget per GPU with dynamic batch sizes."""
    use_dynamic_bsz: bool | None = None
    """Dynamic batch sizes for the critic."""
    ppo_epochs: PosInt | None = None
    """Critic passes over each batch."""
    cliprange_value: NonNegFloat | None = None
    """Value-function clip range."""
    grad_clip: NonNegFloat | None = None
    """Gradient-norm clipping of the critic."""
    use_remove_padding: bool | None = None
    """Pack the critic's sequences without padding."""
    enable_gradient_checkpointing: bool | None = None
    """Gradient checkpointing in the critic."""
    param_offload: bool | None = None
    """Offload the critic's parameters to the CPU."""
    optimizer_offload: bool | None = None
    """Offload the critic's optimizer state to the CPU."""
    grad_offload: bool | None = None
    """Offload the critic's gradients to the CPU (Megatron)."""
    ulysses_sequence_parallel_size: PosInt | None = None
    """Ulysses sequence parallelism of the critic."""
    megatron: MegatronLayout | None = None
    """Megatron layout of the critic."""


class Trainer(Section):
    total_epochs: PosInt | None = None
    """Passes over the training data (verl computes the steps)."""
    total_steps: PosInt | None = None
    """Training steps; wins over total_epochs (verl's trainer.total_training_steps)."""
    save_freq: StepInt | None = None
    """Save a checkpoint every N steps; -1 never."""
    test_freq: StepInt | None = None
    """Validate every N steps; -1 never."""
    val_before_train: bool | None = None
    """Validate once before the first step."""
    val_only: bool | None = None
    """Only validate, never train."""
    critic_warmup: NonNegInt | None = None
    """Steps that train only the critic."""
    output_dir: Text | None = None
    """Checkpoint folder (verl's trainer.default_local_dir). Relative paths are relative to where the job runs (the
    folder `tutorrl run` is started in, on its embedded Ray head)."""
    loggers: Union[Logger, Annotated[list[Logger], Meta(min_length=1)]] | None = None
    """Trackers (verl's trainer.logger): a list, or one name as verl also accepts."""
    log_val_generations: NonNegInt | None = None
    """Validation generations logged per validation."""
    resume_mode: Literal["auto", "disable", "resume_path"] | None = None
    """Resume from the latest checkpoint, start fresh, or from resume_from."""
    resume_from: Text | None = None
    """Checkpoint to resume from with resume_mode = "resume_path"."""
    max_actor_ckpt_to_keep: PosInt | None = None
    """Actor checkpoints kept (older ones are deleted)."""
    max_critic_ckpt_to_keep: PosInt | None = None
    """Critic checkpoints kept."""
    balance_batch: bool | None = None
    """Balance sequence lengths across data-parallel ranks."""
    device: Literal["cuda", "npu", "cpu"] | None = None
    """Accelerator kind."""
    rollout_data_dir: Text | None = None
    """Dump rollouts here."""
    validation_data_dir: Text | None = None
    """Dump validation generations here."""
    evidence_callback: bool | None = None
    """tutorrl's checkpoint-evidence hook inside verl (verl 0.9.1+, trainer.checkpoint_callback_class); the job's
    Python must then import tutorrl. Unset or false: `tutorrl run` records checkpoints after the run."""


class Resources(Section):
    nodes: PosInt | None = None
    """Machines for verl's trainer (verl's trainer.nnodes)."""
    trainer_gpus_per_node: PosInt | None = None
    """GPUs per machine for verl's trainer and rollout (verl's trainer.n_gpus_per_node)."""
    reward_gpus: NonNegInt | None = None
    """GPUs kept out of verl's pool for the reward (e.g. a reward model of a plug-in); tutorrl's preflight counts them."""


class RewardModel(Section):
    enable: bool | None = None
    """Score responses with a reward model."""
    path: Text | None = None
    """The reward model's checkpoint."""
    micro_batch_size_per_gpu: PosInt | None = None
    """Sequences per GPU per reward-model pass."""
    use_dynamic_bsz: bool | None = None
    """Dynamic batch sizes for the reward model."""
    max_length: PosInt | None = None
    """Longest sequence the reward model scores."""
    param_offload: bool | None = None
    """Offload the reward model's parameters to the CPU."""
    use_remove_padding: bool | None = None
    """Pack the reward model's sequences without padding."""
    use_reward_loop: bool | None = None
    """Score through verl 0.7.0's reward loop (0.7.1 always does)."""


class Reward(Section):
    module: Annotated[str, Meta(pattern=_MODULE)] | None = None
    """Installed Python module exporting the reward function (a dotted name such as "my_rewards.gsm8k"). Unset (and no
    path): verl's default reward for the data source."""
    path: Text | None = None
    """A Python file exporting the reward function (verl's custom_reward_function.path as a file)."""
    function: Annotated[str, Meta(pattern=_IDENT)] | None = None
    """Name of the reward function."""
    kwargs: Table | None = None
    """Keyword arguments passed to the reward function, verbatim."""
    workers: PosInt | None = None
    """Reward workers (verl's reward.num_workers)."""
    manager: Text | None = None
    """Reward manager, e.g. "naive", "dapo", "prime", "batch"."""
    manager_kwargs: Table | None = None
    """Arguments of the reward manager (e.g. DAPO's overlong_buffer_cfg)."""
    launch_reward_fn_async: bool | None = None
    """Compute rewards asynchronously with the next rollout (verl before 0.7.1)."""
    model: RewardModel | None = None
    """A reward model."""
    plugin: Annotated[str, Meta(pattern=_NAME)] | None = None
    """A reward plug-in (Python entry point in group tutorrl.rewards) that fills module, function, kwargs and more from
    its own [reward.options]."""
    options: dict[str, Any] | None = None
    """Options of the reward plug-in, checked against the plug-in's own schema."""


class Env(Section):
    set: dict[Annotated[str, Meta(pattern=_ENV_NAME)], str] = field(default_factory=dict)
    """Environment the job (and verl's Ray workers) see, as literal values. Never secrets: pass those through."""
    passthrough: list[Annotated[str, Meta(pattern=_ENV_NAME)]] = field(default_factory=list)
    """Names whose values are read from the submitter's environment at run time and never written (API keys, tokens)."""
    allow: list[Annotated[str, Meta(pattern=_ENV_NAME)]] = field(default_factory=list)
    """Variables that change which program or code the launch runs (PATH, PYTHONPATH, LD_PRELOAD, BASH_ENV, ...) that
    this spec sets or passes through on purpose; without a name here, setting one is refused."""


class Root(Section):
    default: Text | None = None
    """Value used where the job's environment does not set the root (e.g. "data" on a laptop, relative to where the job
    runs); unset: the root must be set there."""


class Verl(Section):
    extra_overrides: list[Annotated[str, Meta(min_length=1)]] = field(default_factory=list)
    """Raw Hydra overrides for what the spec has no field for, appended last; each key is still checked against the
    release."""
    unread_overrides: list[Annotated[str, Meta(min_length=1)]] = field(default_factory=list)
    """Raw Hydra overrides the target release accepts and never reads, passed as written after extra_overrides: for a
    fork of verl that does read them (a research repository's own trainer), or to launch exactly what a script did.
    Each must compose and must be unread by the release: one verl reads belongs in extra_overrides (or its spec
    field), and one verl would stop on (a field its dataclass lacks) is refused here too. `tutorrl import` puts
    the settings a script sets and the release never reads here, so its launch stays the script's."""
    allow_runtime_env: list[Annotated[str, Meta(pattern=r"^(?!env_vars$)[A-Za-z_][A-Za-z0-9_]*$")]] = field(
        default_factory=list)
    """Keys of Ray's runtime_env other than env_vars (working_dir, py_modules, pip, py_executable,
    worker_process_setup_hook, ...) that this spec's raw overrides set on purpose: each runs or installs code in every
    Ray worker of the job, so a raw override under runtime_env is refused unless its key is named here."""
    allow_worker_code: list[Annotated[str, Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")]] = field(default_factory=list)
    """Keys whose value names code verl imports in its workers (checkpoint_engine.custom_backend_module: the module
    every worker that syncs weights imports) that this spec's raw overrides set on purpose; such an override is
    refused unless its key, as that, is named here."""


class Evidence(Section):
    on_failure: Literal["record", "stop"] | None = None
    """What a failed checkpoint-evidence check (files or publication) does during the run (needs
    trainer.evidence_callback = true): "record" (unset) records the failure, training goes on, and `tutorrl run`
    exits 4 after a successful job; "stop" stops training at the save that finds it (the job fails; `tutorrl run`
    exits 5)."""
    publication_control: bool | None = None
    """With trainer.evidence_callback: after each checkpoint is published, snapshot the rollout engines, reset every
    served tensor to random values, republish and compare (sglang's /weights_checker), proving the check can see a
    change. It perturbs the engines and costs a second push; unset or false: off."""


class Run(Section):
    retries: Annotated[int, Meta(ge=0, le=100)] | None = None
    """`tutorrl run` submits a failed or preempted job again up to this many times, resuming from the newest
    checkpoint whose evidence verifies (the command line's --retries wins). Needs trainer.resume_mode and
    resume_from unset, and trainer.output_dir set."""
    retry_backoff_s: Annotated[float, Meta(ge=0, le=600)] | None = None
    """Seconds before the first resubmission, doubled for each next (--retry-backoff wins)."""


class Spec(Section):
    """One experiment."""

    experiment: Experiment
    """What this run is called and which verl release it targets."""
    data: Data = field(default_factory=Data)
    """Prompt data and batch sizes."""
    model: Model = field(default_factory=Model)
    """The policy model."""
    algorithm: Algorithm = field(default_factory=Algorithm)
    """Advantage estimation and the in-reward KL."""
    actor: Actor = field(default_factory=Actor)
    """The policy update: backend, optimiser, batches, losses, offload."""
    ref: Ref = field(default_factory=Ref)
    """The reference policy's log-prob pass."""
    rollout: Rollout = field(default_factory=Rollout)
    """How responses are sampled, and the engine that samples them."""
    critic: Critic = field(default_factory=Critic)
    """The critic (PPO with GAE)."""
    trainer: Trainer = field(default_factory=Trainer)
    """Length, checkpoints, validation, logging and resumption."""
    resources: Resources = field(default_factory=Resources)
    """Machines and GPUs."""
    reward: Reward = field(default_factory=Reward)
    """Where the reward comes from."""
    env: Env = field(default_factory=Env)
    """Environment of the job and of verl's Ray workers."""
    verl: Verl = field(default_factory=Verl)
    """Escape hatch: raw overrides, still checked against the release."""
    evidence: Evidence = field(default_factory=Evidence)
    """tutorrl's checkpoint evidence inside the run (not verl settings)."""
    run: Run = field(default_factory=Run)
    """How `tutorrl run` runs the bundle: retries after a failure (not verl settings)."""
    roots: dict[Annotated[str, Meta(pattern=_ENV_NAME)], Root] = field(default_factory=dict)
    """Folders named by an environment variable of the job, e.g. DATA_ROOT = { default = "data" }. A path setting
    written "$DATA_ROOT/gsm8k/train.parquet" keeps the name in the bundle; launch.sh puts the job's value in at
    start, so one bundle runs on a laptop and on a cluster."""


_SCALARS = frozenset((str, int, float, bool))


def to_builtins(spec: Struct) -> dict[str, Any]:
    """The spec as plain data: unset (``None``) fields and sections with nothing set left out.

    Tables keep every entry, empty ones included: an empty table entry is a
    value verl receives (``+key={}``), so the bundle's spec.toml must say it.
    """
    out: dict[str, Any] = {}
    for name in spec.__struct_fields__:
        value = getattr(spec, name)
        if value is None:
            continue
        if isinstance(value, Struct):
            value = to_builtins(value)
            if not value:
                continue
        elif type(value) not in _SCALARS:  # a scalar is its own builtin: no call into msgspec
            value = msgspec.to_builtins(value)
            if isinstance(value, (dict, list)) and not value and name in ("set", "passthrough", "allow", "extra_overrides", "unread_overrides",
                                                                           "allow_runtime_env", "allow_worker_code", "roots"):
                continue
        out[name] = value
    return out


def get_field(spec: Struct, path: str) -> Any:
    """The value at a dotted field path, or ``None`` where a section is unset."""
    value: Any = spec
    for part in path.split("."):
        if value is None:
            return None
        value = getattr(value, part)
    return value
