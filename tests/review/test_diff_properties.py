"""Properties of the structured diff, over specs hypothesis varies field by field."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from review_helpers import base, side, with_
from tutorrl.compiler.spec.flat import flatten_table, settings as spec_settings
from tutorrl.review.model import diff_sides

# Each mutation keeps the spec valid under the compiler's cross-field rules,
# so every example compiles and the properties are about the diff alone.
_MUTATIONS = {
    "experiment__name": st.sampled_from(["chess-tutor-grpo", "chess-b", "x.y_z"]),
    "data__seed": st.integers(0, 3),
    "data__max_prompt_length": st.sampled_from([256, 512, 1024]),
    "model__path": st.sampled_from(["models/tutor-sft-merged", "models/other"]),
    "model__lora": st.sampled_from([{}, {"rank": 8}, {"rank": 0, "alpha": 32}, {"rank": 16, "alpha": 8}]),
    "actor__lr": st.sampled_from([1e-6, 2e-6, 1e-5]),
    "actor__use_kl_loss": st.booleans(),
    "actor__entropy_coeff": st.sampled_from([0.0, 0.001]),
    "rollout__engine": st.sampled_from(["sglang", "vllm"]),
    "rollout__temperature": st.sampled_from([1.0, 0.7]),
    "rollout__top_k": st.sampled_from([-1, 50]),
    "trainer__total_steps": st.integers(1, 3),
    "trainer__loggers": st.sampled_from([["console"], ["console", "wandb"]]),
    "trainer__resume_mode": st.sampled_from(["auto", "disable", "resume_path"]),
    "trainer__resume_from": st.sampled_from(["checkpoints/step_10", "checkpoints/step_20"]),
    "trainer__evidence_callback": st.booleans(),
    "resources__nodes": st.sampled_from([1, 2]),
    "resources__reward_gpus": st.integers(1, 2),
    "reward__options__scale_cp": st.sampled_from([400.0, 200.0]),
    "reward__options__alpha_style": st.sampled_from([0.5, 0.25]),
    "reward__options__style_preferred": st.sampled_from(["", "positional"]),
    "reward__workers": st.sampled_from([1, 4]),
    "reward__kwargs": st.sampled_from([{"device": "cpu"}, {"device": "cpu", "extra": {"a": 1}}]),
    "env__set": st.sampled_from([{}, {"TOKENIZERS_PARALLELISM": "false"}, {"A": "1", "B": "x y"}]),
    "env__passthrough": st.sampled_from([[], ["WANDB_API_KEY"], ["HF_TOKEN", "WANDB_API_KEY"]]),
    "verl__extra_overrides": st.sampled_from([[], ["trainer.default_hdfs_dir=null"]]),
    "verl__unread_overrides": st.sampled_from([[], ["+trainer.fork_only_knob=1"]]),
}


@st.composite
def specs(draw):
    chosen = draw(st.lists(st.sampled_from(sorted(_MUTATIONS)), unique=True, max_size=5))
    return with_(base(), **{name: draw(_MUTATIONS[name]) for name in chosen})


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(specs())
def test_diff_with_itself_is_empty(spec):
    d = diff_sides(side(spec), side(spec))
    assert d.same and not d.explained and not d.files


@_SETTINGS
@given(specs(), specs())
def test_diff_nonempty_iff_digests_differ_and_names_every_setting(a, b):
    sa, sb = side(a), side(b)
    d = diff_sides(sa, sb)
    assert d.same == (sa.digest == sb.digest)
    if not d.same:
        assert d.explained or d.file_diffs, "a difference the diff does not show"
        assert d.files
    old, new = _shown_as(sa.spec), _shown_as(sb.spec)
    changed = {k for k in old.keys() | new.keys()
               if k not in old or k not in new or repr(old[k]) != repr(new[k])}
    shown = {c.setting for c in (*d.experiment, *d.resources, *d.reward, *d.spec_only)}
    assert changed <= shown
    if d.same:
        assert not changed


def _shown_as(spec) -> dict:
    """What a reviewer must see change: every setting (a table entry by entry),
    the reward plug-in and each of its options, and the GPUs set aside."""
    out = {}
    for name, value in spec_settings(spec):
        if isinstance(value, dict):
            out.update({f"{name}.{sub}": v for sub, v in flatten_table(value)})
        else:
            out[name] = value
    out["reward.plugin"] = spec.reward.plugin
    out.update({f"reward.options.{k}": v for k, v in flatten_table(spec.reward.options or {})})
    out["resources.reward_gpus"] = spec.resources.reward_gpus
    return out
