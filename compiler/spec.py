"""The experiment spec: one TOML file per experiment, as msgspec structs.

Each field is documented where it is declared (the text travels into the JSON
Schema that ``tutorrl schema`` emits). Defaults are filled in where verl or the
team's launcher has a sensible one; fields whose silent default would be wrong
(model and data paths, target verl release, rollout engine) are required.

``None`` means "not set and not applicable" (e.g. the megatron section of an
FSDP run); :func:`tutorrl.compiler.normalize.normalize` fills every default
that depends on other fields, so a normalised spec is explicit about
everything it launches.
"""

# No `from __future__ import annotations`: evaluated annotations spare
# msgspec and the loader re-parsing every type string on each compile.
from typing import Annotated, Literal, Union

import msgspec
from msgspec import Meta, Struct, field

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_RELEASE = r"^[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?$"
_IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
_MODULE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"

PositiveInt = Annotated[int, Meta(ge=1)]
Probability = Annotated[float, Meta(gt=0.0, le=1.0)]

AdvEstimator = Literal[
    "gae", "grpo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo",
    "opo", "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized",
    "optimal_token_baseline", "tir_optimal_token_baseline", "gdpo",
]
KlType = Literal["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"]
Logger = Literal["console", "wandb", "tensorboard", "mlflow", "swanlab", "vemlp_wandb", "clearml", "trackio"]
# A keyword argument handed to a custom reward function. Nested tables are not
# allowed: verl passes reward_kwargs through Hydra, one key per override.
KwargValue = Union[str, int, float, bool, list[Union[str, int, float, bool]]]


class _Section(Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=False):
    pass


class Experiment(_Section):
    name: Annotated[str, Meta(pattern=_NAME, max_length=128, description=(
        "Experiment name; also verl's trainer.experiment_name and the default checkpoint folder name."))]
    verl: Annotated[str, Meta(pattern=_RELEASE, description=(
        "Target verl release, e.g. \"0.9.1\". Selects the key map; launch.sh refuses any other installed release."))]
    project: Annotated[str, Meta(pattern=_NAME, max_length=128, description=(
        "Project name; verl's trainer.project_name (the tracker project)."))] = "tutorrl"


class Data(_Section):
    train: Annotated[str, Meta(min_length=1, description="Training prompts (parquet file, or a list of files in verl's syntax).")]
    val: Annotated[str, Meta(min_length=1, description="Validation prompts (parquet).")]
    seed: Annotated[int, Meta(ge=0, description="Seed that orders the data (verl's data.seed).")] = 1
    train_batch_size: Annotated[PositiveInt, Meta(description="Prompts per training step.")] = 1024
    max_prompt_length: Annotated[PositiveInt, Meta(description="Longest prompt in tokens; longer prompts are filtered or truncated by verl.")] = 512
    max_response_length: Annotated[PositiveInt, Meta(description="Longest generated response in tokens.")] = 512


class Lora(_Section):
    rank: Annotated[int, Meta(ge=0, description=(
        "LoRA rank; 0 trains the full model, and then alpha and target_modules are not emitted."))] = 0
    alpha: Annotated[PositiveInt, Meta(description="LoRA alpha (scaling numerator).")] = 16
    target_modules: Annotated[Union[str, list[str]], Meta(description=(
        "Modules that get adapters: \"all-linear\" or a list of module names."))] = "all-linear"


class Model(_Section):
    path: Annotated[str, Meta(min_length=1, description="The policy's starting checkpoint (a Hugging Face model folder or hub id).")]
    attn_implementation: Annotated[Union[Literal["flash_attention_2", "sdpa", "eager"], None], Meta(description=(
        "Attention kernel. Unset keeps verl's default (FlashAttention 2); \"sdpa\" for machines without flash-attn."))] = None
    lora: Annotated[Lora, Meta(description="LoRA adapter on the policy.")] = field(default_factory=Lora)


class Algorithm(_Section):
    adv_estimator: Annotated[AdvEstimator, Meta(description="Advantage estimator (verl's algorithm.adv_estimator).")] = "grpo"
    use_kl_in_reward: Annotated[bool, Meta(description="Apply the KL penalty inside the reward.")] = False


class Megatron(_Section):
    tensor_parallel: Annotated[PositiveInt, Meta(description="Megatron tensor-parallel size of the actor.")] = 1
    pipeline_parallel: Annotated[PositiveInt, Meta(description="Megatron pipeline-parallel size of the actor.")] = 1
    context_parallel: Annotated[PositiveInt, Meta(description="Megatron context-parallel size of the actor.")] = 1
    expert_parallel: Annotated[PositiveInt, Meta(description="Megatron expert-parallel size of the actor (MoE models).")] = 1


