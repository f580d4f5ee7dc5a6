"""The suite's markers: each declared with what it means, the wheel-downloading tests opt-out-able offline, and
each test that needs verl, Ray or a training environment marked so (a core environment deselects it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import support

# What reaches the package index from a test: verl's wheels (tutorrl's own fetch, directly, through the
# importer's config cache, or through `tutorrl import`, which composes each launch it proves), and pip asked to
# download or install by name.
_DOWNLOADS = re.compile(r"fetch_wheel\(|config_root\(|run_tag\(|newest_composing\(|thirdparty\"|"
                        r"\"tutorrl\", \"import\"|\"pip\", \"download\"|\"pip\", \"install\"(?![^\n]*--no-index)")


def test_every_marker_is_declared_with_a_meaning(pytestconfig):
    declared = {name.split("(", 1)[0]: meaning for name, meaning in
                (line.split(":", 1) for line in pytestconfig.getini("markers"))}
    assert {"slow", "wheels", "needs_verl", "needs_ray", "needs_torch", "needs_train_env"} <= set(declared)
    assert all(meaning.strip() for meaning in declared.values()), declared
    assert "--strict-markers" in pytestconfig.getini("addopts")


def _code(text: str) -> str:
    """The text without its comments (a comment may name a downloading function)."""
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def test_a_test_file_that_downloads_carries_the_wheels_marker():
    texts = {path: path.read_text(encoding="utf-8") for path in sorted((support.REPO / "tests").rglob("test_*.py"))}
    downloading = [path for path, text in texts.items() if _DOWNLOADS.search(_code(text))]
    unmarked = [p.relative_to(support.REPO).as_posix() for p in downloading if "pytest.mark.wheels" not in texts[p]]
    assert len(downloading) >= 8, "the pattern no longer finds the known downloading tests"
    assert unmarked == [], f"these download at run time without @pytest.mark.wheels: {unmarked}"


# What needs verl in the test environment: importing it, finding it, or reading its installed config (support's
# helpers, which locate it); what needs Ray: importing it, or real Ray nodes (support.RayNodes). Code that reaches
# verl or Ray only inside tutorrl (an embedded head, a dry run) is marked by hand; a core environment's run shows it.
_NEEDS_VERL = re.compile(r"^\s*(import|from) verl\b|find_spec\(\"verl\"\)|verl_config_dir\(|compose_verl\(", re.M)
_NEEDS_RAY = re.compile(r"^\s*(import|from) ray\b|__import__\(\"ray[.\"]|RayNodes\(", re.M)
# The training environments' variables (tests/conftest.py's TRAIN_ENV_VARS), read by a test.
_NEEDS_TRAIN_ENV = re.compile(r"\"(TUTORRL_TRAIN_PYTHON|TUTORRL_TRAIN091_PYTHON|TUTORRL_SGLANG_CPU_PYTHON|"
                              r"TUTORRL_TRAIN_SGLANG_PYTHON|TUTORRL_SKYPILOT_PYTHON)\"")


def _unmarked(path, pattern: re.Pattern, marker: str) -> list[str]:
    """The tests of ``path`` that reach ``pattern`` -- in their own code, through the module's helpers and
    fixtures they name (to any depth), or at import -- and carry ``marker`` neither themselves nor on the module."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)

    def text(node) -> str:
        return _code(ast.get_source_segment(source, node) or "")

    module_marked = any(isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
                        and marker in text(node) for node in tree.body)
    functions, tests, module_code = {}, {}, []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
            if node.name.startswith("test"):
                tests[node.name] = (node, [])
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions[sub.name] = sub
                    if sub.name.startswith("test"):
                        tests[f"{node.name}::{sub.name}"] = (sub, [node])
        else:
            module_code.append(node)
    if any(pattern.search(text(node)) for node in module_code):  # at import: every test of the module needs it
        return [] if module_marked else [f"{path.name} (at import)"]
    names = {name: {n.id for n in ast.walk(f) if isinstance(n, ast.Name)}
             | {n.attr for n in ast.walk(f) if isinstance(n, ast.Attribute)}
             | {a.arg for a in f.args.args + f.args.kwonlyargs} for name, f in functions.items()}
    needs = {name: bool(pattern.search(text(f))) for name, f in functions.items()}
    grew = True
    while grew:
        grew = False
        for name in functions:
            if not needs[name] and any(needs.get(used) for used in names[name]):
                needs[name] = grew = True
    out = []
    for name, (node, classes) in tests.items():
        marks = "".join(text(d) for holder in (node, *classes) for d in holder.decorator_list)
        if needs[node.name] and not module_marked and marker not in marks:
            out.append(f"{path.name}::{name}")
    return out


@pytest.mark.parametrize("pattern, marker", [(_NEEDS_VERL, "needs_verl"), (_NEEDS_RAY, "needs_ray"),
                                             (_NEEDS_TRAIN_ENV, "needs_train_env")],
                         ids=["needs_verl", "needs_ray", "needs_train_env"])
def test_a_test_that_needs_verl_ray_or_a_training_environment_carries_its_marker(pattern, marker):
    here = Path(__file__).resolve()  # this file names the variables to test the markers' hooks with
    paths = [p for p in sorted((support.REPO / "tests").rglob("test_*.py")) if p.resolve() != here]
    reaching = [p for p in paths if pattern.search(_code(p.read_text(encoding="utf-8")))]
    assert len(reaching) >= 4, f"the pattern no longer finds the known tests that need what {marker} says"
    unmarked = [name for path in reaching for name in _unmarked(path, pattern, marker)]
    assert unmarked == [], f"these need what {marker} says without carrying it: {unmarked}"


def test_the_needs_markers_deselect_where_their_need_is_absent(pytester, monkeypatch):
    """Without verl (here: a module no Python has stands for it) and without a training environment, a test marked
    for them is deselected, and the count and the reasons are reported; with --full nothing is deselected and each
    fails, saying why; once the variable names an existing path, its test runs."""
    conftest = (support.REPO / "tests" / "conftest.py").read_text(encoding="utf-8")
    pytester.makeconftest(conftest.replace("sys.path.insert(0, str(Path(__file__).parent))",
                                           f"sys.path.insert(0, {str(support.REPO / 'tests')!r})")
                          + '\nNEEDED_MODULES["needs_verl"] = "verl_that_no_python_has"\n')
    pytester.makeini("[pytest]\naddopts = --strict-markers\nmarkers =\n    needs_verl: v\n    needs_ray: r\n"
                     "    needs_train_env: t\n")
    pytester.makepyfile(test_needs="""
import pytest

@pytest.mark.needs_verl
def test_verl():
    pass

@pytest.mark.needs_train_env("TUTORRL_TRAIN_PYTHON")
def test_train():
    pass

def test_plain():
    pass
""")
    monkeypatch.delenv("TUTORRL_TRAIN_PYTHON", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(["*needs_* markers: 2 tests deselected*",
                                 "*needs_train_env: 1 (TUTORRL_TRAIN_PYTHON not set*",
                                 "*needs_verl: 1 (verl_that_no_python_has is not importable*"])
    full = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--full")
    full.assert_outcomes(passed=1, errors=2)  # failed at set-up: the run fails
    full.stdout.fnmatch_lines(["*the full tier needs what this test is marked with: needs_verl*",
                               "*the full tier needs what this test is marked with: needs_train_env*"])
    python = pytester.path / "python"
    python.write_text("")
    monkeypatch.setenv("TUTORRL_TRAIN_PYTHON", str(python))
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2, deselected=1)
