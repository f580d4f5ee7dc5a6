"""From a normalised spec to the exact verl overrides of one release.

Two steps, both pure:

1. :func:`settings` turns the spec into release-independent *settings*
   (``("actor.lr", 1e-06)``), including the derived ones (reward worker count,
   resume mode, the chess reward's keyword arguments).
2. :func:`resolve` looks each setting up in the key map of the target release
   and variant, and checks the user's ``extra_overrides`` against that
   release's key set.

A setting with no key in the target release is an error naming the releases
where it does exist; keys a release accepts but ignores are never emitted.
"""

from __future__ import annotations

import re

import msgspec

from tutorrl.compiler.keymap import (ReleaseMap, Variant, absent_reason, describe_releases, load_keymap,
                                     releases_with, settings_writing)
from tutorrl.compiler.hydra import render_value
from tutorrl.compiler.spec import Spec

Finding = tuple[str, str, "str | None"]


class Override(msgspec.Struct, frozen=True):
    """One ``key=value`` for verl, and the spec setting it came from."""

    setting: str
    key: str
    value: object
    append: bool = False
    # Raw user text (extra_overrides) is passed through as written.
    raw: str | None = None
    # "module-file": the value is a module name whose file launch.sh finds at
    # run time; the bundle carries the computation, not this machine's path.
    spelling: str = "plain"

    @property
    def runtime(self) -> bool:
        return self.spelling == "module-file"

    @property
    def text(self) -> str:
        if self.raw is not None:
            return self.raw
        if self.runtime:
            raise ValueError(f"the value of {self.key} is only known when launch.sh runs")
        return f"{'+' if self.append else ''}{self.key}={render_value(self.value)}"


class Resolved(msgspec.Struct, frozen=True):
    config_name: str
    overrides: tuple[Override, ...]


def variant_of(spec: Spec) -> Variant:
    return "megatron" if spec.actor.strategy == "megatron" else "fsdp"


def settings(spec: Spec) -> list[tuple[str, object]]:
    """The spec as (setting, value) pairs, in launch-script order."""
    s = spec
    out: list[tuple[str, object]] = [
        ("experiment.project", s.experiment.project),
        ("experiment.name", s.experiment.name),
        ("data.train", s.data.train),
        ("data.val", s.data.val),
        ("data.seed", s.data.seed),
        ("data.train_batch_size", s.data.train_batch_size),
        ("data.max_prompt_length", s.data.max_prompt_length),
        ("data.max_response_length", s.data.max_response_length),
        ("model.path", s.model.path),
    ]
    if s.model.attn_implementation is not None:
        out.append(("model.attn_implementation", s.model.attn_implementation))
    # LoRA is mapped for the FSDP strategies (rules refuse it with megatron).
    if s.actor.strategy != "megatron":
        out.append(("model.lora.rank", s.model.lora.rank))
    if s.model.lora.rank and s.actor.strategy != "megatron":
        # Rank 0 is a full fine-tune: the adapter settings are left unsaid
        # rather than sent with values nothing reads.
        out += [("model.lora.alpha", s.model.lora.alpha),
                ("model.lora.target_modules", s.model.lora.target_modules)]
    out += [
        ("algorithm.adv_estimator", s.algorithm.adv_estimator),
        ("algorithm.use_kl_in_reward", s.algorithm.use_kl_in_reward),
    ]
    if s.actor.strategy != "megatron":
        out.append(("actor.strategy", s.actor.strategy))
    out += [
        ("actor.lr", s.actor.lr),
        ("actor.ppo_mini_batch_size", s.actor.ppo_mini_batch_size),
        ("actor.ppo_micro_batch_size_per_gpu", s.actor.ppo_micro_batch_size_per_gpu),
        ("actor.use_kl_loss", s.actor.use_kl_loss),
    ]
    if s.actor.use_kl_loss:
        out += [("actor.kl_loss_type", s.actor.kl_loss_type), ("actor.kl_loss_coef", s.actor.kl_loss_coef)]
    out.append(("actor.entropy_coeff", s.actor.entropy_coeff))
    if s.actor.megatron is not None:
        mg = s.actor.megatron
        out += [
            ("actor.megatron.tensor_parallel", mg.tensor_parallel),
            ("actor.megatron.pipeline_parallel", mg.pipeline_parallel),
            ("actor.megatron.context_parallel", mg.context_parallel),
            ("actor.megatron.expert_parallel", mg.expert_parallel),
        ]
    out += [
        ("rollout.engine", s.rollout.engine),
        ("rollout.n", s.rollout.n),
        ("rollout.temperature", s.rollout.temperature),
        ("rollout.top_p", s.rollout.top_p),
        ("rollout.top_k", s.rollout.top_k),
        ("rollout.gpu_memory_utilization", s.rollout.gpu_memory_utilization),
        ("rollout.tensor_parallel", s.rollout.tensor_parallel),
        ("trainer.total_steps", s.trainer.total_steps),
        ("trainer.save_freq", s.trainer.save_freq),
        ("trainer.test_freq", s.trainer.test_freq),
        ("trainer.output_dir", s.trainer.output_dir),
        ("trainer.loggers", list(s.trainer.loggers)),
    ]
    if s.trainer.evidence_callback:
        out.append(("trainer.evidence_callback", EVIDENCE_CALLBACK))
    if s.trainer.resume in ("auto", "disable"):
        out.append(("trainer.resume_mode", s.trainer.resume))
    else:
        out += [("trainer.resume_mode", "resume_path"), ("trainer.resume_from", s.trainer.resume)]
    out += [
        ("resources.nodes", s.resources.nodes),
        ("resources.trainer_gpus_per_node", s.resources.trainer_gpus_per_node),
        # A reward worker holding a simulator needs a GPU to itself, so the
        # worker count follows the GPUs set aside; verl's default of eight
        # would put eight simulators on one card.
        ("reward.num_workers", max(1, s.resources.reward_gpus)),
        ("reward.module", s.reward.module),
        ("reward.function", s.reward.function),
    ]
    out += [(f"reward.kwargs.{name}", value) for name, value in reward_kwargs(s).items()]
    return out


