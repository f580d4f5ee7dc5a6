"""The programs tutorrl starts in other interpreters are modules of their own, started by their path.

runtime/lean_ray.py (the embedded head's `ray start`, run by the job's Python) and
runtime/job_probe.py (questions asked of the job's Python) run where tutorrl may not be installed:
they import nothing of it. No product module hands an interpreter a program as a string
(``python -c SOURCE``), which linters, the type checker and the import graph would not see.
"""

from __future__ import annotations

import ast
import importlib
import json
import py_compile
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tutorrl.runtime import head, preflight, stack

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("tutorrl", "compiler", "runtime", "evidence", "review", "importer", "export", "plugins")
PROGRAMS = (REPO / "runtime" / "lean_ray.py", REPO / "runtime" / "job_probe.py")


def _imports(tree: ast.Module, top_only: bool = False) -> set[str]:
    nodes = tree.body if top_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_a_program_for_another_interpreter_imports_nothing_of_tutorrl(program, tmp_path):
    py_compile.compile(str(program), cfile=str(tmp_path / "out.pyc"), doraise=True)
    imported = _imports(ast.parse(program.read_text(encoding="utf-8")))
    assert not [m for m in imported if m.startswith((".", "tutorrl"))], imported


def test_the_lean_head_imports_only_os_and_sys_until_a_role_runs():
    # The watch role runs under -I -S with none of Ray loaded; every role imports what it needs itself.
    tree = ast.parse(PROGRAMS[0].read_text(encoding="utf-8"))
    assert _imports(tree, top_only=True) == {"os", "sys"}
    lean = importlib.import_module("tutorrl.runtime.lean_ray")
    assert "ray" not in {m.split(".")[0] for m in vars(lean) if isinstance(vars(lean)[m], type(sys))}
    # What head.py copies and starts is this module's own file.
    assert head._LEAN_SOURCE.read_bytes() == Path(lean.__file__).read_bytes()


def test_the_lean_heads_ray_pin_is_the_ray_tutorrl_installs():
    lean = importlib.import_module("tutorrl.runtime.lean_ray")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert extras["ray"] == [f"ray[default]=={lean.WORKER_RAY}"]
    assert head.LEAN_MODULES is lean.LEAN_MODULES


def test_the_probe_imports_from_the_jobs_folder_not_its_own(tmp_path):
    # `python job_probe.py` would put runtime/ first on the path, where tutorrl's own stack.py and
    # head.py are; the job's folder is what python -c (and verl's driver) puts there.
    (tmp_path / "myreward.py").write_text("print('loud import')\ndef score(*a):\n    return 1.0\n")
    ask = {"packages": ["msgspec", "surely-not-installed-dist"], "modules": ["myreward", "head", "stack"],
           "replica": "", "engine": None}
    done = subprocess.run([sys.executable, str(stack.PROBE), "stack", json.dumps(ask)], cwd=tmp_path,
                          capture_output=True, timeout=120, check=True)
    answer = json.loads(done.stdout)
    assert answer["modules"]["myreward"] is None
    assert answer["modules"]["head"] == {"kind": "missing", "name": "head"}
    assert answer["modules"]["stack"] == {"kind": "missing", "name": "stack"}
    assert answer["versions"]["surely-not-installed-dist"] is None and answer["versions"]["msgspec"]
    assert b"loud import" in done.stderr
    assert preflight.reward_import_problems(sys.executable, "myreward", "score", cwd=tmp_path) == []
    problems = preflight.reward_import_problems(sys.executable, "myreward", "nope", cwd=tmp_path)
    assert len(problems) == 1 and "nope" in problems[0] and "score" in problems[0], problems


def test_no_product_module_starts_a_program_held_in_a_string():
    found = []
    for folder in PRODUCT:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.List) and any(
                        isinstance(e, ast.Constant) and e.value == "-c" for e in node.elts):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, f"an argv with -c SOURCE: give the program a module and start it by its path: {found}"
