"""A recipe entry point's code pinned into the bundle ([experiment.recipe]): the folder digest, the
compile's refusals, launch.sh's check at job start (real bash, real Python) and `tutorrl verify`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import support
from tutorrl.compiler import compile_spec, verify_bundle
from tutorrl.compiler.bundle import write_bundle
from tutorrl.compiler.pipeline.recipe_code import changes, recipe_digest, recipe_files
from tutorrl.errors import BundleError, SpecError

STANDIN = support.REPO / "specs" / "recipes"
DAPO = support.REPO / "specs" / "dapo_example.toml"

names = st.lists(st.from_regex(r"[a-z]{1,6}(/[a-z]{1,6}){0,2}\.py", fullmatch=True), min_size=1, max_size=6,
                 unique=True).filter(lambda ns: not any(a != b and b.startswith(a[:-3] + "/")
                                                        for a in ns for b in ns))


def _write(folder: Path, files: dict[str, bytes], order) -> None:
    for rel in order:
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(files[rel])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=names, data=st.data())
def test_the_digest_is_the_files_not_the_order_they_were_made_in(tmp_path_factory, names, data):
    files = {n: data.draw(st.binary(max_size=64)) for n in names}
    a, b = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    _write(a, files, names)
    _write(b, files, data.draw(st.permutations(names)))
    (b / "__pycache__").mkdir(exist_ok=True)
    (b / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"cache")
    assert recipe_files(a) == recipe_files(b)
    assert recipe_digest(recipe_files(a)) == recipe_digest(recipe_files(b))
    # Nothing of the folder's own place is in what is hashed.
    assert str(a) not in repr(recipe_files(a))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=names, data=st.data())
def test_any_single_byte_change_is_detected_and_named(tmp_path_factory, names, data):
    files = {n: data.draw(st.binary(min_size=1, max_size=64)) for n in names}
    folder = tmp_path_factory.mktemp("r")
    _write(folder, files, names)
    before = recipe_files(folder)
    rel = data.draw(st.sampled_from(names))
    at = data.draw(st.integers(0, len(files[rel]) - 1))
    changed = bytearray(files[rel])
    changed[at] = (changed[at] + data.draw(st.integers(1, 255))) % 256
    (folder / rel).write_bytes(bytes(changed))
    after = recipe_files(folder)
    assert recipe_digest(after) != recipe_digest(before)
    assert changes(before, after) == [f"{rel} changed"]


def test_changes_name_added_and_removed_files():
    assert changes({"a.py": "1", "b.py": "2"}, {"a.py": "1", "c.py": "3"}) == ["c.py added", "b.py removed"]


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working folder holding a copy of the stand-in recipe where the example spec's root points."""
    shutil.copytree(STANDIN, tmp_path / "specs" / "recipes")
    shutil.copy(DAPO, tmp_path / "dapo.toml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECIPE_ROOT", raising=False)
    return tmp_path


def _spec(here: Path, recipe: str, *, entry: str = "dapo", verl: str = "0.8.0") -> Path:
    text = DAPO.read_text().replace('path = "$RECIPE_ROOT/recipe"\n', recipe)
    text = text.replace('entry = "dapo"', f'entry = "{entry}"').replace('verl = "0.8.0"', f'verl = "{verl}"')
    path = here / "spec.toml"
    path.write_text(text)
    return path


def test_the_bundle_pins_each_file_and_names_no_absolute_path(here):
    compiled = compile_spec(str(here / "dapo.toml"))
    spec_toml = compiled.files["spec.toml"].decode()
    assert '"dapo/main_dapo.py" = ' in spec_toml and 'digest = "sha256:' in spec_toml
    assert all(str(here) not in data.decode() for data in compiled.files.values())
    # The committed bundle is the same bytes from any folder the stand-in is found in.
    assert (support.BUNDLES / compiled.id).is_dir()


def test_a_recipe_entry_without_its_code_is_refused(here):
    with pytest.raises(SpecError) as exc:
        compile_spec(str(_spec(here, 'path = "nowhere/recipe"\n')))
    assert "experiment.recipe.path" in str(exc.value) and "'nowhere/recipe' is not a folder here" in str(exc.value)
    text = DAPO.read_text()
    a = text.index("\n[experiment.recipe]")
    (here / "bare.toml").write_text(text[:a] + text[text.index("[data]"):].replace(
        'RECIPE_ROOT = { default = "specs/recipes" }\n', ""))
    with pytest.raises(SpecError) as exc:
        compile_spec(str(here / "bare.toml"))
    said = str(exc.value)
    assert "experiment.entry" in said and "[experiment.recipe] path" in said and "verl-recipe" in said


def test_the_folder_must_carry_the_modules_name(here):
    shutil.copytree(here / "specs" / "recipes" / "recipe", here / "verl-recipe")
    with pytest.raises(SpecError, match=r"named 'verl-recipe'.*folder named 'recipe'"):
        compile_spec(str(_spec(here, 'path = "verl-recipe"\n')))


