"""The import graph: no cycle between modules or packages, and the library never imports the CLI.

Built from the source with `ast` (every import, in-function ones included),
with pyproject's package-dir map applied (compiler/ is tutorrl.compiler, ...).
A cycle makes the order modules load in matter and hides which layer owns
what; a library module importing `tutorrl.cli` drags argparse and every
command into code that other programs (verl's trainer, tests, notebooks) load.
"""

from __future__ import annotations

import ast
import importlib
import types
import tomllib
from pathlib import Path

import pytest
import support

PYPROJECT = tomllib.loads((support.REPO / "pyproject.toml").read_text())
PACKAGE_DIRS = PYPROJECT["tool"]["setuptools"]["package-dir"]


def _folder(package: str) -> Path:
    base = max((k for k in PACKAGE_DIRS if package == k or package.startswith(k + ".")), key=len)
    return support.REPO / PACKAGE_DIRS[base] / Path(*package[len(base):].split(".")[1:])


# Every package pyproject ships that holds code (data-only packages hold none).
PACKAGES = {p for p in PYPROJECT["tool"]["setuptools"]["packages"] if any(_folder(p).glob("*.py"))}
# The command-line layer: the entry point and the modules that register sub-commands.
CLI_LAYER = {"tutorrl.cli", "tutorrl.__main__", "tutorrl.completion"}


