"""`tutorrl schema` in an editor's own linter: tombi, attached as the README says.

tombi lints in strict mode, where an object that does not say
``additionalProperties: true`` is closed: the free-form tables of a spec must say
they are open, or every committed example gets a warning per key.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tutorrl.review.schema import SCHEMA_ID, spec_schema

import support

TOMBI = Path(sys.executable).with_name("tombi")
README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_block(after: str) -> str:
    """The first ```toml block after ``after`` in the README, unindented."""
    text = README.read_text()
    start = text.index(after)
    match = re.search(r"```toml\n(.*?)```", text[start:], re.S)
    return "\n".join(line.strip() for line in match.group(1).splitlines()) + "\n"


def _lint(folder: Path, *paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOMBI), "lint", "--offline", "--error-on-warnings", *paths], cwd=folder,
                          capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                                            "HOME": str(folder), "NO_COLOR": "1"})


@pytest.fixture
def project(tmp_path) -> Path:
    """A project as the README sets it up: the schema saved, specs/, the tombi.toml association."""
    (tmp_path / "tutorrl.schema.json").write_text(json.dumps(spec_schema(), indent=2))
    (tmp_path / "specs").mkdir()
    for spec in support.example_specs():
        shutil.copy(spec, tmp_path / "specs" / spec.name)
    (tmp_path / "tombi.toml").write_text(_readme_block("a `tombi.toml` beside `specs/`"))
    return tmp_path


def test_tombi_is_installed_with_the_test_extra():
    assert TOMBI.is_file(), "tombi comes with tutorrl[test]"


def test_the_schema_has_an_id_and_its_free_form_tables_are_open():
    schema = spec_schema()
    assert schema["$id"] == SCHEMA_ID
    free = {name: prop for d in schema["$defs"].values() for name, prop in d.get("properties", {}).items()
            if prop.get("type") == "object" and "properties" not in prop}
    assert {"kwargs", "engine_kwargs", "options", "manager_kwargs", "override_config"} <= set(free)
    assert all(prop["additionalProperties"] is not False for prop in free.values())


def test_every_committed_example_lints_clean_in_tombi(project):
    names = sorted(p.name for p in (project / "specs").iterdir())
    assert len(names) >= 6
    result = _lint(project, "specs")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr and f"{len(names)} files linted successfully" in (
        result.stdout + result.stderr)


def test_tombi_flags_what_the_compiler_refuses(project):
    chess = (project / "specs" / "chess_tutor_grpo.toml").read_text()
    (project / "specs" / "typo.toml").write_text(chess.replace("[actor]\n", "[actor]\nlrr = 1\n", 1)
                                                 .replace("\ntable = ", "\ntabel = ", 1))
    result = _lint(project, "specs/typo.toml")
    out = result.stdout + result.stderr
    # An unknown key in a closed section, and a misspelt option of the plug-in reward.plugin names.
    assert result.returncode != 0 and '"lrr" is not allowed' in out and '"tabel" is not allowed' in out, out


def test_the_schema_directive_at_a_specs_top_attaches_it_without_a_config(project):
    (project / "tombi.toml").unlink()
    directive = _readme_block("as the first line of a spec").strip()
    assert directive == "#:schema ../tutorrl.schema.json"
    spec = project / "specs" / "gsm8k_custom_reward.toml"
    spec.write_text(f"{directive}\n\n{spec.read_text()}")  # tombi reads a directive only above a blank line
    assert _lint(project, "specs/gsm8k_custom_reward.toml").returncode == 0
    spec.write_text(spec.read_text().replace('engine = "vllm"', 'engine = "sglangg"', 1))
    result = _lint(project, "specs/gsm8k_custom_reward.toml")
    assert result.returncode != 0 and "sglangg" in result.stdout + result.stderr and "duplicate" not in (
        result.stdout + result.stderr).lower()
