"""tools/corpus_recipes.py: which calls count as trainer launches, and the numbers it derives and renders.

The measurement itself needs verl's and verl-recipe's git history (tools only, never the suite); here its
parts run on rows and calls of this test's own, and the rendered README section is read back.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tutorrl.importer.capture import PythonCall

_SPEC = importlib.util.spec_from_file_location("corpus_recipes_tool",
                                               Path(__file__).parents[2] / "tools" / "corpus_recipes.py")
tool = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = tool
_SPEC.loader.exec_module(tool)


def _call(entry: str, kind: str = "module") -> PythonCall:
    return PythonCall("python3", [], kind, entry, [])


@pytest.mark.parametrize("entry,kind,counted", [
    ("recipe.dapo.main_dapo", "module", True),          # a known entry
    ("verl.experimental.one_step_off_policy.main_ppo", "module", True),
    ("main_gkd", "module", True),                      # unknown, but a trainer's main: counted, then refused
    ("recipe.spin.main_spin", "module", True),
    ("verl.experimental.fully_async_policy/fully_async_main.py", "script", True),
    ("verl.trainer.main_generation", "module", False),  # generation and evaluation are not training
    ("verl.trainer.main_eval", "module", False),
    ("recipe.r1.data_process", "module", False),
    ("verl.model_merger", "module", False),
    ("pip", "module", False),
    ("import sys", "code", False),
])
def test_a_trainer_launch_is_a_known_entry_or_a_main(entry, kind, counted):
    assert tool.is_trainer_launch(_call(entry, kind)) is counted


def _row(module, entry, *, imported=True, trip="exact", compiles=True, same=True, why="", release="0.9.0",
         accepts=True):
    return {"script": f"recipe/{module}.sh", "module": module, "entry": entry, "release": release if imported else "",
            "imported": imported, "trip": trip, "compiles": compiles, "same_module": same, "why": why,
            "verl_accepts": accepts}


def test_the_summary_counts_what_imports_compiles_and_starts_the_same_module_and_lists_the_rest():
    rows = [_row("verl.trainer.main_ppo", ""),
            _row("recipe.dapo.main_dapo", "dapo", release="0.8.0"),
            _row("recipe.dapo.main_dapo", "dapo", trip="not checked: the original launch does not compose at verl "
                 "0.8.0: X", compiles=False, same=False, why="the compiler refuses the spec: Y", release="0.8.0",
                 accepts=False),
            _row("recipe.entropy.main_entropy", "entropy", compiles=False, same=False,
                 why="the compiler refuses the spec: stops at import", accepts=False),
            _row("main_gkd", "", imported=False, trip="", compiles=False, same=False,
                 why="refused: a module tutorrl does not know", accepts=False),
            _row("recipe.dapo.main_dapo", "dapo", compiles=False, same=False, why="the compiler refuses the spec: Z",
                 release="0.8.0")]
    s = tool.summarise("v0.9.0", "0.9.0", "e7f889574b83", 4, rows, {})
    assert (s["launches"], s["main_ppo_launches"], s["other_launches"]) == (6, 1, 5)
    assert (s["other_import_compile_same_module"], s["other_exact"]) == (1, 3)
    # Of the 2 launches verl takes as written (code starts, config composes), tutorrl carries 1.
    assert (s["other_verl_accepts"], s["other_verl_accepts_import_compile_same_module"]) == (2, 1)
    dapo = s["by_module"]["recipe.dapo.main_dapo"]
    assert dapo == {"launches": 3, "entry": "dapo", "imported": 3, "exact": 2, "verl_composes": 2, "verl_accepts": 2,
                    "compile_and_start_it": 1, "releases": ["0.8.0"], "not_entry": ""}
    # Why a module is not an entry is entries.toml's data, reported per module.
    assert s["by_module"]["main_gkd"]["not_entry"].startswith("GKD: its scripts start `python3 -m main_gkd`")
    assert [f["module"] for f in s["not_met"]] == ["recipe.dapo.main_dapo", "recipe.entropy.main_entropy", "main_gkd",
                                                   "recipe.dapo.main_dapo"]
    assert s["not_met"][2]["reason"] == "refused: a module tutorrl does not know"
    text = tool.corpus.render_recipes({**s, "recipe_modules_start": [
        {"entry": "dapo", "module": "recipe.dapo.main_dapo", "verl": "0.9.0", "exit": 1, "config_lines": 0,
         "said": "ImportError: cannot import name 'TaskRunner'"}]}, "python tools/corpus_recipes.py ...")
    assert "| v0.9.0 | 4 | 6 | 1 (1 import, compile, same module) | 5 | 1 (20.0%) | 2 | 1 (50.0%) | 3 |" in text
    assert "| `recipe.dapo.main_dapo` | dapo at 0.8.0 | 3 | 3 | 2 | 2 | 2 | 1 |" in text
    assert "- `main_gkd`: GKD: its scripts start" in text
    assert "| dapo | 0.9.0 | 1 | 0 | ImportError: cannot import name 'TaskRunner' |" in text
    assert "- `recipe/main_gkd.sh` (`main_gkd`): refused: a module tutorrl does not know" in text


def test_the_stand_ins_are_read_from_the_round_trips_note():
    notes = ["something else", "placeholders stood in for the same value in both launches: __UNSET_NODES__ = 1, "
             "__UNSET_OFFLOAD__ = True"]
    assert tool.standins(notes) == {"NODES": "1", "OFFLOAD": "True"}
    assert tool.standins(["no placeholders"]) == {}


def test_the_committed_corpus_readme_is_what_its_committed_numbers_render(tmp_path):
    import shutil

    docs = Path(__file__).parents[2] / "docs" / "corpus"
    for path in docs.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    tool.corpus.write_readme(tmp_path)
    assert (tmp_path / "README.md").read_text() == (docs / "README.md").read_text()
    recipes = (docs / "recipes.json").read_text()
    # Derived numbers only: no machine's folder (the install a start check used is named, not given).
    assert "/tmp/" not in recipes and "<verl install>" in recipes
