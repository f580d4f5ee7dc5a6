"""Entries of a table whose default is an interpolation of another table.

verl's Megatron config has the ref's ``override_transformer_config`` default to
the actor's (``${oc.select:actor_rollout_ref.actor.megatron.override_transformer_config,{}}``,
0.5.0 on; the critic's too at 0.4.0-0.5.0). Hydra looks a key up *through* the
interpolation: ``+ref...X`` fails ("Could not append to config. An item is
already at ...") as soon as the actor's table has ``X`` -- declared there
(``recompute_method``) or written by the spec a moment before. ``++`` (add, or
set when present) is the one prefix Hydra takes in both cases, and the one
verl's own scripts use for it. Proven here against verl 0.9.1's real config.
"""

import pytest

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.pipeline import resolve_bytes

ACTOR = "actor_rollout_ref.actor.megatron.override_transformer_config"
REF = "actor_rollout_ref.ref.megatron.override_transformer_config"


def _spec(actor: dict | None, ref: dict | None, release: str = "0.9.1") -> bytes:
    actor_table = {"strategy": "megatron"}
    if actor is not None:
        actor_table["megatron"] = {"transformer_overrides": actor}
    tables = {"experiment": {"verl": release}, "actor": actor_table}
    if ref is not None:
        tables["ref"] = {"megatron": {"transformer_overrides": ref}}
    return support.spec_toml(**tables).encode()


def _composed(raw: bytes):
    _, _, resolved, _ = resolve_bytes(raw, "spec.toml")
    texts = [o.text for o in resolved.overrides if not o.runtime]
    return texts, support.compose_verl(resolved.config_name, texts)


@pytest.mark.needs_verl
def test_actor_and_ref_set_the_same_entry_and_hydra_composes_the_launch():
    texts, config = _composed(_spec({"gradient_accumulation_fusion": False}, {"gradient_accumulation_fusion": False}))
    assert f"+{ACTOR}.gradient_accumulation_fusion=false" in texts
    assert f"++{REF}.gradient_accumulation_fusion=false" in texts
    actor = support.lookup(config, ACTOR)
    assert actor["gradient_accumulation_fusion"] is False and actor["recompute_modules"] == ["core_attn"]
    # Written, the ref's table stops following the actor's: it holds what the spec gave it (verl's own reading
    # of `++ref...=`, the same as the script the defect was found in).
    assert support.lookup(config, REF) == {"gradient_accumulation_fusion": False}


@pytest.mark.needs_verl
def test_a_ref_entry_the_actors_table_declares_composes():
    # recompute_method is declared in the actor's table: through the interpolation a '+' on the ref finds it.
    texts, config = _composed(_spec(None, {"recompute_method": "uniform"}))
    assert f'++{REF}.recompute_method="uniform"' in texts
    assert support.lookup(config, REF) == {"recompute_method": "uniform"}


@pytest.mark.needs_verl
def test_the_ref_entries_alone_and_the_actor_entries_alone_compose():
    _, config = _composed(_spec({"moe_router_dtype": "fp32"}, None))
    assert support.lookup(config, REF)["moe_router_dtype"] == "fp32"  # the interpolation still follows the actor
    _, config = _composed(_spec(None, {"moe_router_dtype": "fp32"}))
    assert support.lookup(config, REF) == {"moe_router_dtype": "fp32"}


def test_a_table_that_interpolates_nothing_keeps_its_plus():
    launch = compile_bytes(_spec({"moe_router_dtype": "fp32", "recompute_method": "uniform"}, None),
                           "spec.toml").files["launch.sh"].decode()
    assert f"'+{ACTOR}.moe_router_dtype=\"fp32\"'" in launch and f"++{ACTOR}" not in launch
    assert f"'{ACTOR}.recompute_method=\"uniform\"'" in launch  # declared: no prefix


@pytest.mark.parametrize("release", ["0.4.1", "0.5.0"])
def test_the_critic_table_interpolated_at_older_releases_is_written_with_plus_plus(release):
    raw = support.spec_toml(experiment={"verl": release}, actor={"strategy": "megatron"},
                            rollout={"engine": "vllm"},
                            algorithm={"adv_estimator": "gae"},
                            critic={"megatron": {"transformer_overrides": {"moe_router_dtype": "fp32"}}}).encode()
    _, _, resolved, _ = resolve_bytes(raw, "spec.toml")
    texts = [o.text for o in resolved.overrides if not o.runtime]
    assert '++critic.megatron.override_transformer_config.moe_router_dtype="fp32"' in texts
