"""`tutorrl check --staged` and the pre-commit hook, in a real git repository:
real `git init`, commits and staging, the real CLI in a subprocess."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from review_helpers import base, toml_bytes, with_

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def git_env(tmp_path):
    config = tmp_path / "gitconfig"
    config.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1", NO_COLOR="1",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    return env


@pytest.fixture
def repo(tmp_path, git_env):
    root = tmp_path / "work"
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "grpo.toml").write_bytes(toml_bytes(base()))
    git(root, git_env, "init", "-q", "-b", "main")
    assert tutorrl(root, git_env, "compile", "specs/grpo.toml").returncode == 0
    git(root, git_env, "add", "-A")
    git(root, git_env, "commit", "-q", "-m", "first")
    return root


def git(root, env, *args) -> str:
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout


def tutorrl(root, env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tutorrl", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)


def bash(root, env, command: str) -> None:
    """Run an advice line as the user would paste it (the part before any comment in parentheses)."""
    command = command.split("   (")[0]
    bin_dir = root.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "tutorrl"
    shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tutorrl \"$@\"\n")
    shim.chmod(0o755)
    env = dict(env, PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    done = subprocess.run(["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, command + "\n" + done.stderr


def fixes(out: str) -> list[str]:
    return [line.strip() for line in out.split("to fix:\n", 1)[1].splitlines() if line.strip()]


def bundles_on_disk(root) -> list[str]:
    return sorted(p.name for p in (root / "bundles").iterdir())


def test_clean_index_passes(repo, git_env):
    done = tutorrl(repo, git_env, "check", "--staged")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 staged spec: every bundle is staged and up to date" in done.stdout


def test_spec_staged_without_its_bundle_fails_and_the_advice_fixes_it(repo, git_env):
    (old,) = bundles_on_disk(repo)
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), actor__lr=2e-6)))
    git(repo, git_env, "add", "specs/grpo.toml")
    done = tutorrl(repo, git_env, "check", "--staged")
    assert done.returncode == 1
    new = next(line for line in done.stdout.splitlines() if "compiles to" in line).split("compiles to ")[1][:24]
    assert new.startswith("bundles/") and new != f"bundles/{old}"
    assert f"stale   specs/grpo.toml: compiles to {new}, which is not staged" in done.stdout
    assert "actor.lr: 1e-06 -> 2e-06" in done.stdout
    steps = fixes(done.stdout)
    assert steps == [f"git rm -r -q bundles/{old}", f"tutorrl compile specs/grpo.toml && git add {new}"]
    for step in steps:
        bash(repo, git_env, step)
    assert tutorrl(repo, git_env, "check", "--staged").returncode == 0
    git(repo, git_env, "commit", "-q", "-m", "lr")


def test_the_index_is_judged_not_the_work_tree(repo, git_env):
    (old,) = bundles_on_disk(repo)
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), actor__lr=2e-6)))
    assert tutorrl(repo, git_env, "compile", "specs/grpo.toml").returncode == 0
    git(repo, git_env, "rm", "-r", "-q", "--cached", f"bundles/{old}")
    subprocess.run(["rm", "-r", str(repo / "bundles" / old)], check=True)
    # The work tree is consistent; nothing about it is staged but the removal.
    assert tutorrl(repo, git_env, "check").returncode == 0
    git(repo, git_env, "add", "specs/grpo.toml")
    done = tutorrl(repo, git_env, "check", "--staged")
    assert done.returncode == 1
    (new,) = bundles_on_disk(repo)
    assert fixes(done.stdout) == [f"git add bundles/{new}   (compiled, but not staged)"]
    bash(repo, git_env, f"git add bundles/{new}")
    assert tutorrl(repo, git_env, "check", "--staged").returncode == 0


def test_a_partly_staged_bundle_does_not_verify(repo, git_env):
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), experiment__name="second")))
    git(repo, git_env, "mv", "specs/grpo.toml", "specs/second.toml")
    assert tutorrl(repo, git_env, "compile", "specs/second.toml").returncode == 0
    new = next(n for n in bundles_on_disk(repo) if not git(repo, git_env, "ls-files", f"bundles/{n}"))
    git(repo, git_env, "add", "specs/second.toml", f"bundles/{new}/launch.sh", f"bundles/{new}/manifest.json")
    done = tutorrl(repo, git_env, "check", "--staged")
    assert done.returncode == 2
    assert f"bundles/{new} (staged): bundle verification failed" in done.stdout
    assert "bundle.env is missing" in done.stdout and "/tmp" not in done.stdout
    assert f"git add bundles/{new}   (the copy on disk verifies)" in fixes(done.stdout)


def test_spec_differs_between_index_and_work_tree(repo, git_env):
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), actor__lr=2e-6)))
    git(repo, git_env, "add", "specs/grpo.toml")
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), actor__lr=3e-6)))
    done = tutorrl(repo, git_env, "check", "--staged")
    assert done.returncode == 1
    step = fixes(done.stdout)[-1]
    assert step.startswith('git add specs/grpo.toml && git add "$(tutorrl compile specs/grpo.toml)"')
    for step in fixes(done.stdout):
        bash(repo, git_env, step)
    assert tutorrl(repo, git_env, "check", "--staged").returncode == 0
    assert b"3e-06" in (repo / "specs" / "grpo.toml").read_bytes() and "lr = 3e-06" in git(
        repo, git_env, "show", ":specs/grpo.toml")


def test_an_orphan_with_run_records_is_never_advised_away(repo, git_env):
    (old,) = bundles_on_disk(repo)
    run = repo / "bundles" / old / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}\n")
    git(repo, git_env, "rm", "-q", "specs/grpo.toml")
    for args in (("check", "--staged"), ("check",)):
        (repo / "specs").mkdir(exist_ok=True)
        done = tutorrl(repo, git_env, *args)
        assert done.returncode == 1, done.stdout + done.stderr
        (step,) = fixes(done.stdout)
        assert step.startswith(f"keep bundles/{old}: it holds the runs/ records")
        assert f"git rm -r -q --cached bundles/{old} && mv bundles/{old} ARCHIVE/" in step
        assert f"git rm -r -q bundles/{old}" not in step and f"rm -r bundles/{old}" not in step


def test_outside_a_repository(tmp_path, git_env):
    (tmp_path / "specs").mkdir()
    done = tutorrl(tmp_path, git_env, "check", "--staged")
    assert done.returncode == 2 and "not inside a git repository" in done.stderr and "Traceback" not in done.stderr


def _hook() -> dict:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    return hook


def test_the_hook_blocks_a_commit_whose_spec_changed_without_its_bundle(repo, git_env):
    hook = _hook()
    assert hook["language"] == "python" and hook["pass_filenames"] is False and hook["always_run"] is True
    entry = shlex.split(hook["entry"])
    assert entry[0] == "tutorrl"
    # What pre-commit runs, as a plain git pre-commit hook with this Python's tutorrl.
    script = repo / ".git" / "hooks" / "pre-commit"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tutorrl {shlex.join(entry[1:])}\n")
    script.chmod(0o755)
    head = git(repo, git_env, "rev-parse", "HEAD")
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), rollout__n=4)))
    git(repo, git_env, "add", "specs/grpo.toml")
    blocked = subprocess.run(["git", "commit", "-q", "-m", "n=4"], cwd=repo, env=git_env, capture_output=True,
                             text=True)
    assert blocked.returncode != 0 and "which is not staged" in blocked.stdout + blocked.stderr
    assert git(repo, git_env, "rev-parse", "HEAD") == head
    (old,) = bundles_on_disk(repo)
    assert tutorrl(repo, git_env, "compile", "specs/grpo.toml").returncode == 0
    git(repo, git_env, "rm", "-r", "-q", f"bundles/{old}")
    git(repo, git_env, "add", "bundles")
    git(repo, git_env, "commit", "-q", "-m", "n=4")
    assert git(repo, git_env, "rev-parse", "HEAD") != head


def test_check_needs_only_the_core_dependencies(repo, git_env):
    """pre-commit installs tutorrl with its core dependencies only: `check
    --staged` must run with nothing else importable (stdlib aside)."""
    core = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip().replace("-", "_").lower() for d in core}
    allowed = names | {"tutorrl"}
    code = f"""
