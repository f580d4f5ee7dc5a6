"""A spec where a bundle is expected (and the reverse) is named for what it is,
with the command that gets the user going: exit 2, one message, no traceback."""

from __future__ import annotations

import shutil

import pytest

import support


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "specs").mkdir()
    shutil.copy(support.SPECS / "chess_tutor_grpo.toml", tmp_path / "specs" / "grpo.toml")
    done = support.cli("compile", "specs/grpo.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path, done.stdout.strip().splitlines()[-1]


def _refused(result) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize("command", ["verify", "run", "runs", "evidence"])
def test_spec_given_where_a_bundle_is_expected(tree, command):
    root, _ = tree
    line = _refused(support.cli(command, "specs/grpo.toml", cwd=root))
    assert line == ("error: specs/grpo.toml is a spec file, not a bundle folder; "
                    "compile it first: tutorrl compile specs/grpo.toml")


def test_spec_without_toml_suffix_is_still_recognised(tree):
    root, _ = tree
    shutil.copy(root / "specs" / "grpo.toml", root / "my spec")
    line = _refused(support.cli("verify", "my spec", cwd=root))
    assert "is a spec file" in line and line.endswith("tutorrl compile 'my spec'")


def test_other_things_given_as_a_bundle(tree):
    root, bundle = tree
    (root / "notes.txt").write_text("hello\n")
    assert "notes.txt is a file, not a bundle folder" in _refused(support.cli("verify", "notes.txt", cwd=root))
    line = _refused(support.cli("run", f"{bundle}/launch.sh", cwd=root))
    assert f"is a file inside the bundle folder {bundle}; give the folder: {bundle}" in line
    line = _refused(support.cli("verify", "bundles", cwd=root))
    assert line.startswith("error: bundles is a folder of bundles") and bundle in line
    line = _refused(support.cli("runs", "specs", cwd=root))
    assert "specs is a folder of spec files" in line and "tutorrl compile specs/grpo.toml" in line
    assert _refused(support.cli("evidence", "nowhere", cwd=root)) == "error: nowhere: no such bundle folder"


def test_a_folder_whose_toml_is_no_spec_suggests_no_compile_of_it(tree):
    """The repository root: pyproject.toml parses, has no [experiment], and is no spec to compile."""
    root, _ = tree
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')
    line = _refused(support.cli("verify", ".", cwd=root))
    assert line == ("error: .: no manifest.json; not a tutorrl bundle "
                    "(a bundle folder is what `tutorrl compile SPEC` writes and prints)")
    assert _refused(support.cli("run", "pyproject.toml", cwd=root)).startswith(
        "error: pyproject.toml is a file, not a bundle folder")
    # Beside a real spec, the spec is the one suggested (sorted first or not).
    shutil.copy(root / "specs" / "grpo.toml", root / "z.toml")
    assert _refused(support.cli("verify", ".", cwd=root)).endswith("compile a spec first: tutorrl compile z.toml")


def test_bundle_given_to_compile(tree):
    root, bundle = tree
    line = _refused(support.cli("compile", bundle, cwd=root))
    assert line == (f"error: {bundle} is a bundle folder, not a spec file; it is already compiled: "
                    f"tutorrl verify {bundle}, tutorrl run {bundle}")
    assert "is a folder, not a spec file" in _refused(support.cli("compile", "specs", cwd=root))
    # Nothing was written by the refused compiles.
    assert sorted(p.name for p in (root / "bundles").iterdir()) == [bundle.split("/")[-1]]


def test_the_bundle_itself_still_verifies(tree):
    root, bundle = tree
    result = support.cli("verify", bundle, cwd=root)
    assert result.returncode == 0 and result.stdout.startswith(f"ok: {bundle} is bundle sha256:")
