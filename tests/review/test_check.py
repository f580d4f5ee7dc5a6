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
    assert not re.search(hook["files"], "compiler/spec/structs.py")


# --- Linear in the number of specs: each spec compiled once, the bundle folder listed once.

@pytest.fixture
def compiles(monkeypatch):
    """Every compile of a spec, wherever it comes from (check's own, or verify_bundle re-deriving one)."""
    from tutorrl.compiler.pipeline import compile as compile_module

    seen: list[str] = []
    real = compile_module.resolve_bytes

    def counting(raw, name):
        seen.append(name)
        return real(raw, name)

    monkeypatch.setattr(compile_module, "resolve_bytes", counting)
    return seen


@pytest.fixture
def many(repo):
    for i in range(4):
        path = f"specs/s{i}.toml"
        (repo / path).write_bytes(toml_bytes(with_(base(), experiment__name=f"exp-{i}")))
        assert main(["compile", path]) == 0
    return repo


def test_each_spec_is_compiled_once_and_the_bundles_listed_once(many, compiles, monkeypatch, capsys):
    from tutorrl.review import check

    listings = []
    real_names = check._WorkTree.names
    monkeypatch.setattr(check._WorkTree, "names", lambda self: listings.append(1) or real_names(self))
    capsys.readouterr()
    assert main(["check"]) == 0
    assert "5 specs: every bundle is up to date" in capsys.readouterr().out
    assert sorted(compiles) == ["specs/grpo.toml"] + [f"specs/s{i}.toml" for i in range(4)]
    assert len(listings) == 1


def test_a_bundle_that_is_not_byte_for_byte_its_spec_is_verified_in_full(many, compiles, capsys):
    """The one-compile comparison never accepts what verify_bundle would refuse."""
    from tutorrl.compiler import compile_spec

    folder = many / "bundles" / compile_spec("specs/s1.toml").id
    compiles.clear()
    (folder / "notes.txt").write_text("hi\n")
    capsys.readouterr()
    assert main(["check"]) == 2
    out = capsys.readouterr().out
    assert "specs/s1.toml: its bundle" in out and "unexpected file notes.txt" in out
    (folder / "notes.txt").unlink()
    # A file swapped for a link to the same bytes.
    launch = folder / "launch.sh"
    (many / "launch.copy").write_bytes(launch.read_bytes())
    launch.unlink()
    launch.symlink_to(many / "launch.copy")
    assert main(["check"]) == 2
    assert "is a symlink" in capsys.readouterr().out
    launch.unlink()
    (many / "launch.copy").rename(launch)
    # Appended records are inspected by verify_bundle: a private key in runs/ is named.
    (folder / "runs").mkdir()
    (folder / "runs" / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n")
    assert main(["check"]) == 2
    assert "holds a private key" in capsys.readouterr().out
    (folder / "runs" / "key.pem").unlink()
    compiles.clear()
    assert main(["check"]) == 0
    # Five specs, and the one bundle with runs/ re-derived by verify_bundle.
    assert len(compiles) == 6 and compiles.count("specs/s1.toml") == 1
