"""The import graph: no cycle between modules or packages, and the library never imports the CLI.

Built from the source with `ast` (every import, in-function ones included),
with pyproject's package-dir map applied (compiler/ is tutorrl.compiler, ...).
A cycle makes the order modules load in matter and hides which layer owns
what; a library module importing `tutorrl.cli` drags argparse and every
command into code that other programs (verl's trainer, tests, notebooks) load.
"""

from __future__ import annotations

import ast
import tomllib

import support

PYPROJECT = tomllib.loads((support.REPO / "pyproject.toml").read_text())
PACKAGE_DIRS = PYPROJECT["tool"]["setuptools"]["package-dir"]
# The command-line layer: the entry point and the modules that register sub-commands.
CLI_LAYER = {"tutorrl.cli", "tutorrl.__main__", "tutorrl.completion"}


def _modules() -> dict[str, object]:
    out = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((support.REPO / folder).glob("*.py")):
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
    two = ".".join(module.split(".")[:2])
    return two if two in PACKAGE_DIRS else "tutorrl"


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
    assert "tutorrl.compiler.load" in GRAPH["tutorrl.compiler.compile"] or GRAPH["tutorrl.compiler.compile"]
    assert "tutorrl.contract" in GRAPH["tutorrl.compiler.bundle"]
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
