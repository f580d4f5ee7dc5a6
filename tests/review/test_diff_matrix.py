"""``tutorrl diff`` over a set: the settings that vary across the launches, one column each."""

from __future__ import annotations

import json

import pytest

import support
from tutorrl import cli

BASE = (support.SPECS / "tiny_cpu_grpo.toml").read_bytes()


@pytest.fixture
def sweep(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.toml").write_bytes(BASE)
    (tmp_path / "sweep.toml").write_text('[experiment]\nextends = "base.toml"\n\n[sweep]\n'
                                         'grid = { "actor.lr" = [1e-5, 1e-6], "rollout.n" = [1, 2] }\n')
    assert cli.main(["compile", "sweep.toml", "--out", "out"]) == 0
    paths = capsys.readouterr().out.split()
    return paths


def test_a_folder_of_bundles_is_one_matrix_in_its_sweeps_order(sweep, capsys):
    assert cli.main(["diff", "out", "--format", "json"]) == 1
    m = json.loads(capsys.readouterr().out)
    assert list(m["settings"]) == ["experiment.name", "actor.lr", "rollout.n"]
    assert m["settings"]["actor.lr"] == [1e-6, 1e-6, 1e-5, 1e-5]
    assert m["settings"]["rollout.n"] == [1, 2, 1, 2]
    assert [launch["point"] for launch in m["launches"]][0] == {"actor.lr": 1e-6, "rollout.n": 1}
    assert m["same"] is False


def test_a_sweeps_spec_and_its_bundles_give_the_same_matrix(sweep, capsys):
    assert cli.main(["diff", "sweep.toml", "--format", "json"]) == 1
    from_spec = json.loads(capsys.readouterr().out)
    assert cli.main(["diff", *sweep, "--format", "json"]) == 1
    from_bundles = json.loads(capsys.readouterr().out)
    assert from_spec["settings"] == from_bundles["settings"]
    assert [launch["bundle"] for launch in from_spec["launches"]] == [p.split("/")[-1] for p in sweep]


def test_text_and_markdown_have_a_row_per_varying_setting(sweep, capsys):
    assert cli.main(["diff", "out"]) == 1
    text = capsys.readouterr().out
    assert text.startswith("4 launches; 3 settings vary across them")
    row = next(line for line in text.splitlines() if line.startswith("rollout.n"))
    assert row.split() == ["rollout.n", "1", "2", "1", "2"]
    assert "trainer.total_steps" not in text
    assert cli.main(["diff", "out", "--format", "markdown"]) == 1
    md = capsys.readouterr().out.splitlines()
    assert md[2].startswith("| setting | ") and md[3] == "|" + "---|" * 5


def test_the_same_launch_named_twice_is_no_difference(sweep, capsys):
    assert cli.main(["diff", sweep[0], sweep[0], sweep[0]]) == 0
    assert "0 settings vary" in capsys.readouterr().out


def test_a_partial_base_and_its_child_are_compared_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.toml").write_bytes(BASE.replace(b'verl = "0.5.0"\n', b""))  # no release: no launch alone
    (tmp_path / "child.toml").write_text('[experiment]\nextends = "base.toml"\nverl = "0.5.0"\n'
                                         '[actor]\nlr = 3e-6\n[trainer]\nloggers = ["console", "tensorboard"]\n')
    assert cli.main(["diff", "base.toml", "child.toml", "--format", "json"]) == 1
    changes = {c["setting"]: (c["base"], c["spec"]) for c in json.loads(capsys.readouterr().out)["changes"]}
    assert changes == {"experiment.verl": (None, "0.5.0"), "actor.lr": (None, 3e-6),
                       "trainer.loggers": (["console"], ["console", "tensorboard"])}
    assert cli.main(["diff", "base.toml", "child.toml"]) == 1
    assert "~ trainer.loggers: [\"console\"] -> [\"console\", \"tensorboard\"]" in capsys.readouterr().out
    # A spec that does not compile and extends nothing it is compared with is still its error.
    (tmp_path / "other.toml").write_bytes(BASE)
    assert cli.main(["diff", "base.toml", "other.toml"]) == 2