def reward_kwargs(spec: Spec) -> dict[str, object]:
    """Keyword arguments the reward function receives; names match the chess entries."""
    r = spec.reward
    if r.kind == "custom":
        return dict(r.custom.kwargs) if r.custom else {}
    kwargs: dict[str, object] = {
        "reward_table": r.table,
        "mate_clip_cp": r.mate_clip_cp,
        "scale_cp": r.scale_cp,
        "illegal_reward": r.illegal_reward,
    }
    if r.kind == "prompted" and r.prompted is not None:
        kwargs["student_model"] = r.prompted.student_model
    elif r.simulator is not None:
        sim = r.simulator
        kwargs.update(adapter_path=sim.adapter, heads_checkpoint=sim.heads_checkpoint,
                      heads_metrics=sim.heads_metrics, device=sim.device,
                      alpha_style=sim.alpha_style, alpha_perception=sim.alpha_perception)
        if sim.style_preferred:
            kwargs["style_preferred"] = sim.style_preferred
    return kwargs


def _spell(value: object, spelling: str) -> object:
    if spelling == "pkg":
        return f"pkg://{value}"
    return value


# The class verl 0.9.1 calls after every checkpoint save (evidence/callback.py).
EVIDENCE_CALLBACK = "tutorrl.evidence.callback.EvidenceCallback"

# Settings the compiler derives rather than the user writing them: where a
# release has no key for one, there is nothing to tell verl and nothing the
# user asked for is lost, so it is left out instead of refusing the spec.
DERIVED = frozenset({"reward.num_workers", "trainer.evidence_callback"})

# The spec field a user edits for each derived setting (for error locations).
_SPEC_FIELD = {
    "reward.num_workers": "resources.reward_gpus",
    "trainer.resume_mode": "trainer.resume",
    "trainer.resume_from": "trainer.resume",
}


def spec_field(setting: str) -> str:
    if setting.startswith("reward.kwargs."):
        return "reward"
    return _SPEC_FIELD.get(setting, setting)


def resolve(spec: Spec, rmap: ReleaseMap, keysets=None) -> tuple[Resolved, list[Finding]]:
    """Overrides for ``spec`` under ``rmap``, and the problems found.

    ``keysets`` is the key set of the release (``KeySet``); it is only needed
    to check ``extra_overrides`` and is loaded by the caller when there are any.
    """
    findings: list[Finding] = []
    overrides: list[Override] = [Override("variant", sel.partition("=")[0], sel.partition("=")[2], raw=sel)
                                 for sel in rmap.select]
    emitted: dict[str, str] = {}
    for setting, value in settings(spec):
        target = rmap.target(setting)
        if target is None:
            if setting in DERIVED:
                continue
            findings.append(missing_setting(setting, rmap.release, rmap.variant))
            continue
        for key in target.keys:
            emitted[key] = setting
            overrides.append(Override(setting, key, _spell(value, target.spelling), target.append,
                                      spelling=target.spelling))
    for index, text in enumerate(spec.verl.extra_overrides):
        override, problem = _extra(text, rmap, keysets, emitted)
        if problem:
            findings.append((f"verl.extra_overrides.{index}", *problem))
        else:
            overrides.append(override)
    return Resolved(rmap.config_name, tuple(overrides)), findings


