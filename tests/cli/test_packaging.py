"""tutorrl as a package: every import declared, and a built wheel that works
outside the source tree with all of its data."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

import support

REPO = support.REPO
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
PACKAGE_DIRS = PYPROJECT["tool"]["setuptools"]["package-dir"]  # import name -> folder


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0)).lower()


def _declared(*groups: str) -> set[str]:
    names = set()
    for group in groups:
        reqs = PROJECT["dependencies"] if group == "core" else PROJECT["optional-dependencies"][group]
        names |= {_name(r) for r in reqs}
    return names


# Standard-library modules of CPython releases other than the one running the
# tests (tutorrl/_sha256.py picks whichever this interpreter has).
_STDLIB_OF_OTHER_RELEASES = {"_sha2", "_sha256"}


def _third_party_imports(files: list[Path], local: set[str]) -> dict[str, set[str]]:
    """Top-level module name -> files importing it, for modules outside the stdlib and the project."""
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names | _STDLIB_OF_OTHER_RELEASES and top not in local:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def _undeclared(files: list[Path], allowed: set[str], local: set[str]) -> list[str]:
    providers = metadata.packages_distributions()
    problems = []
    for module, where in sorted(_third_party_imports(files, local).items()):
        dists = {_name(d) for d in providers.get(module, [])}
        if not dists:
            problems.append(f"{module} (imported by {sorted(where)}): not installed, so its distribution is unknown")
        elif not dists & allowed:
            problems.append(f"{module} (distribution {sorted(dists)}, imported by {sorted(where)}) is not declared")
    return problems


def _package_sources() -> list[Path]:
    return sorted(p for folder in set(PACKAGE_DIRS.values()) for p in (REPO / folder).glob("*.py"))


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_every_import_of_the_package_is_declared():
    extras = list(PROJECT["optional-dependencies"])
    # importer/_jail.py also runs as a plain file in the sandbox, importing its sibling _confine by name.
    assert _undeclared(_package_sources(), _declared("core", *extras), {"tutorrl", "_confine"}) == []


def test_core_dependencies_are_only_what_compile_needs():
    # The compile path (compile, verify, diff, check, schema) needs only these;
    # everything heavier is an extra and imported lazily.
    assert _declared("core") == {"msgspec", "tomli", "tomli-w"}
    # numpy serves the engine weight check (and benchmarks, tests), never the core.
    assert "numpy" in _declared("engine") and "numpy" in _declared("bench") and "numpy" in _declared("test")


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_every_import_of_tests_benchmarks_and_tools_is_declared():
    tests = sorted((REPO / "tests").rglob("*.py"))
    # A test may import the CPU training tooling it drives (tools/cpu_training, put on its path).
    cpu_tools = (p.stem for p in (REPO / "tools" / "cpu_training").glob("*.py"))
    local = {"tutorrl", "support", "conftest", *(p.stem for p in tests), *cpu_tools}
    assert _undeclared(tests, _declared("core", "test"), local) == []
    benchmarks = sorted((REPO / "benchmarks").glob("*.py"))
    # A benchmark may reuse another's helpers (they run from that folder).
    assert _undeclared(benchmarks, _declared("core", "bench"), {"tutorrl", *(p.stem for p in benchmarks)}) == []
    # GPU proofs run on a machine that has torch and no package index: torch,
    # numpy (torch's own dependency) and carried wheels (sglang) only.
    gpu = _third_party_imports(sorted((REPO / "benchmarks" / "gpu").glob("*.py")), {"tutorrl"})
    assert set(gpu) <= {"torch", "numpy", "sglang"}, gpu
    # tools/ runs before (or without) any set-up: the standard library only --
    # except maintainers' tools run in the test environment (the corpus, the export schemas,
    # the key data read out of wheels).
    tools = sorted((REPO / "tools").glob("*.py"))
    maintainers = ("corpus.py", "corpus_recipes.py", "export_schemas.py", "built_sections.py", "sampling_params.py",
                   "recipe_keysets.py")
    assert _third_party_imports([t for t in tools if t.name not in maintainers], set()) == {}
    assert _undeclared([REPO / "tools" / m for m in maintainers], _declared("core", "test"), {"tutorrl"}) == []


def _data_files() -> dict[str, Path]:
    """Path in the wheel -> file in the checkout, for every package-data file pyproject names."""
    out = {}
    for package, patterns in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        folder = REPO / PACKAGE_DIRS[package]
        for pattern in patterns:
            for path in folder.glob(pattern):
                out[package.replace(".", "/") + "/" + path.relative_to(folder).as_posix()] = path
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of exactly what a source distribution holds,
    so the build cannot lean on anything else in the checkout."""
    src = tmp_path_factory.mktemp("src")
    for name in ["pyproject.toml", PROJECT["readme"], *PROJECT["license-files"]]:
        shutil.copy2(REPO / name, src / name)
    for folder in {PACKAGE_DIRS[p].split("/")[0] for p in PACKAGE_DIRS}:
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-cache-dir", "-w", str(dist), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # setuptools says nothing: no deprecated license form, no data folder it would ignore.
    for noise in ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "would be ignored", "deprecated"):
        assert noise not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    (built,) = dist.glob("tutorrl-*.whl")
    return built