class Actor(_Section):
    strategy: Annotated[Literal["fsdp", "fsdp2", "megatron"], Meta(description=(
        "Training backend. \"megatron\" selects verl's Megatron config and allows [actor.megatron]."))] = "fsdp"
    lr: Annotated[float, Meta(gt=0.0, le=1.0, description="Actor learning rate.")] = 1e-6
    ppo_mini_batch_size: Annotated[PositiveInt, Meta(description=(
        "Prompts per PPO update; must divide data.train_batch_size."))] = 256
    ppo_micro_batch_size_per_gpu: Annotated[PositiveInt, Meta(description=(
        "Sequences per GPU per forward pass; also used for the rollout and reference log-prob passes."))] = 4
    use_kl_loss: Annotated[bool, Meta(description="Add a KL loss against the reference policy (GRPO-style).")] = False
    kl_loss_type: Annotated[KlType, Meta(description="KL estimator for the KL loss (emitted only with use_kl_loss).")] = "low_var_kl"
    kl_loss_coef: Annotated[float, Meta(ge=0.0, description="Weight of the KL loss (emitted only with use_kl_loss).")] = 0.001
    entropy_coeff: Annotated[float, Meta(ge=0.0, description="Entropy bonus weight.")] = 0.0
    megatron: Annotated[Union[Megatron, None], Meta(description="Megatron parallel layout; only with strategy = \"megatron\".")] = None


class Rollout(_Section):
    engine: Annotated[Literal["sglang", "vllm"], Meta(description="Rollout engine (verl's actor_rollout_ref.rollout.name).")]
    n: Annotated[PositiveInt, Meta(description="Responses sampled per prompt (GRPO needs at least 2).")] = 1
    temperature: Annotated[float, Meta(ge=0.0, description="Sampling temperature.")] = 1.0
    top_p: Annotated[Probability, Meta(description="Nucleus sampling mass.")] = 1.0
    top_k: Annotated[int, Meta(ge=-1, description="Top-k sampling; -1 disables it.")] = -1
    gpu_memory_utilization: Annotated[Probability, Meta(description="Fraction of GPU memory the engine may take.")] = 0.5
    tensor_parallel: Annotated[PositiveInt, Meta(description=(
        "Rollout tensor-parallel size; must divide the trainer GPUs."))] = 1


class Trainer(_Section):
    total_steps: Annotated[PositiveInt, Meta(description="Training steps (verl's trainer.total_training_steps).")]
    save_freq: Annotated[int, Meta(ge=-1, description="Save a checkpoint every N steps; -1 never (then no evidence is recorded).")] = 50
    test_freq: Annotated[int, Meta(ge=-1, description="Validate every N steps; -1 never.")] = -1
    output_dir: Annotated[str, Meta(description=(
        "Checkpoint folder (verl's trainer.default_local_dir). Empty: checkpoints/<project>/<name>. "
        "Relative paths are relative to the folder `tutorrl run` is started in (its embedded Ray head runs "
        "verl's workers there); a real run on an existing cluster needs an absolute path or a URI."))] = ""
    loggers: Annotated[list[Logger], Meta(min_length=1, description=(
        "Trackers; verl's default adds wandb, which fails without an account, so the default is console only."))] = field(
        default_factory=lambda: ["console"])
    evidence_callback: Annotated[bool, Meta(description=(
        "Record checkpoint evidence at every save from inside verl (verl 0.9.1+, trainer.checkpoint_callback_class); "
        "the job's Python must then import tutorrl. Off, or on older releases, `tutorrl run` records checkpoints after the run."))] = True
    resume: Annotated[str, Meta(min_length=1, description=(
        "\"auto\" resumes from the latest checkpoint in output_dir, \"disable\" starts fresh, anything else is a checkpoint path to resume from."))] = "auto"


class Resources(_Section):
    nodes: Annotated[PositiveInt, Meta(description="Machines for the trainer.")] = 1
    trainer_gpus_per_node: Annotated[PositiveInt, Meta(description="GPUs per machine that verl's trainer and rollout use.")] = 8
    reward_gpus: Annotated[int, Meta(ge=0, description=(
        "GPUs set aside for the reward (the student simulator), outside verl's trainer pool."))] = 0


class Simulator(_Section):
    adapter: Annotated[str, Meta(min_length=1, description="The student simulator's adapter checkpoint.")]
    heads_checkpoint: Annotated[str, Meta(min_length=1, description="Checkpoint of the simulator's prediction heads.")]
    heads_metrics: Annotated[str, Meta(min_length=1, description="Calibration metrics of the heads.")]
    device: Annotated[str, Meta(pattern=r"^(cpu|cuda(:[0-9]+)?)$", description="Device the simulator runs on inside the reward worker.")] = "cuda"
    alpha_style: Annotated[float, Meta(ge=0.0, description="Decay rate of the style gate.")] = 0.5
    alpha_perception: Annotated[float, Meta(ge=0.0, description="Decay rate of the perception gate.")] = 0.5
    style_preferred: Annotated[str, Meta(description="Preferred style for the style gate; empty: no preference (not emitted).")] = ""