def map_name(setting: str) -> str:
    """The key-map entry of ``setting`` (``reward.kwargs.x`` -> ``reward.kwargs.*``)."""
    return "reward.kwargs.*" if setting.startswith("reward.kwargs.") else setting


def missing_setting(setting: str, release: str, variant: Variant) -> Finding:
    """The finding for a setting with no key in ``release``: where it does exist, and why not here."""
    where = releases_with(map_name(setting), variant)
    exists = describe_releases(where) if where else "in no supported verl release"
    why = absent_reason(map_name(setting), release, variant)
    hint = why or (f"target one of those releases in experiment.verl, or leave {spec_field(setting)} unset"
                   if where else None)
    return (spec_field(setting),
            f"'{setting}' exists {exists} ({variant}); this spec targets {release}", hint)


def moved_key(key: str, rmap: ReleaseMap) -> str | None:
    """Advice for a key the release lacks that the key map knows under another release."""
    for setting in settings_writing(key):
        target = rmap.target(setting)
        if setting.endswith(".*"):
            tail = key.rpartition(".")[2]
            target = rmap.target(setting[:-2] + "." + tail)
        if target is not None:
            new = [("+" if target.append else "") + k for k in target.keys]
            return (f"verl {rmap.release} calls it '{new[0]}'" if len(new) == 1
                    else f"verl {rmap.release} writes it to {', '.join(repr(k) for k in new)}") + \
                f"; the spec's {spec_field(setting.replace('.*', '.x'))} sets it for you"
        where = releases_with(setting, rmap.variant)
        if where:
            return f"it is the spec's '{setting}' setting, which exists {describe_releases(where)}"
    return None


def releases_declaring(key: str, variant: Variant, *, appended: bool) -> list[str]:
    """Releases whose key set has ``key`` (or, ``appended``, an open table above it).

    Only called on the error path: it reads every release's key set.
    """
    from tutorrl.compiler.keysets import load_keyset

    found = []
    for release in load_keymap().releases:
        keyset = load_keyset(release, variant)
        if (keyset.open_parent(key) is not None and not keyset.has(key)) if appended else keyset.has(key):
            found.append(release)
    return found


def _elsewhere(key: str, rmap: ReleaseMap, *, appended: bool) -> str:
    where = releases_declaring(key, rmap.variant, appended=appended)
    return f" (it is declared {describe_releases(where)})" if where else ""


_EXTRA = re.compile(r"^(~|\+\+|\+)?([A-Za-z_][A-Za-z0-9_.\-/@]*)(?:=(.*))?$", re.DOTALL)


def _extra(text: str, rmap: ReleaseMap, keyset, emitted: dict[str, str]):
    match = _EXTRA.match(text)
    if not match or (match.group(1) != "~" and match.group(3) is None):
        return None, ("not a Hydra override", "expected KEY=VALUE, +KEY=VALUE or ~KEY")
    prefix, key, _ = match.groups()
    prefix = prefix or ""
    if key in emitted:
        return None, (f"'{key}' is set by the spec's {spec_field(emitted[key])}",
                      "change it there, so the spec says what runs")
    ignored = rmap.ignored_by(key)
    if ignored is not None:
        instead = f"use '{ignored.instead}{key[len(ignored.prefix):]}'" if ignored.instead else None
        return None, (f"'{key}' would be accepted and ignored by verl {rmap.release}: {ignored.reason}", instead)
    if keyset is not None:
        exists = keyset.has(key)
        if prefix == "" and not exists:
            if keyset.open_parent(key):
                return None, (f"'{key}' is not declared by verl {rmap.release}", f"append it: '+{text}'")
            near = keyset.near(key)
            return None, (f"verl {rmap.release} ({rmap.variant}) has no key '{key}'"
                          + _elsewhere(key, rmap, appended=False),
                          moved_key(key, rmap) or (f"did you mean '{near[0]}'?" if near else None))
        if prefix == "~" and not exists:
            return None, (f"verl {rmap.release} has no key '{key}' to delete", None)
        if prefix == "+" and exists:
            return None, (f"'{key}' already exists in verl {rmap.release}", f"drop the '+': '{text[1:]}'")
        if prefix in ("+", "++") and not exists and keyset.open_parent(key) is None:
            return None, (f"verl {rmap.release} declares no '{key}' and no open table above it: "
                          "verl would accept it and never read it" + _elsewhere(key, rmap, appended=True),
                          moved_key(key, rmap))
    return Override("verl.extra_overrides", key, None, prefix in ("+", "++"), raw=text), None
