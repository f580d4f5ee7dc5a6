"""One error model: every user-facing exception and exit code has its home in tutorrl/errors.py.

Held on the source (``ast``), so a new error class added beside the code that
raises it, or an exit code spelled as a bare number in a template, fails here.
"""

from __future__ import annotations

import ast
import re

import support

from tutorrl import errors

ERRORS_FILE = support.REPO / "tutorrl" / "errors.py"


def _source_files():
    import tomllib

    dirs = tomllib.loads((support.REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for folder in sorted(set(dirs.values())):
        yield from sorted((support.REPO / folder).glob("*.py"))


def _family() -> set[str]:
    """The names of TutorrlError and every class errors.py derives from it."""
    return {name for name, value in vars(errors).items()
            if isinstance(value, type) and issubclass(value, errors.TutorrlError)}


def test_every_user_facing_error_is_defined_in_errors_py():
    family = _family()
    assert {"TutorrlError", "InputError", "SpecError", "BundleError", "RefusedError", "RunNotFound",
            "EvidenceFailed", "CaptureError", "PreflightRefused"} <= family
    elsewhere = []
    for path in _source_files():
        if path == ERRORS_FILE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
                         for b in node.bases}
                if bases & family:
                    elsewhere.append(f"{path.relative_to(support.REPO)}:{node.lineno} {node.name}")
    assert elsewhere == [], "user-facing errors belong in tutorrl/errors.py: " + ", ".join(elsewhere)


def test_the_old_homes_still_resolve_to_the_one_class():
    from tutorrl.evidence.chain import ChainError
    from tutorrl.runtime.lifecycle import EXIT_EVIDENCE_FAILED, RunNotFound
    from tutorrl.runtime.records import RecordError

    assert ChainError is errors.ChainError and RunNotFound is errors.RunNotFound
    assert RecordError is errors.RecordError and EXIT_EVIDENCE_FAILED == errors.EXIT_EVIDENCE_FAILED


def test_exit_codes_are_distinct_and_the_documented_ones():
    codes = {name: value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert len(set(codes.values())) == len(codes)
    assert codes == {"EXIT_OK": 0, "EXIT_FAILED": 1, "EXIT_INPUT": 2, "EXIT_STACK": 3, "EXIT_EVIDENCE_FAILED": 4,
                     "EXIT_EVIDENCE_STOPPED": 5, "EXIT_INTERRUPTED": 130}
    readme = (support.REPO / "README.md").read_text()
    for code in (130, 2, 3, 4, 5):
        assert re.search(rf"\b{code}\b", readme.split("## Why")[0]), code
    assert errors.TutorrlError.exit_code == errors.EXIT_INPUT
    assert errors.EvidenceFailed(["x"], stopped=True).exit_code == errors.EXIT_EVIDENCE_STOPPED
    assert errors.EvidenceFailed(["x"], stopped=False).exit_code == errors.EXIT_EVIDENCE_FAILED


def test_templates_exit_only_with_the_stack_code():
    """launch.sh and its evidence check are bash: their `exit N` must be the code errors.py documents."""
    found = {}
    for path in sorted((support.REPO / "templates").glob("*.tmpl")):
        for number in re.findall(r"\bexit (\d+)\b", path.read_text()):
            found.setdefault(int(number), []).append(path.name)
    assert found, "the templates exit somewhere (a wrong verl, no tutorrl)"
    assert set(found) == {errors.EXIT_STACK}, found


def test_a_finding_is_one_shape_from_rules_to_problems():
    from tutorrl.compiler.pipeline import rules
    from tutorrl.compiler.release.keymap import load_lock
    from tutorrl.compiler.pipeline.resolve import missing_setting

    assert rules.Finding is errors.Finding
    found = missing_setting("rollout.no_such_setting_anywhere", load_lock("0.5.0", "fsdp"))
    assert isinstance(found, errors.Finding) and found.key == "rollout.no_such_setting_anywhere"
    assert found.severity == "error"


def test_no_other_module_declares_a_finding_of_its_own():
    """One Finding: a struct or alias named for findings elsewhere would be a second shape (a plug-in's
    plain tuples, compiler/rewards.PluginFinding, are its wire form, turned into Findings at the seam)."""
    others = []
    for path in _source_files():
        if path == ERRORS_FILE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        aliases = [n for n in tree.body if isinstance(n, ast.Assign)]  # module-level names, not local variables
        for node in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] + aliases:
            names = [node.name] if isinstance(node, ast.ClassDef) else [t.id for t in node.targets
                                                                         if isinstance(t, ast.Name)]
            others += [f"{path.relative_to(support.REPO)}:{node.lineno} {n}" for n in names
                       if "finding" in n.lower() and n != "PluginFinding"]
    assert others == [], "findings have one shape, tutorrl.errors.Finding: " + ", ".join(others)
