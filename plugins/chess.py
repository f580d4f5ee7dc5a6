"""The chess tutor's rewards, as tutorrl reward plug-ins.

Two plug-ins from the team's launcher: ``chess-simulator`` scores a move with
a trained student simulator running on a GPU set aside for it;
``chess-prompted`` with a prompted student model. Both pass the same shaping
constants to the team's reward entry points (package ``studentsim``, installed
where the job runs). Registered in pyproject.toml under ``tutorrl.rewards``.
"""

# No `from __future__ import annotations`: msgspec would evaluate each option's
# type from a string on every compile that names this plug-in.
from typing import Annotated

from msgspec import Meta, Struct

from tutorrl import __version__
from tutorrl.compiler.release import load_lock
from tutorrl.compiler.spec import variant_of

_DEVICE = r"^(cpu|cuda(:[0-9]+)?)\Z"


class _Options(Struct, kw_only=True, forbid_unknown_fields=True):
    # Defaults are stated in the bundle's spec.toml (omit_defaults off).
    table: Annotated[str, Meta(min_length=1)]
    """Chess reward table (JSON)."""
    mate_clip_cp: Annotated[int, Meta(ge=1, le=10**9)] = 1000
    """Centipawn value mates are clipped to."""
    scale_cp: Annotated[float, Meta(gt=0.0, le=1e9)] = 400.0
    """Centipawn scale of the reward."""
    illegal_reward: Annotated[float, Meta(ge=-1e9, le=1e9)] = -1.0
    """Reward for an illegal move."""


class SimulatorOptions(_Options):
    adapter: Annotated[str, Meta(min_length=1)]
    """The student simulator's adapter checkpoint."""
    heads_checkpoint: Annotated[str, Meta(min_length=1)]
    """Checkpoint of the simulator's prediction heads."""
    heads_metrics: Annotated[str, Meta(min_length=1)]
    """Calibration metrics of the heads."""
    device: Annotated[str, Meta(pattern=_DEVICE)] = "cuda"
    """Device the simulator runs on inside the reward worker."""
    alpha_style: Annotated[float, Meta(ge=0.0, le=1e9)] = 0.5
    """Decay rate of the style gate."""
    alpha_perception: Annotated[float, Meta(ge=0.0, le=1e9)] = 0.5
    """Decay rate of the perception gate."""
    style_preferred: str = ""
    """Preferred style of the style gate; empty: no preference (not passed)."""


class PromptedOptions(_Options):
    student_model: Annotated[str, Meta(min_length=1)]
    """The model prompted to act as the student."""


# verl asks Ray for no GPUs on its reward workers, and Ray hides every GPU
# from a worker that asked for none. The simulator needs the card set aside
# for it, so Ray must leave CUDA_VISIBLE_DEVICES alone -- in the workers,
# which is why this travels in the job's runtime_env (env.set) and not only in
# the driver's environment.
_REWARD_GPU_ENV = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


def _has_reward_workers(spec) -> bool:
    """Whether the spec's release has verl's reward.num_workers (asked of its lock, not a version cut-off)."""
    return "reward.workers" in load_lock(spec.experiment.verl, variant_of(spec), spec.experiment.entry).targets


class _Chess:
    version = __version__
    module = ""

    def _kwargs(self, options) -> dict:
        return {"reward_table": options.table, "mate_clip_cp": options.mate_clip_cp,
                "scale_cp": options.scale_cp, "illegal_reward": options.illegal_reward}

    def normalize(self, spec, options) -> dict:
        reward_gpus = spec.resources.reward_gpus or 0
        fill = {
            "reward.module": self.module,
            "reward.function": "compute_score",
            "reward.kwargs": self._kwargs(options),
        }
        if _has_reward_workers(spec):
            # One reward worker per GPU set aside: verl's default of eight
            # workers would put eight simulators on one card. Releases without
            # a reward worker pool (before 0.7.1) have nothing to size.
            fill["reward.workers"] = max(1, reward_gpus)
        if reward_gpus:
            fill["env.set"] = dict(_REWARD_GPU_ENV)
        return fill

    def rules(self, spec, options) -> list:
        return []

    def paths(self, options) -> list[tuple[str, str]]:
        return [("reward.options.table", options.table)]


class _Simulator(_Chess):
    name = "chess-simulator"
    Options = SimulatorOptions
    module = "studentsim.tutor_rl._reward_entry"

    def _kwargs(self, options) -> dict:
        kwargs = super()._kwargs(options)
        kwargs.update(adapter_path=options.adapter, heads_checkpoint=options.heads_checkpoint,
                      heads_metrics=options.heads_metrics, device=options.device,
                      alpha_style=options.alpha_style, alpha_perception=options.alpha_perception)
        if options.style_preferred:
            kwargs["style_preferred"] = options.style_preferred
        return kwargs

    def rules(self, spec, options) -> list:
        if options.device.startswith("cuda") and not spec.resources.reward_gpus:
            return [("resources.reward_gpus", f"the simulator runs on {options.device} but no GPU is set aside for it",
                     "set reward_gpus = 1 (or reward.options.device = \"cpu\")")]
        return []

    def paths(self, options) -> list[tuple[str, str]]:
        return super().paths(options) + [
            ("reward.options.adapter", options.adapter),
            ("reward.options.heads_checkpoint", options.heads_checkpoint),
            ("reward.options.heads_metrics", options.heads_metrics),
        ]


class _Prompted(_Chess):
    name = "chess-prompted"
    Options = PromptedOptions
    module = "studentsim.tutor_rl._prompted_reward_entry"

    def _kwargs(self, options) -> dict:
        return {**super()._kwargs(options), "student_model": options.student_model}


SIMULATOR = _Simulator()
PROMPTED = _Prompted()
