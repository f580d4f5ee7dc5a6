"""The ``tutorrl`` process loads msgspec without typing_extensions (and so without
inspect), and leaves typing_extensions importable for whatever runs after."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import support

# A short command ends the process itself (tutorrl._startup.end_now), after the exit
# handlers: the probe looks at the process from one.
PROBE = """
import atexit, json, sys
from tutorrl import cli

def probe():
    loaded = sorted({"inspect", "typing_extensions"} & set(sys.modules))
    import typing, typing_extensions, msgspec._utils as u
    print(json.dumps({"loaded": loaded, "later": typing_extensions.__name__,
                      "hints": u._get_type_hints is typing.get_type_hints}))

atexit.register(probe)
sys.argv = ["tutorrl", "compile", sys.argv[1], "--out", sys.argv[2]]
cli.entry()
"""


def test_compile_runs_without_typing_extensions_and_leaves_it_importable(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", PROBE, str(support.SPECS / "chess_tutor_grpo.toml"),
                           str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"loaded": [], "later": "typing_extensions", "hints": True}
    assert list((tmp_path / "out").iterdir()), "no bundle written"


def test_a_library_import_leaves_msgspec_as_it_finds_it():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import tutorrl.compiler, tutorrl.evidence.bundle, typing_extensions, msgspec._utils as u; "
            "print(u._get_type_hints is typing_extensions.get_type_hints)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
