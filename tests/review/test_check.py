"""`tutorrl check`: the staleness gate, on real folders through the real CLI."""

from __future__ import annotations

import shutil

import pytest

from review_helpers import base, toml_bytes, with_
from tutorrl.cli import main


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "grpo.toml").write_bytes(toml_bytes(base()))
    assert main(["compile", "specs/grpo.toml"]) == 0
    return tmp_path


def _bundles(root):
    return sorted(p.name for p in (root / "bundles").iterdir())


def test_up_to_date(repo, capsys):
    capsys.readouterr()
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "ok" in out and "every bundle is up to date" in out


def test_stale_bundle_fails_with_diff_and_fix(repo, capsys):
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), actor__lr=2e-6)))
    capsys.readouterr()
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    (old,) = _bundles(repo)
    assert "stale" in out and f"bundles/{old}" in out
    assert "actor.lr: 1e-06 -> 2e-06" in out  # the diff explains the staleness
    assert "tutorrl compile specs/grpo.toml" in out
    assert f"orphan  bundles/{old}" in out and f"rm -r bundles/{old}" in out
    # Following the advice makes the gate pass.
    assert main(["compile", "specs/grpo.toml"]) == 0
    shutil.rmtree(repo / "bundles" / old)
    assert main(["check"]) == 0


def test_missing_bundle_for_new_spec(repo, capsys):
    (repo / "specs" / "other.toml").write_bytes(toml_bytes(with_(base(), experiment__name="other")))
    capsys.readouterr()
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "no bundle of this experiment is committed" in out
    assert "tutorrl compile specs/other.toml" in out


def test_orphan_bundle_fails(repo, capsys):
    (repo / "specs" / "grpo.toml").unlink()
    capsys.readouterr()
    assert main(["check"]) == 1
    assert "orphan" in capsys.readouterr().out


def test_tampered_bundle_is_an_error(repo, capsys):
    (bundle,) = _bundles(repo)
    launch = repo / "bundles" / bundle / "launch.sh"
    launch.write_text(launch.read_text() + "# edited\n")
    capsys.readouterr()
    assert main(["check"]) == 2
    assert "launch.sh was modified" in capsys.readouterr().out


def test_spec_that_does_not_compile_is_an_error(repo, capsys):
    (repo / "specs" / "bad.toml").write_text("[experiment]\nname = 1\n")
    capsys.readouterr()
    assert main(["check"]) == 2
    out = capsys.readouterr().out
    assert "specs/bad.toml does not compile" in out and "experiment.name" in out


def test_custom_folders_and_missing_specs(repo, capsys):
    (repo / "specs").rename(repo / "s")
    (repo / "bundles").rename(repo / "b")
    assert main(["check", "--specs", "s", "--bundles", "b"]) == 0
    assert main(["check"]) == 2
    assert "no such spec folder" in capsys.readouterr().err
    (repo / "s" / "grpo.toml").write_bytes(toml_bytes(with_(base(), actor__lr=2e-6)))
    capsys.readouterr()
    assert main(["check", "--specs", "s", "--bundles", "b"]) == 1
    assert "tutorrl compile s/grpo.toml --out b" in capsys.readouterr().out


def test_hook_definition():
    from pathlib import Path

    hooks = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    import yaml

    (hook,) = yaml.safe_load(hooks)
    assert hook["id"] == "tutorrl-check"
    assert hook["entry"] == "tutorrl check --staged" and hook["pass_filenames"] is False
    assert hook["language"] == "python"
    import re

    assert re.search(hook["files"], "specs/x.toml") and re.search(hook["files"], "bundles/0123/launch.sh")
    assert not re.search(hook["files"], "compiler/spec.py")
