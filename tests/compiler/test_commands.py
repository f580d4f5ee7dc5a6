"""``tutorrl compile``: its argument parsing without argparse, held to argparse's answers; many specs in one process."""

from __future__ import annotations

from pathlib import Path

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
    "--version", "-", "--out=a=b", "b.toml", "specs/*.toml",
])


def _argparse(argv: list[str]):
    """What argparse makes of ``compile ARGV``: its namespace, or None where it refuses."""
    parser = cli.build_parser("compile")
    try:
        return parser.parse_args(["compile", *argv])
    except SystemExit:
        return None


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=6))
def test_plain_forms_parse_as_argparse_does(argv):
    plain = parse_compile(argv)
    if plain is None:
        return  # argparse parses it (and explains a mistake)
    full = _argparse(argv)
    assert full is not None, f"{argv}: answered without argparse, which refuses it"
    assert (plain.command, plain.specs, plain.out, plain.handler) == (full.command, full.specs, full.out, full.handler)


@pytest.mark.parametrize("argv, specs, out", [
    (["s.toml"], ["s.toml"], "bundles"),
    (["s.toml", "--out", "o"], ["s.toml"], "o"),
    (["--out", "o", "s.toml"], ["s.toml"], "o"),
    (["--out=o", "s.toml"], ["s.toml"], "o"),
    (["my spec.toml", "--out=out dir"], ["my spec.toml"], "out dir"),
    (["a.toml", "b.toml"], ["a.toml", "b.toml"], "bundles"),
    (["a.toml", "b.toml", "--out", "o"], ["a.toml", "b.toml"], "o"),
    (["--out=o", "specs/*.toml", "a.toml"], ["specs/*.toml", "a.toml"], "o"),
])
def test_the_forms_users_type_are_answered(argv, specs, out):
    args = parse_compile(argv)
    assert (args.specs, args.out, args.handler) == (specs, out, _compile)


@pytest.mark.parametrize("argv", [
    [], ["-h"], ["s.toml", "--help"], ["s.toml", "--ou", "o"], ["s.toml", "--out"], ["s.toml", "--out", "-o"],
    ["--", "s.toml"], ["s.toml", "--out", "a", "--out", "b"], ["s.toml", "--out="],
    ["a.toml", "--out", "o", "b.toml"], ["a.toml", "--out=o", "b.toml"],
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


# --- Many specs in one process.

def _tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def examples(tmp_path, monkeypatch):
    """The example specs, copied into a folder of their own (and the cwd there)."""
    import shutil

    import support

    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs" / "more").mkdir(parents=True)
    names = []
    for i, spec in enumerate(support.example_specs()):
        target = tmp_path / "specs" / ("more" if i % 3 == 2 else "") / spec.name
        shutil.copy(spec, target)
        names.append(str(target.relative_to(tmp_path)))
    # dapo_example's recipe code, where its root's default names it from the working folder.
    shutil.copytree(support.SPECS / "recipes", tmp_path / "specs" / "recipes")
    return names


def test_many_specs_write_the_bundles_one_by_one_compiles_would(examples, capsys):
    assert len(examples) >= 6
    one_by_one = []
    for spec in examples:
        assert cli.main(["compile", spec, "--out", "single"]) == 0
        one_by_one.append(capsys.readouterr().out.strip())
    # In the order given, with a duplicate: one path per spec given.
    given = [examples[2], *examples, examples[0]]
    assert cli.main(["compile", *given, "--out", "many"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [p.replace("single/", "many/") for p in [one_by_one[2], *one_by_one, one_by_one[0]]]
    assert _tree(Path("many")) == _tree(Path("single"))


def test_a_quoted_glob_expands_in_its_place_sorted(examples, capsys):
    import glob

    first = examples[-1]
    assert cli.main(["compile", first, "specs/**/*.toml", "--out", "b"]) == 0
    out = capsys.readouterr().out.splitlines()
    expanded = sorted(glob.glob("specs/**/*.toml", recursive=True))
    assert len(expanded) == len(examples)
    for spec, line in zip([first, *expanded], out, strict=True):
        assert cli.main(["compile", spec, "--out", "b"]) == 0
        assert capsys.readouterr().out.strip() == line


def test_each_spec_is_compiled_once(examples, monkeypatch, capsys):
    from tutorrl.compiler.pipeline import compile as compile_module

    seen = []
    real = compile_module.resolve_bytes
    monkeypatch.setattr(compile_module, "resolve_bytes", lambda raw, name: seen.append(name) or real(raw, name))
    # A spec named twice (here: by itself and by the pattern) is compiled once, and printed twice.
    assert cli.main(["compile", examples[0], "specs/*.toml", "specs/more/*.toml"]) == 0
    assert sorted(seen) == sorted(examples)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(examples) + 1 and out.count(out[0]) == 2


def test_a_bundle_folder_that_differs_is_refused_before_any_new_bundle_is_written(examples, capsys):
    from tutorrl.errors import BundleError

    assert cli.main(["compile", examples[-1]]) == 0
    (existing,) = Path("bundles").iterdir()
    (existing / "launch.sh").write_text("echo edited\n")
    with pytest.raises(BundleError, match="launch.sh differs"):
        _compile(parse_compile([*examples]))
    assert [p.name for p in Path("bundles").iterdir()] == [existing.name]


def test_every_problem_of_every_spec_is_reported_and_nothing_is_written(examples, capsys):
    from tutorrl.errors import SpecError

    Path("specs/bad.toml").write_text('[experiment]\nname = 1\nverl = "0.9.1"\n[actor]\nlrr = 1\n')
    Path("specs/more/worse.toml").write_text("[experiment\n")
    with pytest.raises(SpecError) as raised:
        # What cli.main catches and prints (it exits 2).
        from tutorrl.compiler.commands import _compile

        _compile(parse_compile(["specs/*.toml", "missing.toml", "specs/more/*.toml", "nothing/*.toml"]))
    err = raised.value
    assert err.exit_code == 2
    by_file = {}
    for p in err.problems:
        by_file.setdefault(p.file, []).append(p)
    assert set(by_file) == {"specs/bad.toml", "specs/more/worse.toml", "missing.toml", "nothing/*.toml"}
    assert {(p.line, p.key) for p in by_file["specs/bad.toml"]} == {(2, "experiment.name"), (5, "actor.lrr")}
    assert by_file["specs/more/worse.toml"][0].line == 1
    assert f"4 of {len(examples) + 4} specs have problems; no bundle was written." in err.render()
    assert capsys.readouterr().out == "" and not Path("bundles").exists()
    # Through the CLI: exit 2, each problem on its own located line.
    assert cli.main(["compile", "specs/*.toml", "specs/more/*.toml"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not Path("bundles").exists()
    assert "error: specs/bad.toml:5:1: actor.lrr: unknown key" in captured.err
    assert "2 of" in captured.err and "Traceback" not in captured.err