def test_wheel_holds_every_module_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = _data_files()
    assert any(n.endswith(".toml") for n in data) and any(n.endswith(".json") for n in data)
    assert any(n.endswith(".tmpl") for n in data) and any("keymap/lock/" in n for n in data)
    missing = sorted(set(data) - names)
    assert missing == []
    for package, folder in PACKAGE_DIRS.items():
        for module in (REPO / folder).glob("*.py"):
            assert f"{package.replace('.', '/')}/{module.name}" in names
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert f"{dist_info}/licenses/LICENSE" in names
    meta = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta and "Requires-Python: >=3.11" in meta
    assert "Project-URL: " in meta


def test_wheel_installs_and_compiles_outside_the_source_tree(wheel, tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site),
                           str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy2(REPO / "specs" / "chess_tutor_grpo.toml", elsewhere / "spec.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTORRL_")}
    env["PYTHONPATH"] = str(site)
    # The installed copy, not the checkout (an editable install stays on the path behind it).
    where = subprocess.run(
        [sys.executable, "-c", "import tutorrl, tutorrl.compiler.release.keymap as k, tutorrl.templates as t; "
                               "print(tutorrl.__file__); print(k.__file__); print(t.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    for line in where.stdout.splitlines():
        assert Path(line).is_relative_to(site), where.stdout
    # The console script, compiling a spec into a folder of its own.
    compiled = subprocess.run([str(site / "bin" / "tutorrl"), "compile", "spec.toml", "--out", "out"],
                              cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    bundle = elsewhere / compiled.stdout.strip().splitlines()[-1]
    # Same spec, same bundle: the committed example's digest.
    committed = support.BUNDLES / bundle.name
    assert committed.is_dir(), f"{bundle.name} is not the committed bundle of specs/chess_tutor_grpo.toml"
    for name in ("launch.sh", "spec.toml", "bundle.env", "ray-job.json"):
        assert (bundle / name).read_bytes() == (committed / name).read_bytes()


def test_the_checkout_root_runs_tutorrl_whatever_is_installed(wheel, tmp_path):
    """From the checkout's root, `python -m tutorrl` finds the root's tutorrl/ first (the folder
    beside the other top-level ones); with a regular install it used to find no tutorrl.compiler.
    -S keeps this environment's editable-install hook out, as a regular install has none."""
    import sysconfig

    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site),
                           str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTORRL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]])
    out = tmp_path / "out"
    for argv in (["--help"], ["compile", "specs/chess_tutor_grpo.toml", "--out", str(out)]):
        ran = subprocess.run([sys.executable, "-S", "-m", "tutorrl", *argv], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
    assert len(list(out.iterdir())) == 1
