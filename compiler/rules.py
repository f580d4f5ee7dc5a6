"""Cross-field rules of a spec: what each field allows given the others.

Pure: ``check_rules(spec)`` returns ``(dotted key, message, hint)`` triples and
the loader attaches file positions. Each rule exists because verl (or Ray)
would otherwise fail late -- after minutes of start-up on a GPU cluster -- or,
worse, silently do something else.
"""

from __future__ import annotations

import re

from tutorrl.compiler.spec import Spec

Finding = tuple[str, str, "str | None"]

# Advantage estimators that compare several responses to the same prompt.
GROUP_ESTIMATORS = frozenset({
    "grpo", "rloo", "grpo_passk", "gpg", "opo", "rloo_vectorized", "grpo_vectorized", "gdpo",
})
_SECRET = re.compile(r"(_KEY|_TOKEN)$|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
RESERVED_ENV_PREFIX = "TUTORRL_"


def looks_secret(name: str) -> bool:
    return bool(_SECRET.search(name))


def trainer_world(spec: Spec) -> int:
    return spec.resources.nodes * spec.resources.trainer_gpus_per_node


def data_parallel_size(spec: Spec) -> int:
    """Ranks that split a mini-batch: model-parallel groups count once."""
    world = trainer_world(spec)
    mg = spec.actor.megatron
    if spec.actor.strategy == "megatron" and mg is not None:
        return max(1, world // (mg.tensor_parallel * mg.pipeline_parallel * mg.context_parallel))
    return world


def check_rules(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    out += _batches(spec)
    out += _parallel_layout(spec)
    out += _reward(spec)
    out += _env(spec)
    out += _trainer(spec)
    return out


def _batches(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    train = spec.data.train_batch_size
    mini = spec.actor.ppo_mini_batch_size
    micro = spec.actor.ppo_micro_batch_size_per_gpu
    n = spec.rollout.n
    if train % mini:
        out.append(("actor.ppo_mini_batch_size",
                    f"{mini} does not divide data.train_batch_size ({train})",
                    "verl splits each training batch into whole mini-batches"))
        return out
    dp = data_parallel_size(spec)
    sequences = mini * n
    if sequences % dp:
        out.append(("actor.ppo_mini_batch_size",
                    f"a mini-batch of {mini} prompts x rollout.n {n} = {sequences} sequences "
                    f"does not split evenly over {dp} data-parallel GPUs", None))
    elif (sequences // dp) % micro:
        out.append(("actor.ppo_micro_batch_size_per_gpu",
                    f"{micro} does not divide the {sequences // dp} sequences each GPU gets per mini-batch "
                    f"({mini} prompts x rollout.n {n} / {dp} GPUs)", None))
    if spec.algorithm.adv_estimator in GROUP_ESTIMATORS and n < 2:
        out.append(("rollout.n", f"{spec.algorithm.adv_estimator} compares responses to the same prompt and needs n >= 2",
                    "set rollout.n, e.g. 8"))
    return out


def _parallel_layout(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    world = trainer_world(spec)
    per_node = spec.resources.trainer_gpus_per_node
    mg = spec.actor.megatron
    if mg is not None and spec.actor.strategy != "megatron":
        out.append(("actor.megatron", f"a megatron layout needs actor.strategy = \"megatron\" (it is \"{spec.actor.strategy}\")",
                    "remove [actor.megatron] or switch the strategy"))
    if spec.actor.strategy == "megatron":
        if mg is not None:
            model_parallel = mg.tensor_parallel * mg.pipeline_parallel * mg.context_parallel
            if world % model_parallel:
                out.append(("actor.megatron",
                            f"tensor x pipeline x context parallel = {model_parallel} does not divide the {world} trainer GPUs", None))
            elif (world // (mg.tensor_parallel * mg.pipeline_parallel)) % mg.expert_parallel:
                out.append(("actor.megatron.expert_parallel",
                            f"{mg.expert_parallel} does not divide the {world // (mg.tensor_parallel * mg.pipeline_parallel)} "
                            "GPUs left after tensor and pipeline parallelism", None))
            if mg.tensor_parallel > per_node:
                out.append(("actor.megatron.tensor_parallel",
                            f"{mg.tensor_parallel} is more than the {per_node} GPUs of one node", None))
        if spec.model.lora.rank:
            out.append(("model.lora.rank", "LoRA is mapped for the FSDP strategies only",
                        "use actor.strategy = \"fsdp\" or \"fsdp2\", or set rank = 0"))
    if per_node % spec.rollout.tensor_parallel:
        out.append(("rollout.tensor_parallel",
                    f"{spec.rollout.tensor_parallel} does not divide the {per_node} trainer GPUs per node", None))
    return out


def _reward(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    reward = spec.reward
    sections = {"simulator": reward.simulator, "prompted": reward.prompted, "custom": reward.custom}
    for name, section in sections.items():
        if name == reward.kind and section is None:
            out.append((f"reward.{name}", f"kind = \"{reward.kind}\" needs a [reward.{name}] table", None))
        elif name != reward.kind and section is not None:
            out.append((f"reward.{name}", f"[reward.{name}] does not apply to kind = \"{reward.kind}\"",
                        f"remove it or set kind = \"{name}\""))
    chess = {"table": reward.table, "mate_clip_cp": reward.mate_clip_cp,
             "scale_cp": reward.scale_cp, "illegal_reward": reward.illegal_reward}
    if reward.kind == "custom":
        if not reward.module:
            out.append(("reward.module", "a custom reward needs the module that exports its function", None))
        for name, value in chess.items():
            if value is not None:
                out.append((f"reward.{name}", "applies to the simulator and prompted kinds only",
                            "give a custom reward its arguments in [reward.custom] kwargs"))
    elif reward.table is None:
        out.append(("reward.table", f"kind = \"{reward.kind}\" needs the chess reward table", None))
    if reward.simulator is not None and reward.kind == "simulator":
        if reward.simulator.device.startswith("cuda") and spec.resources.reward_gpus < 1:
            out.append(("resources.reward_gpus",
                        f"the simulator runs on {reward.simulator.device} but no GPU is set aside for it",
                        "set reward_gpus = 1 (or device = \"cpu\")"))
    return out


def _env(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()
    for index, name in enumerate(spec.env.passthrough):
        key = f"env.passthrough.{index}"
        if name in seen:
            out.append((key, f"{name} is listed twice", None))
        seen.add(name)
        if name in spec.env.set:
            out.append((f"env.set.{name}", f"{name} is passed through and must not also have a literal value",
                        "remove it from env.set"))
        if name.startswith(RESERVED_ENV_PREFIX):
            out.append((key, f"{RESERVED_ENV_PREFIX}* names are set by tutorrl itself", None))
    for name in spec.env.set:
        if name.startswith(RESERVED_ENV_PREFIX):
            out.append((f"env.set.{name}", f"{RESERVED_ENV_PREFIX}* names are set by tutorrl itself", None))
        elif looks_secret(name) and name not in seen:
            out.append((f"env.set.{name}", f"{name} looks like a secret and would be written into the bundle",
                        "list it in env.passthrough instead; its value is then read from your environment at run time"))
    return out


def _trainer(spec: Spec) -> list[Finding]:
    out: list[Finding] = []
    for name in ("save_freq", "test_freq"):
        if getattr(spec.trainer, name) == 0:
            out.append((f"trainer.{name}", "0 is ambiguous", "use a positive number of steps, or -1 for never"))
    loggers = spec.trainer.loggers
    if len(set(loggers)) != len(loggers):
        out.append(("trainer.loggers", "a logger is listed twice", None))
    return out