import sys
allowed = {sorted(allowed)!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in allowed or top.startswith("_"):
            return None
        raise ImportError("not a core dependency: " + name)
sys.meta_path.insert(0, Block())
from tutorrl.cli import main
sys.exit(main(["check", "--staged"]))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=git_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), rollout__n=4)))
    git(repo, git_env, "add", "specs/grpo.toml")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=git_env, capture_output=True, text=True)
    assert done.returncode == 1 and "stale" in done.stdout, done.stderr


def test_each_staged_spec_is_compiled_once(repo, git_env):
    """A staged bundle that is exactly what its staged spec compiles to is accepted by git's object ids:
    no second compile, no blob read; any other is verified in full."""
    for i in range(3):
        (repo / "specs" / f"s{i}.toml").write_bytes(toml_bytes(with_(base(), experiment__name=f"exp-{i}")))
        assert tutorrl(repo, git_env, "compile", f"specs/s{i}.toml").returncode == 0
    git(repo, git_env, "add", "specs", "bundles")
    code = """
import sys
from tutorrl.compiler.pipeline import compile as c
from tutorrl.review import gitindex
seen, blobs = [], []
real, real_blobs = c.resolve_bytes, gitindex.read_blobs
c.resolve_bytes = lambda raw, name: seen.append(name) or real(raw, name)
gitindex.read_blobs = lambda shas: blobs.extend(shas) or real_blobs(shas)
from tutorrl.cli import main
rc = main(["check", "--staged"])
print(rc, sorted(seen), len(blobs))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=git_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # The four staged specs' blobs, read once; no bundle blob.
    assert done.stdout.splitlines()[-1] == "0 ['specs/grpo.toml', 'specs/s0.toml', 'specs/s1.toml', 'specs/s2.toml'] 4"
    # A staged launch.sh edited (and its manifest resealed by nobody): caught by the full verification.
    (bundle,) = [n for n in bundles_on_disk(repo) if "exp-1" in (repo / "bundles" / n / "manifest.json").read_text()]
    (repo / "bundles" / bundle / "launch.sh").write_text("echo edited\n")
    git(repo, git_env, "add", "bundles")
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=git_env, capture_output=True, text=True)
    assert done.stdout.splitlines()[-1].startswith("2 "), done.stdout + done.stderr
    assert f"bundles/{bundle} (staged): bundle verification failed" in done.stdout
    assert "launch.sh was modified" in done.stdout


def test_orphans_are_advised_by_whether_git_tracks_them_asked_once(repo, git_env):
    """Every spec changed (a release bump): each orphan's advice depends on whether git tracks it,
    found with one `git ls-files` for the bundle folder, not one per orphan."""
    (tracked_old,) = bundles_on_disk(repo)
    (repo / "specs" / "other.toml").write_bytes(toml_bytes(with_(base(), experiment__name="other")))
    assert tutorrl(repo, git_env, "compile", "specs/other.toml").returncode == 0
    untracked_old = next(n for n in bundles_on_disk(repo) if n != tracked_old)
    (repo / "specs" / "other.toml").write_bytes(toml_bytes(with_(base(), experiment__name="other", rollout__n=4)))
    (repo / "specs" / "grpo.toml").write_bytes(toml_bytes(with_(base(), rollout__n=4)))
    code = """
import sys
from tutorrl.review import gitindex
calls = []
real = gitindex._git
gitindex._git = lambda args, stdin=None: calls.append(args[0]) or real(args, stdin)
from tutorrl.cli import main
rc = main(["check"])
print(rc, calls.count("ls-files"))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, env=git_env, capture_output=True, text=True)
    assert done.stdout.splitlines()[-1] == "1 2", done.stdout + done.stderr  # tracked("."), then the bundle folder
    steps = fixes(done.stdout)
    assert f"git rm -r -q bundles/{tracked_old}" in steps and f"rm -r bundles/{untracked_old}" in steps
