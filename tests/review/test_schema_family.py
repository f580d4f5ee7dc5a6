"""The JSON Schema covers what a spec is composed of: ``[experiment] extends`` and ``[sweep]``."""

from __future__ import annotations

import tomllib

import jsonschema
import pytest

from tutorrl.compiler.pipeline.family import Source, compile_chain, compile_family
from tutorrl.errors import SpecError
from tutorrl.review.schema import spec_schema

import support

BASE = (support.SPECS / "tiny_cpu_grpo.toml").read_bytes()


@pytest.fixture(scope="module")
def validator():
    schema = spec_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


CHILDREN = [
    '[experiment]\nextends = "base.toml"\n[actor]\nlr = 3e-6\n',
    '[experiment]\nextends = "base.toml"\n[sweep]\ngrid = { "actor.lr" = [1e-6, 3e-6], "rollout.n" = [1, 2] }\n',
    '[experiment]\nextends = "base.toml"\n[sweep]\nzip = { "rollout.n" = [1, 2], "data.train_batch_size" = [4, 8] }\n',
]


@pytest.mark.parametrize("text", CHILDREN)
def test_specs_that_compile_validate(validator, text):
    compile_chain([Source("c.toml", "c.toml", text.encode()), Source("base.toml", "base.toml", BASE)])
    assert not list(validator.iter_errors(tomllib.loads(text)))


BROKEN = [
    '[experiment]\nextends = ""\n',
    '[experiment]\nextends = 3\n',
    '[experiment]\nname = "x"\n',  # neither a release nor a base
    '[experiment]\nextends = "base.toml"\n[sweep]\ngrids = {}\n',
    '[experiment]\nextends = "base.toml"\n[sweep]\ngrid = { "actor.lr" = [] }\n',
    '[experiment]\nextends = "base.toml"\n[sweep]\ngrid = { "actor.lr" = 1e-6 }\n',
    '[experiment]\nextends = "base.toml"\n[sweep]\ngrid = { "actor lr" = [1e-6] }\n',
]


@pytest.mark.parametrize("text", BROKEN)
def test_specs_that_the_compiler_refuses_fail_the_schema_too(validator, text, tmp_path):
    (tmp_path / "base.toml").write_bytes(BASE)
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(SpecError):
        compile_family(str(tmp_path / "c.toml"))
    assert list(validator.iter_errors(tomllib.loads(text)))
