"""`tutorrl schema` against a real JSON Schema validator, field for field with the compiler."""

from __future__ import annotations

import copy
import json
import tomllib

import jsonschema
import pytest

from review_helpers import base, toml_bytes
from tutorrl.cli import main
from tutorrl.compiler import compile_bytes
from tutorrl.errors import SpecError
from tutorrl.review.schema import spec_schema

import support


@pytest.fixture(scope="module")
def validator():
    schema = spec_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_schema_is_strict_and_documented():
    schema = spec_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema" and schema["title"]
    # Only the release is required: every verl setting left out is verl's default.
    assert schema["required"] == ["experiment"]
    # ... or, in a spec that extends a base, comes from the base.
    assert schema["$defs"]["Experiment"]["anyOf"] == [{"required": ["verl"]}, {"required": ["extends"]}]
    # A recipe's code is named by its folder ([experiment.recipe] path).
    assert [name for name, d in schema["$defs"].items() if d.get("required")] == [
        "Recipe", "reward-plugin:chess-prompted.PromptedOptions", "reward-plugin:chess-simulator.SimulatorOptions"]
    objects = [n for n in _walk(schema) if n.get("type") == "object" and "properties" in n]
    assert len(objects) >= 10 and all(n["additionalProperties"] is False for n in objects)
    # Every field an editor offers says what it is.
    for name, d in schema["$defs"].items():
        for field, prop in d.get("properties", {}).items():
            assert prop.get("description"), f"{name}.{field} has no description"
    # TOML has no null: "unset" is "left out", never a value an editor offers.
    assert not [n for n in _walk(schema) if n.get("type") == "null"]
    # Patterns are ECMA-262 (what editors run): Python's end-of-string \Z would be a literal Z there.
    patterns = [n["pattern"] for n in _walk(schema) if isinstance(n.get("pattern"), str)]
    assert len(patterns) >= 5 and not [p for p in patterns if "\\Z" in p or "\\A" in p or "(?P" in p]
    assert schema["$defs"]["Experiment"]["properties"]["verl"]["pattern"].endswith("$")
    rollout = schema["$defs"]["Rollout"]["properties"]
    assert rollout["engine"]["enum"] == ["hf", "sglang", "vllm"] and rollout["engine"]["description"]
    assert rollout["top_p"]["exclusiveMinimum"] == 0.0 and rollout["top_p"]["maximum"] == 1.0


def test_reward_options_follow_the_plugin():
    """Each installed plug-in's options struct, chosen by reward.plugin, with its own documentation."""
    reward = spec_schema()["$defs"]["Reward"]
    assert reward["properties"]["plugin"]["enum"] == ["chess-prompted", "chess-simulator"]
    chosen = {b["if"]["properties"]["plugin"]["const"]: b["then"]["properties"]["options"]["$ref"]
              for b in reward["allOf"]}
    assert chosen == {"chess-prompted": "#/$defs/reward-plugin:chess-prompted.PromptedOptions",
                      "chess-simulator": "#/$defs/reward-plugin:chess-simulator.SimulatorOptions"}
    sim = spec_schema()["$defs"]["reward-plugin:chess-simulator.SimulatorOptions"]
    assert sim["description"].startswith("Options of the reward plug-in chess-simulator")
    assert set(sim["required"]) == {"table", "adapter", "heads_checkpoint", "heads_metrics"}
    assert sim["properties"]["device"]["default"] == "cuda" and sim["properties"]["device"]["pattern"].endswith("$")


def test_cli_prints_the_schema(capsys):
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == spec_schema()


def _examples():
    specs = support.example_specs()
    return specs or []


@pytest.mark.parametrize("text", [toml_bytes(base())] + [p.read_bytes() for p in _examples()],
                         ids=["base"] + [p.name for p in _examples()])
def test_valid_specs_validate(validator, text):
    compile_bytes(text, "spec.toml")  # the compiler accepts it ...
    assert list(validator.iter_errors(tomllib.loads(text.decode()))) == []  # ... and so does the schema