def _modules() -> dict[str, Path]:
    out = {}
    for package in sorted(PACKAGES):
        for path in sorted(_folder(package).glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        found |= {t for t in map(_target, names) if t and t.startswith("tutorrl") and t != module}
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def _package(module: str) -> str:
    """The innermost package holding ``module`` (a package is its own)."""
    return module if module in PACKAGES else module.rpartition(".")[0]


def _top(module: str) -> str:
    """The top-level package holding ``module`` (``tutorrl.compiler`` for all four of its materials); the
    core package's own modules are ``tutorrl``."""
    top = ".".join(module.split(".")[:2])
    return top if top in PACKAGES else "tutorrl"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_the_imports_it_should():
    # A graph that found nothing would pass every test below: check a few known edges.
    assert "tutorrl.compiler.spec.load" in GRAPH["tutorrl.compiler.pipeline.compile"] or GRAPH["tutorrl.compiler.pipeline.compile"]
    assert "tutorrl.contract" in GRAPH["tutorrl.compiler.bundle.manifest"]
    assert "tutorrl.runtime.records" in GRAPH["tutorrl.runtime.lifecycle"]
    assert len(MODULES) > 80


def test_no_module_cycle():
    assert _cycles(GRAPH) == []


def test_no_package_cycle():
    packages: dict[str, set[str]] = {}
    for module, deps in GRAPH.items():
        for dep in deps:
            a, b = _package(module), _package(dep)
            if a != b and b != "tutorrl":  # every package may use the core package's small modules
                packages.setdefault(a, set()).add(b)
    assert _cycles(packages) == [], packages


def test_only_the_command_line_layer_imports_the_cli():
    importers = {m for m, deps in GRAPH.items() if "tutorrl.cli" in deps}
    library = {m for m in importers if m not in CLI_LAYER and not m.endswith(".commands")}
    assert library == set()


def test_the_contract_imports_nothing():
    tree = ast.parse(MODULES["tutorrl.contract"].read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports == []


def test_no_test_module_imports_another():
    """Shared test code lives in helper modules (support.py, */*_helpers.py), never in a test module:
    importing one runs its module-level code and ties two tests' fixtures together."""
    found = []
    for path in sorted((support.REPO / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.relative_to(support.REPO)}:{node.lineno} {n}" for n in names
                      if n.split(".")[-1].startswith("test_") or n.startswith("tests.")]
    assert found == []


def test_packages_meet_only_through_their_faces():
    """Another top-level package's names come from a face (``__all__``), never from a module inside it.

    What a package offers is then one list, in one file, that a change inside
    the package must keep or visibly change; the core package's small modules
    (``tutorrl._files``, ``tutorrl.errors``, ...) are everyone's. Inside a top-level
    package its parts use each other's modules: the compiler's four materials
    import each other's modules directly (their layering is held by the package
    cycle test), so each sub-face carries only what the rest of tutorrl needs."""
    faces = {}
    for package in PACKAGES:
        path = MODULES.get(package)
        tree = ast.parse(path.read_text()) if path else ast.Module(body=[])
        faces[package] = next((set(ast.literal_eval(n.value)) for n in tree.body if isinstance(n, ast.Assign)
                               and any(getattr(t, "id", "") == "__all__" for t in n.targets)), set())
    found = []
    for module, path in MODULES.items():
        own = _top(module)
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([(node.module, a.name) for a in node.names] if isinstance(node, ast.ImportFrom) and not node.level
                     else [(a.name, None) for a in node.names] if isinstance(node, ast.Import) else [])
            for target, name in names:
                if target not in MODULES or _top(target) in (own, "tutorrl"):
                    continue
                where = f"{path.relative_to(support.REPO)}:{node.lineno}"
                if target != _package(target):
                    found.append(f"{where} imports {target}, inside {_package(target)}")
                elif name is not None and name not in faces[target]:
                    found.append(f"{where} imports {name}, not in {target}.__all__")
    assert found == []


# ---- the faces themselves

FACES = {}
for _face_pkg in sorted(PACKAGES):
    _path = MODULES.get(_face_pkg)
    if _path is None:
        continue
    _tree = ast.parse(_path.read_text())
    _exports = next((ast.literal_eval(n.value) for n in _tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                     and any(getattr(t, "id", "") == "_EXPORTS" for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))),
                    None)
    if _exports is not None:
        FACES[_face_pkg] = (_tree, _exports)


def _typing_imports(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for imp in node.body:
                for alias in imp.names:
                    out[alias.asname or alias.name] = imp.module
    return out


def _all(tree: ast.Module) -> list[str]:
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and any(getattr(t, "id", "") == "__all__" for t in n.targets))


def test_the_faces_are_found():
    # the compiler's four materials, and the packages other packages import from
    assert {"tutorrl.compiler", "tutorrl.compiler.spec", "tutorrl.compiler.release", "tutorrl.compiler.bundle",
            "tutorrl.compiler.pipeline", "tutorrl.runtime", "tutorrl.evidence"} <= set(FACES)


@pytest.mark.parametrize("package", sorted(FACES))
def test_a_face_says_one_list_three_ways(package):
    tree, exports = FACES[package]
    table = {name: f"{package}.{module}" for module, names in exports.items() for name in names}
    assert _typing_imports(tree) == table
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert sorted(_all(tree)) == sorted(set(table) | own)


@pytest.mark.parametrize("package", sorted(FACES))
def test_every_name_of_a_face_is_what_its_module_defines(package):
    face = importlib.import_module(package)
    _, exports = FACES[package]
    for module, names in exports.items():
        for name in names:
            value = getattr(face, name)
            assert not isinstance(value, types.ModuleType), (package, name)
            assert value is getattr(importlib.import_module(f"{package}.{module}"), name), (package, name)
    with pytest.raises(AttributeError, match="no attribute"):
        getattr(face, "no_such_name")  # noqa: B009 - the face's __getattr__ is what is held
    assert set(_all(FACES[package][0])) <= set(dir(face))


def test_a_face_carries_only_what_other_packages_import():
    """A face is designed, not grown: each of its names is used by some module of another top-level
    package (imported from it, or read as an attribute of it: ``from tutorrl import evidence``), or
    re-exported by its parent's face. A name only its own package uses is imported from the module
    that defines it, and leaves the face."""
    used: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # a name bound to a face in this module -> the face
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for a in node.names:
                    if f"{node.module}.{a.name}" in FACES:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                if node.module in FACES:
                    inside = _top(module) == _top(node.module) and module != node.module.rpartition(".")[0]
                    if not inside:
                        used.setdefault(node.module, set()).update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in FACES})
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                face = aliases[node.value.id]
                if _top(module) != _top(face):
                    used.setdefault(face, set()).add(node.attr)
    unused = {package: sorted(set(_all(FACES[package][0])) - used.get(package, set())) for package in FACES}
    assert {package: names for package, names in unused.items() if names} == {}
