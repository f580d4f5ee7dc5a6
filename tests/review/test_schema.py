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
    assert set(schema["required"]) >= {"experiment", "data", "model", "rollout", "trainer", "reward"}
    objects = [n for n in _walk(schema) if n.get("type") == "object" and "properties" in n]
    assert len(objects) >= 10 and all(n["additionalProperties"] is False for n in objects)
    # TOML has no null: "unset" is "left out", never a value an editor offers.
    assert not [n for n in _walk(schema) if n.get("type") == "null"]
    rollout = schema["$defs"]["Rollout"]["properties"]
    assert rollout["engine"]["enum"] == ["sglang", "vllm"] and rollout["engine"]["description"]
    assert rollout["top_p"]["exclusiveMinimum"] == 0.0 and rollout["top_p"]["maximum"] == 1.0


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
    "missing key": (lambda d: d["trainer"].pop("total_steps"), "trainer.total_steps"),
    "missing section": (lambda d: d.pop("rollout"), "rollout"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_broken_spec_fails_for_the_field_compile_names(validator, case):
    mutate, key = BROKEN[case]
    data = _broken(mutate)
    with pytest.raises(SpecError) as caught:
        compile_bytes(toml_bytes(data), "spec.toml")
    compiler_keys = {p.key for p in caught.value.problems}
    assert compiler_keys == {key}
    assert _schema_keys(validator, data) == compiler_keys