def _schema_keys(validator, data) -> set[str]:
    """The dotted keys the schema's errors point at, in the compiler's spelling."""
    keys = set()
    for error in validator.iter_errors(data):
        path = [str(p) for p in error.absolute_path]
        if error.validator == "additionalProperties":
            allowed = set(error.schema.get("properties", {}))
            keys |= {".".join(path + [k]) for k in error.instance if k not in allowed}
        elif error.validator == "required":
            keys |= {".".join(path + [k]) for k in error.validator_value if k not in error.instance}
        elif error.validator == "dependentRequired":
            # The compiler names the field that needs the missing one.
            keys |= {".".join(path + [k]) for k, needs in error.validator_value.items()
                     if k in error.instance and not set(needs) <= set(error.instance)}
        elif error.validator == "anyOf" and all(set(b) == {"required"} for b in error.validator_value):
            # [experiment] takes verl or extends: the compiler names verl, the first.
            keys.add(".".join(path + [error.validator_value[0]["required"][0]]))
        elif error.validator == "propertyNames":
            keys.add(".".join(path + [str(error.instance)]))
        else:
            keys.add(".".join(path))
    return keys


def _broken(mutate):
    data = copy.deepcopy(base())
    mutate(data)
    return data


BROKEN = {
    "unknown key": (lambda d: d["actor"].update(lrr=1e-6), "actor.lrr"),
    "unknown section": (lambda d: d.update(rollouts={"n": 2}), "rollouts"),
    "wrong type": (lambda d: d["data"].update(seed="one"), "data.seed"),
    "wrong type in a list": (lambda d: d["trainer"].update(loggers=["console", 3]), "trainer.loggers.1"),
    "table for a value": (lambda d: d["model"].update(path={"x": 1}), "model.path"),
    "out of range": (lambda d: d["rollout"].update(top_p=1.5), "rollout.top_p"),
    "out of range, nested": (lambda d: d["model"].setdefault("lora", {}).update(rank=-1), "model.lora.rank"),
    "below minimum": (lambda d: d["trainer"].update(total_steps=0), "trainer.total_steps"),
    "bad enum": (lambda d: d["rollout"].update(engine="vlm"), "rollout.engine"),
    "bad enum in a list": (lambda d: d["trainer"].update(loggers=["console", "wandbb"]), "trainer.loggers.1"),
    "bad pattern": (lambda d: d["experiment"].update(verl="latest"), "experiment.verl"),
    "missing key": (lambda d: d["experiment"].pop("verl"), "experiment.verl"),
    "missing section": (lambda d: d.pop("experiment"), "experiment"),
    # [reward.options] against the options of the plug-in reward.plugin names.
    "unknown plug-in": (lambda d: d["reward"].update(plugin="chess-simulatr"), "reward.plugin"),
    "unknown option": (lambda d: d["reward"]["options"].update(adaptr="x"), "reward.options.adaptr"),
    "option of the other plug-in": (lambda d: d["reward"]["options"].update(student_model="m"),
                                    "reward.options.student_model"),
    "option out of range": (lambda d: d["reward"]["options"].update(scale_cp=0.0), "reward.options.scale_cp"),
    "option bad pattern": (lambda d: d["reward"]["options"].update(device="gpu"), "reward.options.device"),
    "missing option": (lambda d: d["reward"]["options"].pop("table"), "reward.options.table"),
    "options without a plug-in": (lambda d: d["reward"].pop("plugin"), "reward.options"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_broken_spec_fails_for_the_field_compile_names(validator, case):
    mutate, key = BROKEN[case]
    data = _broken(mutate)
    with pytest.raises(SpecError) as caught:
        compile_bytes(toml_bytes(data), "spec.toml")
    compiler_keys = {p.key for p in caught.value.problems}
    assert compiler_keys == {key}
    # The schema names the same field; for a field that is one value or a list
    # (trainer.loggers), JSON Schema's anyOf reports the field, the compiler the element.
    (schema_key,) = _schema_keys(validator, data)
    assert key == schema_key or key.startswith(schema_key + ".") and schema_key == "trainer.loggers"
