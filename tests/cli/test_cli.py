"""The `tutorrl` entry point: one parser per command, errors shown once, no tracebacks."""

from __future__ import annotations

import argparse
import importlib

import support
from tutorrl import cli


def _registered(module: str) -> set[str]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    importlib.import_module(module).register(sub)
    return set(sub.choices)


def test_command_owners_match_what_modules_register():
    owners = {}
    for module in cli._COMMAND_MODULES:
        for command in _registered(module):
            owners[command] = module
    assert owners == cli.COMMAND_OWNERS


def test_help_lists_every_command():
    result = support.cli("--help")
    assert result.returncode == 0
    for command in cli.COMMAND_OWNERS:
        assert command in result.stdout


def test_unknown_command_is_a_usage_error_without_traceback():
    result = support.cli("compiel", "x.toml")
    assert result.returncode == 2 and "compiel" in result.stderr and "Traceback" not in result.stderr


def test_a_mistyped_command_gets_one_line_naming_the_nearest():
    result = support.cli("compil", "x")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("error: tutorrl compil: not a tutorrl command; did you mean 'compile'? "
                             "(`tutorrl --help` says what each does)\n")
    result = support.cli("keys", "lok")  # a sub-command's own verbs too
    assert result.returncode == 2 and result.stderr.startswith(
        "error: tutorrl keys lok: not a tutorrl keys command; did you mean 'lock'?")
    result = support.cli("zzzz")  # nothing near: the commands there are
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "commands: compile, keys, migrate" in result.stderr


def test_compile_path_imports_nothing_heavy(tmp_path):
    # The editable install's import hook loads pathlib at start-up (a wheel's
    # does not): forget it first, so that an import by tutorrl shows.
    code = ("import sys; [sys.modules.pop(m, None) for m in ('pathlib', 'urllib.parse', 'ipaddress', 'argparse')]; "
            "import tutorrl.cli as c; c.main(['compile', %r, '--out', %r]); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('ray', 'torch', 'hydra', 'omegaconf', 'verl', 'tutorrl', '_hashlib', 'shutil', 'pathlib', 'importlib', "
            "'argparse', 'tomli_w')))"
            ) % (str(support.SPECS / "chess_tutor_grpo.toml"), str(tmp_path))
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out.strip().splitlines()[-1])
    assert not [m for m in loaded if not m.startswith(("tutorrl", "_hashlib", "shutil", "pathlib", "importlib", "argparse",
                                                       "tomli_w"))]
    # Each costs a cold compile measurably (benchmarks/bench_compile.py): OpenSSL
    # for a few kB of sha256, shutil (with zlib, bz2, lzma) for argparse's width.
    assert "_hashlib" not in loaded and "shutil" not in loaded

    # pathlib (with urllib.parse and ipaddress) was ~3 ms; the compile path writes with os.
    assert "pathlib" not in loaded and "importlib.metadata" not in loaded
    # The plain `compile SPEC --out DIR` is parsed without argparse (gettext, locale: ~2.5 ms).
    assert "argparse" not in loaded
    # The spec.toml is written by tutorrl._toml, tomli_w's bytes without tomli_w (tests/cli/test_toml.py).
    assert "tomli_w" not in loaded
    # Compiling is not verifying: the verifier loads only when asked for.
    assert "tutorrl.compiler.pipeline.verify" not in loaded
    assert not [m for m in loaded if m.startswith(("tutorrl.runtime.", "tutorrl.evidence.", "tutorrl.review."))]


def test_a_plain_specs_compile_leaves_out_what_only_other_specs_need(tmp_path):
    # A spec without raw overrides, roots or text to escape imports neither json, shlex, the raw-override
    # screen nor the value types, and compiles none of the patterns kept for those specs: each is a share of
    # its cold compile (docs/architecture.md, "Measured").
    code = ("import re, sys; import tutorrl.cli as c; c.main(['compile', %r, '--out', %r]); "
            "from tutorrl.compiler.pipeline import resolve, roots, rules; from tutorrl.compiler.release import hydra; "
            "from tutorrl.compiler.spec import load; "
            "kept = {load.PLACEHOLDER, resolve._INTERPOLATION, roots.ROOT_REF, roots._ANYWHERE, rules._WORDS, "
            "hydra._INTERPOLATION.pattern, hydra._BEFORE_QUOTE.pattern, hydra._TRAILING.pattern}; "
            "print(sorted(m for m in ('json', 'shlex', 'tutorrl.compiler.pipeline.raw_overrides', "
            "'tutorrl.compiler.pipeline.value_types') if m in sys.modules), sorted(kept & {k[1] for k in re._cache}))"
            ) % (str(support.SPECS / "chess_tutor_grpo.toml"), str(tmp_path))
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[] []"


def test_help_width_follows_columns_without_shutil():
    import os
    import subprocess
    import sys

    code = "import sys, tutorrl.cli as c; c.main(['compile', '--help'])"
    narrow = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "40"}).stdout
    wide = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}).stdout
    assert max(map(len, narrow.splitlines())) <= 40 < max(map(len, wide.splitlines()))


def test_entry_exits_with_mains_code_and_spares_only_short_commands_the_collector(tmp_path):
    import subprocess
    import sys

    def run(*argv: str) -> tuple[int, str]:
        # What the collector looked like as the process ended (atexit runs after entry's sys.exit).
        code = ("import atexit, gc, sys; "
                "atexit.register(lambda: print('gc', gc.isenabled(), gc.get_freeze_count() > 0)); "
                f"sys.argv = ['tutorrl', *{list(argv)!r}]; import tutorrl.cli as c; c.entry()")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        return result.returncode, result.stdout.strip().splitlines()[-1]

    spec = str(support.SPECS / "chess_tutor_grpo.toml")
    assert run("compile", spec, "--out", str(tmp_path)) == (0, "gc False True")
    # A failing compile exits with main's code (2), still short.
    assert run("compile", str(tmp_path / "missing.toml")) == (2, "gc False True")
    # So is an import (Hydra's imports make ~120 collections that free nothing).
    assert run("import", "--verl", "0.9.1", "--no-check", "--", "trainer.total_epochs=2") == (1, "gc False True")
    # Any other command keeps the collector, and exits with main's code.
    assert run("schema") == (0, "gc True False")


def test_tutorrl_debug_shows_where_an_error_was_raised(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text('[experiment]\nverl = "0.9.1"\nnmae = "x"\n')
    plain = support.cli("compile", str(spec), "--out", str(tmp_path / "b"), env={"TUTORRL_DEBUG": ""})
    debug = support.cli("compile", str(spec), "--out", str(tmp_path / "b"), env={"TUTORRL_DEBUG": "1"})
    assert plain.returncode == debug.returncode == 2
    assert "Traceback" not in plain.stderr and "did you mean" in plain.stderr
    assert "Traceback (most recent call last)" in debug.stderr and "did you mean" in debug.stderr
