"""Every command's handler is its arguments parsed, one call into ``tutorrl.api``, and printing.

The rule, read from the source with ``ast`` (every import, in-function ones included), for each module
that registers commands (``*/commands.py``, ``compiler/keys_commands.py``): what it imports of tutorrl is

* ``tutorrl.api`` -- the one door into the library;
* the core's floor and command-line helpers: ``tutorrl.errors``, ``tutorrl.contract`` and the private
  ``tutorrl._*`` modules (argument types, formats, printable text, display paths);
* the presentation of a typed result: the functions named in :data:`TEXT` below, each turning a value the
  API returned into text (no reading, no writing, no library work).

A handler that reached past the API (``from tutorrl.runtime.run import run_command``) fails here, naming
the line.
"""

from __future__ import annotations

import ast

import pytest

import support

HANDLER_MODULES = sorted([*support.REPO.glob("*/commands.py"), support.REPO / "compiler" / "keys_commands.py"])

# Presentation functions a handler may import beside the API: module -> names.
TEXT = {
    "tutorrl.compiler.text": {"migration_json", "migration_text", "points_table"},
    "tutorrl.evidence.text": {"failure_lines", "summary_line"},
    "tutorrl.importer.text": {"report_text"},
    "tutorrl.review.render": {"render", "use_color"},
    "tutorrl.review.matrix": {"render_matrix"},
    "tutorrl.review.layers": {"render_layers"},
    "tutorrl.review.check": {"format_report", "report_json"},
    "tutorrl.runtime.text": {"runs_json", "runs_table", "set_table", "status_json", "status_notes", "status_text"},
}
# Handlers still reaching into the library, with what they import: none (the list can only stay empty).
NOT_YET: dict[str, set[str]] = {}


def _allowed(module: str, name: str | None) -> bool:
    if module.endswith(("commands", ".keys_commands")):
        return True  # a module registering another's commands (compile registers keys)
    if module in ("tutorrl", "tutorrl.api", "tutorrl.errors", "tutorrl.contract") and name != "cli":
        return module != "tutorrl" or name == "api"
    if module.startswith("tutorrl._") and module.count(".") == 1:
        return True
    return module in TEXT and name in TEXT[module]


def _library_imports(path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("tutorrl"):
            for alias in node.names:
                yield node.lineno, node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tutorrl"):
                    yield node.lineno, alias.name, None


def test_the_handler_modules_are_found():
    names = {str(p.relative_to(support.REPO)) for p in HANDLER_MODULES}
    assert {"compiler/commands.py", "compiler/keys_commands.py", "runtime/commands.py", "evidence/commands.py",
            "review/commands.py", "importer/commands.py", "export/commands.py"} <= names


def test_handlers_reach_the_library_only_through_the_api():
    found, waiting = [], {}
    for path in HANDLER_MODULES:
        where = str(path.relative_to(support.REPO))
        for line, module, name in _library_imports(path):
            if _allowed(module, name):
                continue
            if module in NOT_YET.get(where, ()):
                waiting.setdefault(where, set()).add(module)
                continue
            found.append(f"{where}:{line} imports {name or module} from {module}")
    assert found == []
    assert waiting == NOT_YET  # a handler moved onto the API leaves the list


def test_every_handler_module_calls_the_api():
    callers = set()
    for path in HANDLER_MODULES:
        if any(module == "tutorrl" and name == "api" for _, module, name in _library_imports(path)):
            callers.add(str(path.relative_to(support.REPO)))
    assert callers == {str(p.relative_to(support.REPO)) for p in HANDLER_MODULES} - set(NOT_YET)


def test_the_presentation_functions_exist():
    import importlib

    for module, names in TEXT.items():
        loaded = importlib.import_module(module)
        assert all(callable(getattr(loaded, name)) for name in names), module


def test_export_offers_the_targets_it_accepts():
    from tutorrl.export import commands, options

    assert commands.TARGETS == options.TARGETS


@pytest.mark.parametrize("command, options", [("import", "ImportOptions"), ("export", "ExportOptions"),
                                              ("run", "RunOptions")])
def test_every_flag_of_a_command_whose_handler_builds_options_is_a_field_of_them(command, options):
    """These handlers build their options from the struct's fields (``getattr(args, field)``): a flag the
    parser has and the struct lacks would be parsed and then dropped without a word."""
    import argparse

    from tutorrl import api
    from tutorrl.cli import build_parser

    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    flags = {a.dest for a in sub._actions if a.dest not in (argparse.SUPPRESS, "help", "handler")}
    fields = set(getattr(api, options).__struct_fields__)
    # What the handler uses itself, or what names the options' fields differently: said here, one by one.
    handled = {"import": {"format"},  # how the handler prints the result
               "export": {"bundle", "output"},  # export_bundle's own arguments
               "run": {"bundle", "max_parallel"}}[command]  # one bundle's (a set's run takes max_parallel)
    assert flags - fields - handled == set(), flags - fields