def test_a_release_where_the_recipes_module_stops_at_import_is_refused_naming_why_and_where_it_starts(here):
    # verl 0.9.0's tree pins this DAPO commit, but its main_dapo stops at import with verl 0.9.0 (measured with
    # the real `--cfg job`; entries.toml's stops): its key sets exist there, the compile refuses it.
    with pytest.raises(SpecError) as exc:
        compile_spec(str(_spec(here, 'path = "$RECIPE_ROOT/recipe"\n', verl="0.9.0")))
    (problem,) = exc.value.problems
    assert problem.key == "experiment.entry" and problem.line is not None
    assert problem.message.startswith("entry point 'dapo' (recipe.dapo.main_dapo) stops at import with verl 0.9.0: "
                                      "main_dapo imports TaskRunner")
    assert problem.hint == "target verl 0.7.1 or 0.8.0, where it starts"


def test_a_wheel_entry_takes_no_recipe(here):
    with pytest.raises(SpecError, match=r"in verl's wheel; \[experiment.recipe\] is for a recipe"):
        compile_spec(str(_spec(here, 'path = "$RECIPE_ROOT/recipe"\n', entry="one_step_off", verl="0.9.1")))


def _git(folder: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def test_a_pinned_commit_refuses_another_head_and_a_dirty_tree(here):
    folder = here / "specs" / "recipes" / "recipe"
    _git(folder, "init", "-q")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-qm", "one")
    head = _git(folder, "rev-parse", "HEAD")
    line = f'path = "$RECIPE_ROOT/recipe"\ncommit = "{head}"\n'
    compiled = compile_spec(str(_spec(here, line)))
    assert f'commit = "{head}"' in compiled.files["spec.toml"].decode()
    assert "\".git/" not in compiled.files["spec.toml"].decode()
    (folder / "dapo" / "extra.py").write_text("x = 1\n")
    with pytest.raises(SpecError, match=r"changes git has not committed \(dapo/extra.py\)"):
        compile_spec(str(_spec(here, line)))
    _git(folder, "add", "-A")
    _git(folder, "commit", "-qm", "two")
    with pytest.raises(SpecError, match=rf"is at [0-9a-f]{{12}}, not {head[:12]}"):
        compile_spec(str(_spec(here, line)))


def test_verify_names_what_changed_and_says_when_the_folder_is_absent(here):
    bundle = Path(write_bundle(compile_spec(str(here / "dapo.toml")), here / "bundles").path)
    assert verify_bundle(bundle).warnings == ()
    folder = here / "specs" / "recipes" / "recipe"
    (folder / "dapo" / "main_dapo.py").write_text("print('other code')\n")
    (folder / "dapo" / "reward.py").write_text("")
    (folder / "__init__.py").unlink()
    with pytest.raises(BundleError) as exc:
        verify_bundle(bundle)
    said = str(exc.value)
    assert "dapo/main_dapo.py changed" in said and "dapo/reward.py added" in said and "__init__.py removed" in said
    shutil.rmtree(folder)
    (warning,) = verify_bundle(bundle).warnings
    assert "recipe folder $RECIPE_ROOT/recipe (specs/recipes/recipe) is absent here" in warning


_PYTHON = '''#!/bin/sh
# launch.sh's verl version check answered as verl 0.8.0 (this environment has another release); every other
# use of python (the recipe check, the module it starts) is the real one.
case "$2" in "import importlib.metadata"*) echo 0.8.0; exit 0;; esac
exec {python} "$@"
'''


def test_launch_puts_the_recipe_on_the_path_and_refuses_changed_code(here):
    bundle = Path(write_bundle(compile_spec(str(here / "dapo.toml")), here / "bundles").path)
    python = here / "python"
    python.write_text(_PYTHON.format(python=sys.executable))
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTORRL_") and k != "PYTHONPATH"}
    env["TUTORRL_PYTHON"] = str(python)

    def launch():
        return subprocess.run(["bash", str(bundle / "launch.sh")], cwd=here, env=env, capture_output=True,
                              text=True, timeout=60)

    done = launch()
    # The stand-in module ran: found on the job's import path, from the folder the bundle pins.
    assert done.returncode == 1 and "stand-in recipe.dapo.main_dapo" in done.stderr, done.stderr
    (here / "specs" / "recipes" / "recipe" / "dapo" / "main_dapo.py").write_text("raise SystemExit(0)\n")
    done = launch()
    assert done.returncode == 3 and "is not what this bundle was compiled with" in done.stderr
    env["RECIPE_ROOT"] = str(here / "nowhere")
    done = launch()
    assert done.returncode == 3 and "recipe folder" in done.stderr and "is absent where the job runs" in done.stderr
