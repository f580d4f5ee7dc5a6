"""``tutorrl compile SPEC --set PATH=VALUE``: typed as the setting says, placed at ``--set`` in errors."""

from __future__ import annotations

import json
import tomllib

import pytest

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.pipeline.family import compile_family
from tutorrl.compiler.spec.compose import typed_value
from tutorrl.errors import SpecError

SPEC = support.SPECS / "tiny_cpu_grpo.toml"
BASE = SPEC.read_bytes()


@pytest.mark.parametrize("setting, text, value", [
    ("actor.lr", "3e-6", 3e-6),
    ("rollout.n", "2", 2),
    ("actor.use_kl_loss", "true", True),
    ("experiment.name", "123", "123"),
    ("experiment.name", '"quoted"', "quoted"),
    ("trainer.loggers", '["console", "tensorboard"]', ["console", "tensorboard"]),
    ("env.set.MODE", "3", "3"),
])
def test_a_value_is_typed_as_its_setting_says(setting, text, value):
    [launch] = compile_family(str(SPEC), sets=[f"{setting}={text}"])
    spec = tomllib.loads(launch.bundle.files["spec.toml"].decode())
    table = spec
    for part in setting.split("."):
        table = table[part]
    assert table == value and type(table) is type(value)


def test_the_bundle_is_the_bundle_of_the_spec_with_that_value_written():
    [launch] = compile_family(str(SPEC), sets=["actor.lr=3e-6", "rollout.n=2"])
    written = BASE.replace(b"[actor]\n", b"[actor]\nlr = 3e-6\n").replace(b"n = 1\n", b"n = 2\n")
    alone = compile_bytes(written, "x.toml")
    assert launch.bundle.id == alone.id
    manifest = json.loads(launch.bundle.files["manifest.json"])
    assert manifest["set"] == ["actor.lr=3e-6", "rollout.n=2"]
    assert list(manifest["sources"]) == ["tiny_cpu_grpo.toml"]


@pytest.mark.parametrize("word, words", [
    ("rollout.n=fast", ["--set: rollout.n: expected an integer", "set in", "overridden in --set"]),
    ("actor.lrr=1", ["--set: actor.lrr: no setting 'lrr' in [actor]", "did you mean 'actor.lr'"]),
    ("actor.lr", ["expected PATH=VALUE"]),
    ("=3", ["expected PATH=VALUE"]),
    ("sweep.grid=1", ["not a setting"]),
    # typed_value reads `v = TEXT`: what follows the first value was dropped with rc 0 (issue 43).
    ('rollout.n=2\n[env.set]\nX = "y"', ["--set: rollout.n: 'rollout.n=2\\n[env.set]\\nX = \"y\"': the value is more "
                                          "than one TOML value; text follows the first at line 2, column 1 of the value",
                                          "give each setting its own --set"]),
    ('experiment.name="a"\n  b = 1', ["the value is more than one TOML value; text follows the first at line 2, "
                                       "column 3"]),
])
def test_a_bad_set_is_located_as_set(tmp_path, word, words):
    result = support.cli("compile", str(SPEC), "--set", word, "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    for w in words:
        assert w in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_value_written_over_several_lines_is_still_one_value():
    [launch] = compile_family(str(SPEC), sets=['trainer.loggers=[\n  "console",\n]'])
    assert tomllib.loads(launch.bundle.files["spec.toml"].decode())["trainer"]["loggers"] == ["console"]


def test_a_swept_setting_cannot_also_be_set(tmp_path):
    (tmp_path / "base.toml").write_bytes(BASE)
    (tmp_path / "s.toml").write_text('[experiment]\nextends = "base.toml"\n[sweep]\ngrid = { "rollout.n" = [1, 2] }\n')
    with pytest.raises(SpecError, match="rollout.n is swept; --set cannot also set it"):
        compile_family(str(tmp_path / "s.toml"), sets=["rollout.n=4"])
    # Another setting applies to every point.
    launches = compile_family(str(tmp_path / "s.toml"), sets=["actor.lr=3e-6"])
    assert all(b"lr = 3e-06" in launch.bundle.files["spec.toml"] for launch in launches)


def test_typed_value_keeps_text_the_field_cannot_read_as_toml():
    assert typed_value("a b", None) == "a b"
    assert typed_value("[1, 2]", None) == [1, 2]
