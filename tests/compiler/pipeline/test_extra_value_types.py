"""`[verl] extra_overrides` values against the type verl declares for their key (issue 40, D4).

A string for an integer key (``trainer.nnodes=UNSETVAR_X_END``: an import's
stand-in for an unset ``$SLURM_JOB_NUM_NODES``) compiled into a launch verl
cannot start. Refused now, located; and never what verl itself takes: the
reading is held here to Hydra's own parser and to OmegaConf's typed nodes
(what verl's ``omega_conf_to_dataclass`` merges a section into).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings as hsettings, strategies as st

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.pipeline.value_types import hydra_type, type_refusal
from tutorrl.errors import SpecError


def _compile(extra: list[str]):
    raw = support.spec_toml(experiment={"verl": "0.9.1"}, verl={"extra_overrides": extra}).encode()
    return compile_bytes(raw, "spec.toml")


def _problems(extra: list[str]) -> list[tuple[str, str, str | None]]:
    with pytest.raises(SpecError) as info:
        _compile(extra)
    return [(p.key, p.message, p.hint) for p in info.value.problems]


def test_a_string_for_an_integer_key_is_refused_naming_the_key_the_value_and_the_type():
    ((key, message, hint),) = _problems(["trainer.nnodes=UNSETVAR_SLURM_JOB_NUM_NODES_END"])
    assert key == "verl.extra_overrides.0"
    assert message.startswith("verl 0.9.1 declares 'trainer.nnodes' an integer (default 1); Hydra passes the "
                              "string 'UNSETVAR_SLURM_JOB_NUM_NODES_END'")
    assert hint == "give an integer, e.g. 'trainer.nnodes=1'"


def test_each_wrong_type_is_refused_at_its_own_place():
    problems = _problems(["trainer.nnodes=2", "trainer.val_before_train=maybe", "actor_rollout_ref.actor.optim.betas=5",
                          "algorithm.gamma={a:1}", "trainer.total_epochs=[1,2]", "trainer.log_val_generations="])
    where = {key: message for key, message, _ in problems}
    assert sorted(where) == [f"verl.extra_overrides.{i}" for i in (1, 2, 3, 4, 5)]
    assert "'trainer.val_before_train' a boolean (default true); Hydra passes the string 'maybe'" in where[
        "verl.extra_overrides.1"]
    assert "'actor_rollout_ref.actor.optim.betas' a list (default [0.9, 0.999]); Hydra passes the integer 5" in where[
        "verl.extra_overrides.2"]
    assert "'algorithm.gamma' a number (default 1.0); Hydra passes a table" in where["verl.extra_overrides.3"]
    assert "Hydra passes a list" in where["verl.extra_overrides.4"]
    assert "Hydra passes the string ''" in where["verl.extra_overrides.5"]


@pytest.mark.parametrize("override", [
    'trainer.nnodes="2"',            # OmegaConf's IntegerNode converts it (int("2"))
    "trainer.nnodes=2",
    "actor_rollout_ref.rollout.top_p=0.9",   # declared `top_p: 1` (an int) in verl's yaml; a float is meant
    "algorithm.gamma=1",             # an int for a float
    "algorithm.gamma='0.99'",        # FloatNode converts it
    # declared 2.0 in the yaml, `str | float` in verl's dataclass: its own examples pass a lower_upper pair
    "algorithm.rollout_correction.rollout_is_threshold=0.5_4.0",
    "trainer.val_before_train=False",
    "trainer.val_before_train=0",    # BooleanNode: an int
    "trainer.val_before_train='no'",  # BooleanNode's word
    "actor_rollout_ref.actor.checkpoint.save_contents=model",  # a string for a list: not judged
    "actor_rollout_ref.actor.checkpoint.save_contents=[model]",
    "trainer.nnodes=null",
    "trainer.nnodes=${trainer.n_gpus_per_node}",  # resolved by OmegaConf when verl reads it
    "trainer.nnodes=int('2')",       # Hydra's cast function
])
def test_what_verl_takes_compiles(override):
    assert override.split("=", 1)[0] in _compile([override]).files["launch.sh"].decode()


# Values as scripts write them, and Hydra's grammar around them.
_VALUES = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.sampled_from(["true", "False", "TRUE", "null", "NULL", "inf", "-inf", "nan", "1e-6", "1_000", "1_0.5",
                     ".5", "5.", "007", "0x10", "1e5", "abc", "a b", "yes", "off", "-", "+3", "''", '"4"',
                     "'4.5'", "'true'", "[1,2]", "[]", "{a:1}", "/data/x.parquet", "UNSETVAR_X_END", "$HOME"]),
)


@hsettings(max_examples=300, deadline=None)
@given(_VALUES)
def test_the_type_read_here_is_hydras(value):
    said = hydra_type(value)
    kind, key, parsed = support.parse_override(f"k={value}")
    assert said is not None
    hydra_kind = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict",
                  type(None): "null"}[type(parsed)]
    assert said[0] == hydra_kind, (value, parsed)
    if hydra_kind == "str":
        assert said[1] == parsed


@dataclasses.dataclass
class _Typed:
    i: int = 1
    f: float = 1.0
    b: bool = True
    items: list = dataclasses.field(default_factory=list)


@hsettings(max_examples=300, deadline=None)
@given(_VALUES, st.sampled_from([("i", "int", 1), ("f", "float", 1.0), ("b", "bool", True),
                                 ("items", "list", [])]))
def test_a_value_refused_here_is_one_omegaconfs_typed_node_refuses(value, field):
    # What verl's omega_conf_to_dataclass does with the composed value: OmegaConf.structured + merge.
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigTypeError, ValidationError

    name, declared, default = field
    _, _, parsed = support.parse_override(f"k={value}")
    refused = type_refusal("k", value, declared, default, "0.9.1") is not None
    try:
        OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(_Typed), OmegaConf.create({name: parsed})))
        converts = True
    except (ValidationError, ConfigTypeError):
        converts = False
    if refused:
        # Never refused where a typed section takes it; a plain section takes it as the wrong type.
        assert not converts, (value, declared)
    elif not converts:
        # Left alone, though a typed node refuses it: only the cases the module says verl reads as meant.
        # (null: verl's "unset"; a typed field that is not Optional refuses it, one that is takes it, and
        # which is which the key set does not say.)
        assert parsed is None or (declared == "int" and isinstance(parsed, (float, bool))) or \
               (declared == "float" and isinstance(parsed, (bool, str))) or \
               (declared == "bool" and isinstance(parsed, float)) or \
               (declared == "list" and isinstance(parsed, str)), (value, declared, parsed)
