"""``tutorrl compile``'s argument parsing without argparse, held to argparse's answers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorrl import cli
from tutorrl.compiler.commands import _compile, parse_compile

# Words a user types after `tutorrl compile`: plain values, the option in
# every spelling argparse knows (abbreviated, joined, empty), help, `--`,
# values that look like options or negative numbers, spaces and `=`.
WORDS = st.sampled_from([
    "spec.toml", "my spec.toml", "a=b.toml", "", "bundles", "out dir", "-1", "-x", "-a b",
    "--out", "--out=", "--out=o", "--out=-o", "--ou", "--o", "--ou=o", "--outx", "--", "-h", "--help",
    "--version", "-", "--out=a=b",
])


def _argparse(argv: list[str]):
    """What argparse makes of ``compile ARGV``: its namespace, or None where it refuses."""
    parser = cli.build_parser("compile")
    try:
        return parser.parse_args(["compile", *argv])
    except SystemExit:
        return None


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=5))
def test_plain_forms_parse_as_argparse_does(argv):
    plain = parse_compile(argv)
    if plain is None:
        return  # argparse parses it (and explains a mistake)
    full = _argparse(argv)
    assert full is not None, f"{argv}: answered without argparse, which refuses it"
    assert (plain.command, plain.spec, plain.out, plain.handler) == (full.command, full.spec, full.out, full.handler)


@pytest.mark.parametrize("argv, spec, out", [
    (["s.toml"], "s.toml", "bundles"),
    (["s.toml", "--out", "o"], "s.toml", "o"),
    (["--out", "o", "s.toml"], "s.toml", "o"),
    (["--out=o", "s.toml"], "s.toml", "o"),
    (["my spec.toml", "--out=out dir"], "my spec.toml", "out dir"),
])
def test_the_forms_users_type_are_answered(argv, spec, out):
    args = parse_compile(argv)
    assert (args.spec, args.out, args.handler) == (spec, out, _compile)


@pytest.mark.parametrize("argv", [
    [], ["-h"], ["s.toml", "--help"], ["s.toml", "--ou", "o"], ["s.toml", "--out"], ["s.toml", "--out", "-o"],
    ["a.toml", "b.toml"], ["--", "s.toml"], ["s.toml", "--out", "a", "--out", "b"], ["s.toml", "--out="],
])
def test_everything_else_is_left_to_argparse(argv):
    assert parse_compile(argv) is None


def test_main_compiles_through_the_plain_parse_without_argparse(tmp_path):
    import subprocess
    import sys

    import support

    # The editable install's import hook may load modules at start-up: forget
    # argparse first, so that an import by tutorrl shows.
    code = ("import sys; sys.modules.pop('argparse', None); import tutorrl.cli as c; "
            "rc = c.main(['compile', %r, '--out', %r]); print(rc, 'argparse' in sys.modules)") % (
        str(support.SPECS / "chess_tutor_grpo.toml"), str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 False"
    # A mistake still gets argparse's usage message.
    result = support.cli("compile", "--ou")
    assert result.returncode == 2 and "usage: tutorrl compile" in result.stderr