class Prompted(_Section):
    student_model: Annotated[str, Meta(min_length=1, description="The model prompted to act as the student.")]


class Custom(_Section):
    kwargs: Annotated[dict[Annotated[str, Meta(pattern=_IDENT)], KwargValue], Meta(description=(
        "Keyword arguments passed to the reward function, verbatim."))] = field(default_factory=dict)


class Reward(_Section):
    kind: Annotated[Literal["simulator", "prompted", "custom"], Meta(description=(
        "simulator: a trained student simulator on its own GPU; prompted: a prompted student model; custom: any module with free kwargs."))]
    module: Annotated[str, Meta(description=(
        "Installed Python module exporting the reward function. Empty: the chess tutor's entry for simulator/prompted; required for custom."))] = ""
    function: Annotated[str, Meta(pattern=_IDENT, description="Name of the reward function in the module.")] = "compute_score"
    table: Annotated[Union[Annotated[str, Meta(min_length=1)], None], Meta(description="Chess reward table (simulator and prompted kinds).")] = None
    mate_clip_cp: Annotated[Union[Annotated[int, Meta(ge=1)], None], Meta(description="Centipawn value mates are clipped to (simulator and prompted kinds).")] = None
    scale_cp: Annotated[Union[Annotated[float, Meta(gt=0.0)], None], Meta(description="Centipawn scale of the reward (simulator and prompted kinds).")] = None
    illegal_reward: Annotated[Union[float, None], Meta(description="Reward for an illegal move (simulator and prompted kinds).")] = None
    simulator: Annotated[Union[Simulator, None], Meta(description="Settings of kind = \"simulator\".")] = None
    prompted: Annotated[Union[Prompted, None], Meta(description="Settings of kind = \"prompted\".")] = None
    custom: Annotated[Union[Custom, None], Meta(description="Settings of kind = \"custom\".")] = None


class Env(_Section):
    set: Annotated[dict[Annotated[str, Meta(pattern=_ENV_NAME)], str], Meta(description=(
        "Environment the job (and verl's Ray workers) see, as literal values. Never secrets: pass those through."))] = field(
        default_factory=dict)
    passthrough: Annotated[list[Annotated[str, Meta(pattern=_ENV_NAME)]], Meta(description=(
        "Names whose values are read from the submitter's environment at run time and never written (API keys, tokens)."))] = field(
        default_factory=list)


class Verl(_Section):
    extra_overrides: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(description=(
        "Raw Hydra overrides for what the machine dictates, appended last; each key is still checked against the release."))] = field(
        default_factory=list)


class Spec(_Section):
    """One experiment."""

    experiment: Annotated[Experiment, Meta(description="What this run is called and which verl release it targets.")]
    data: Annotated[Data, Meta(description="Prompt data and batch sizes.")]
    model: Annotated[Model, Meta(description="The policy model and its adapters.")]
    rollout: Annotated[Rollout, Meta(description="How responses are sampled.")]
    trainer: Annotated[Trainer, Meta(description="Training length, checkpoints, logging and resumption.")]
    reward: Annotated[Reward, Meta(description="Where the reward comes from.")]
    algorithm: Annotated[Algorithm, Meta(description="Advantage estimation.")] = field(default_factory=Algorithm)
    actor: Annotated[Actor, Meta(description="The policy update: backend, optimiser, batches, KL and entropy.")] = field(
        default_factory=Actor)
    resources: Annotated[Resources, Meta(description="GPUs and machines the run needs.")] = field(default_factory=Resources)
    env: Annotated[Env, Meta(description="Environment of the job and of verl's Ray workers.")] = field(default_factory=Env)
    verl: Annotated[Verl, Meta(description="Escape hatch: raw overrides the machine dictates.")] = field(default_factory=Verl)


# The chess tutor's reward entries, used when [reward] module is left empty.
DEFAULT_REWARD_MODULES = {
    "simulator": "studentsim.tutor_rl._reward_entry",
    "prompted": "studentsim.tutor_rl._prompted_reward_entry",
}
# Defaults of the chess reward's shaping kwargs (simulator and prompted kinds).
CHESS_REWARD_DEFAULTS = {"mate_clip_cp": 1000, "scale_cp": 400.0, "illegal_reward": -1.0}


def to_builtins(spec: Spec) -> dict:
    """The spec as plain data with unset (``None``) fields left out."""
    return _drop_none(msgspec.to_builtins(spec))


def _drop_none(value):
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value
