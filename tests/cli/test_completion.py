"""`tutorrl completion bash|zsh`: scripts generated from the parser, run in the
real shells (bash with COMP_WORDS/COMP_CWORD; zsh with words/CURRENT)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

import pytest

import support
from tutorrl import cli
from tutorrl.completion import walk


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("completion")
    out = {}
    for shell in ("bash", "zsh"):
        done = support.cli("completion", shell)
        assert done.returncode == 0, done.stderr
        (folder / f"tutorrl.{shell}").write_text(done.stdout)
        out[shell] = folder / f"tutorrl.{shell}"
    return out


def bash_complete(script, *words: str) -> list[str]:
    """Source the script in a real bash and complete the last of ``words``."""
    array = " ".join(f"'{w}'" for w in ("tutorrl", *words))
    code = (f"source '{script}'\nCOMP_WORDS=({array})\nCOMP_CWORD={len(words)}\n_tutorrl\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n')
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", code], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_bash_completes_commands_options_and_choices(scripts, tmp_path):
    b = scripts["bash"]
    assert bash_complete(b, "ve") == ["verify"]
    assert bash_complete(b, "ru") == ["run", "runs"]
    assert bash_complete(b, "run", "--d") == ["--detach", "--dry-run"]
    assert set(bash_complete(b, "run", "--")) >= {"--address", "--dry-run", "--upload", "--no-upload", "--quiet"}
    assert bash_complete(b, "diff", "a", "b", "--format", "") == ["text", "markdown", "json"]
    assert bash_complete(b, "check", "--format", "j") == ["json"]
    assert bash_complete(b, "check", "--st") == ["--staged"]
    assert bash_complete(b, "keys", "") == ["import", "add", "remove", "list", "lock"]
    assert bash_complete(b, "keys", "list", "--f") == ["--format"]
    assert bash_complete(b, "completion", "z") == ["zsh"]
    # An option's value is skipped when finding the command: --address's URL is no command.
    assert bash_complete(b, "run", "--address", "runs", "--q") == ["--quiet"]
    # Hidden aliases are not offered.
    assert "--json" not in bash_complete(b, "runs", "--")


def test_bash_completes_file_names_where_a_path_goes(scripts, tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "grpo.toml").write_text("")
    code = (f"cd '{tmp_path}'\nsource '{scripts['bash']}'\n"
            "COMP_WORDS=(tutorrl compile specs/g)\nCOMP_CWORD=2\n_tutorrl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "--norc", "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["specs/grpo.toml"]


def _all_options(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _all_options(child, (*path, name))
        elif action.option_strings and action.help != argparse.SUPPRESS:
            yield path, action.option_strings


def test_every_command_and_option_is_in_the_script(scripts):
    text = scripts["bash"].read_text()
    for command in cli.COMMAND_OWNERS:
        assert command in bash_complete(scripts["bash"], "")
    for path, options in _all_options(cli.build_parser()):
        for opt in options:
            assert opt in text, (path, opt)
    # Spot-check the tree walk itself.
    tree = walk(cli.build_parser())
    assert set(tree.children) == set(cli.COMMAND_OWNERS)
    assert tree.children["diff"].options["--format"] == ("text", "markdown", "json")


def test_the_compile_path_does_not_build_the_completion(tmp_path):
    code = ("import sys, tutorrl.cli as c; c.main(['compile', %r, '--out', %r]); "
            "print('tutorrl.completion' in sys.modules, 'tutorrl.review.commands' in sys.modules)") % (
        str(support.SPECS / "chess_tutor_grpo.toml"), str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[-2:] == ["False", "False"]



def test_bash_offers_the_evidence_actions_beside_bundle_folders(scripts, tmp_path):
    (tmp_path / "bundles").mkdir()
    code = (f"cd '{tmp_path}'\nsource '{scripts['bash']}'\n"
            "COMP_WORDS=(tutorrl evidence '')\nCOMP_CWORD=2\n_tutorrl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "--norc", "-c", code], capture_output=True, text=True, timeout=30)
    assert sorted(done.stdout.split()) == ["anchor", "bundles", "keygen"]
    assert bash_complete(scripts["bash"], "evidence", "k") == ["keygen"]
    # Only in the action's place: after `anchor` (or a bundle) come file names alone.
    assert "keygen" not in bash_complete(scripts["bash"], "evidence", "anchor", "")
    assert "keygen" not in bash_complete(scripts["bash"], "evidence", "bundles/x", "")

ZSH = shutil.which("zsh")


def zsh(script, body: str) -> str:
    done = subprocess.run([ZSH, "-f", "-c", f"source '{script}'\n{body}"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout


def test_zsh_script_structure(scripts):
    """What holds without running zsh (the tests below run it where it is installed)."""
    text = scripts["zsh"].read_text()
    assert text.startswith("#compdef tutorrl\n") and "compdef _tutorrl tutorrl" in text
    for function in ("_tutorrl_candidates", "_tutorrl_scan", "_tutorrl_subcommands", "_tutorrl_options",
                     "_tutorrl_choices", "_tutorrl_describe_subcommands", "_tutorrl"):
        assert f"\n{function}() {{" in text
    assert "'diff|--format') echo 'text markdown json' ;;" in text
    if ZSH is not None:
        assert subprocess.run([ZSH, "-n", str(scripts["zsh"])], capture_output=True).returncode == 0


def test_zsh_candidates_in_a_real_zsh(scripts):
    if ZSH is None:
        return  # covered by test_zsh_script_structure; `apt-get install zsh` runs this for real
    z = scripts["zsh"]

    def candidates(*words):
        return zsh(z, f"_tutorrl_candidates {len(words)} tutorrl {' '.join(repr(w) for w in words)}").split()

    assert "verify" in candidates("ve") and "check" in candidates("ve")  # zsh's compadd filters by prefix
    assert candidates("run", "--d") == ["--address", "--detach", "--dry-run", "--help", "--max-parallel",
                                       "--no-progress", "--no-upload", "--num-gpus", "--quiet", "--retries",
                                       "--retry-backoff", "--trust-digests", "--upload", "-h"]
    assert candidates("diff", "a", "--format", "") == ["text", "markdown", "json"]
    assert candidates("keys", "") == ["import", "add", "remove", "list", "lock"]
    assert candidates("run", "") == ["@files"]
    assert candidates("evidence", "") == ["@files", "keygen", "anchor"]
    assert candidates("evidence", "anchor", "") == ["@files"]


def test_zsh_completion_function_in_a_real_zsh(scripts):
    """_tutorrl itself, with zsh's completion builtins replaced by recorders
    (they only work inside a live completion widget)."""
    if ZSH is None:
        return  # covered by test_zsh_script_structure
    recorders = ("compadd() { print -r -- \"compadd ${(j: :)@}\"; }\n"
                 "_describe() { local -a arr; arr=(\"${(@P)4}\"); print -r -- \"describe ${(j:|:)arr}\"; }\n"
                 "_files() { print -r -- files; }\n")
    out = zsh(scripts["zsh"], recorders + "words=(tutorrl run --d); CURRENT=3; _tutorrl")
    assert out.strip() == ("compadd -- --address --detach --dry-run --help --max-parallel --no-progress --no-upload "
                           "--num-gpus --quiet --retries --retry-backoff --trust-digests --upload -h")
    out = zsh(scripts["zsh"], recorders + "words=(tutorrl ve); CURRENT=2; _tutorrl")
    assert out.startswith("describe compile:")  # each command with its help (wording is the command's own)
    assert any(d.startswith("verify:check a bundle") for d in out.strip().split("|"))
    out = zsh(scripts["zsh"], recorders + "words=(tutorrl verify ''); CURRENT=3; _tutorrl")
    assert out.strip() == "files"
    out = zsh(scripts["zsh"], recorders + "words=(tutorrl evidence ''); CURRENT=3; _tutorrl")
    assert out.split("\n")[:2] == ["compadd -- keygen anchor", "files"]
    assert scripts["zsh"].read_text().startswith("#compdef tutorrl\n")
