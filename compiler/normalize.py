"""Filling the defaults that depend on other fields.

After this, a spec says everything it launches: ``spec.toml`` in the bundle is
the normalised spec, so a reviewer sees the checkpoint folder, the reward
module and every chess-reward constant even when the author left them out.
"""

from __future__ import annotations

import msgspec

from tutorrl.compiler.spec import CHESS_REWARD_DEFAULTS, DEFAULT_REWARD_MODULES, Env, Megatron, Spec


def normalize(spec: Spec) -> Spec:
    trainer = spec.trainer
    if not trainer.output_dir:
        trainer = msgspec.structs.replace(
            trainer, output_dir=f"checkpoints/{spec.experiment.project}/{spec.experiment.name}")

    actor = spec.actor
    if actor.strategy == "megatron" and actor.megatron is None:
        actor = msgspec.structs.replace(actor, megatron=Megatron())

    reward = spec.reward
    if reward.kind in DEFAULT_REWARD_MODULES:
        changes = {name: value for name, value in CHESS_REWARD_DEFAULTS.items() if getattr(reward, name) is None}
        if not reward.module:
            changes["module"] = DEFAULT_REWARD_MODULES[reward.kind]
        reward = msgspec.structs.replace(reward, **changes)
    elif reward.custom is not None:
        custom = msgspec.structs.replace(reward.custom, kwargs=dict(sorted(reward.custom.kwargs.items())))
        reward = msgspec.structs.replace(reward, custom=custom)

    # Order carries no meaning in either: sort so reordering changes nothing.
    env = Env(set=dict(sorted(spec.env.set.items())), passthrough=sorted(spec.env.passthrough))

    return msgspec.structs.replace(spec, trainer=trainer, actor=actor, reward=reward, env=env)
