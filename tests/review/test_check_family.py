"""``tutorrl check`` over a base and the sweep built on it: a base change marks every derived bundle stale."""

from __future__ import annotations

import pytest

import support
from tutorrl import cli
from tutorrl.review.check import format_report, report_json, run_check

BASE = (support.SPECS / "tiny_cpu_grpo.toml").read_bytes()


@pytest.fixture
def tree(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "base.toml").write_bytes(BASE)
    (tmp_path / "specs" / "sweep.toml").write_text(
        '[experiment]\nextends = "base.toml"\n\n[sweep]\ngrid = { "actor.lr" = [1e-6, 3e-6, 1e-5], '
        '"rollout.n" = [1, 2, 3, 4] }\n')
    assert cli.main(["compile", "specs/base.toml", "specs/sweep.toml"]) == 0
    capsys.readouterr()
    return tmp_path


def _points(report):
    return [r for r in report.specs if r.spec == "specs/sweep.toml"]


def test_a_sweep_is_checked_point_by_point_and_a_base_that_compiles_as_a_spec(tree):
    report = run_check()
    assert report.exit_code == 0, format_report(report)
    assert len(_points(report)) == 12 and len({r.point for r in _points(report)}) == 12
    assert [r.point for r in report.specs if r.spec == "specs/base.toml"] == [""]
    assert "2 specs (13 launches): every bundle is up to date" in format_report(report)
    assert '"point": "actor.lr=1e-06, rollout.n=1"' in report_json(report)


def test_a_base_change_that_changes_the_launch_marks_every_point_stale(tree):
    base = tree / "specs" / "base.toml"
    base.write_bytes(BASE.replace(b"total_steps = 2", b"total_steps = 3"))
    report = run_check()
    assert report.exit_code == 1
    assert [r.state for r in report.specs] == ["missing"] * 13
    assert all(r.diff is not None and "trainer.total_steps" in str(r.diff.experiment) for r in report.specs)
    assert len(report.orphans) == 13
    assert report.fix.count("tutorrl compile specs/sweep.toml") == 1


def test_a_base_change_that_changes_no_launch_still_marks_the_manifests_stale(tree):
    (tree / "specs" / "base.toml").write_bytes(BASE + b"\n# a comment changes no launch\n")
    report = run_check()
    assert report.exit_code == 1
    assert [r.state for r in _points(report)] == ["stale"] * 12
    assert "base.toml changed" in _points(report)[0].message and not report.orphans
    # The base's own bundle has no sources to record: the same launch is simply current.
    assert [r.state for r in report.specs if r.spec == "specs/base.toml"] == ["ok"]
    # Compiling again records the new sources in the same bundle folders.
    assert cli.main(["compile", "specs/sweep.toml"]) == 0
    assert run_check().exit_code == 0


def test_a_base_that_does_not_compile_alone_is_no_error(tree):
    # A partial base: no experiment table of its own; the sweep supplies it.
    partial = BASE.replace(b'[experiment]\nname = "tiny-cpu-grpo"\nverl = "0.5.0"\nproject = "tiny-cpu"\n', b"")
    assert partial != BASE
    (tree / "specs" / "base.toml").write_bytes(partial)
    sweep = tree / "specs" / "sweep.toml"
    sweep.write_text(sweep.read_text().replace(
        'extends = "base.toml"\n', 'extends = "base.toml"\nname = "tiny-cpu-grpo"\nverl = "0.5.0"\nproject = "tiny-cpu"\n'))
    report = run_check()
    assert report.exit_code == 1, format_report(report)
    # The partial base is no spec of its own (its old bundle is an orphan now), and no error.
    assert {r.spec for r in report.specs} == {"specs/sweep.toml"} and len(report.orphans) == 1
    assert {r.state for r in report.specs} == {"stale"}
    assert "sweep.toml" in report.specs[0].message and "base.toml" in report.specs[0].message


def test_staged_check_reads_the_base_as_staged_not_as_on_disk(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys

    config = tmp_path / "gitconfig"
    config.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t",
               GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    root = tmp_path / "work"
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "base.toml").write_bytes(BASE)
    (root / "specs" / "sweep.toml").write_text('[experiment]\nextends = "base.toml"\n\n[sweep]\n'
                                               'grid = { "rollout.n" = [1, 2] }\n')

    def run(*argv):
        return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)

    assert run("git", "init", "-q", "-b", "main").returncode == 0
    assert run(sys.executable, "-m", "tutorrl", "compile", "specs/base.toml", "specs/sweep.toml").returncode == 0
    assert run("git", "add", "specs", "bundles").returncode == 0
    assert run(sys.executable, "-m", "tutorrl", "check", "--staged").returncode == 0
    # Edited on disk, not staged: the commit would record the old base, whose bundles are staged.
    (root / "specs" / "base.toml").write_bytes(BASE.replace(b"total_steps = 2", b"total_steps = 3"))
    assert run(sys.executable, "-m", "tutorrl", "check", "--staged").returncode == 0
    assert run(sys.executable, "-m", "tutorrl", "check").returncode == 1
    # Staged: every launch built on it is stale in what the commit would record.
    assert run("git", "add", "specs/base.toml").returncode == 0
    staged = run(sys.executable, "-m", "tutorrl", "check", "--staged")
    assert staged.returncode == 1 and staged.stdout.count("is not staged") == 3, staged.stdout


def _bytes(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _two_sweeps(root):
    (root / "specs").mkdir()
    (root / "specs" / "base.toml").write_bytes(BASE)
    for name, lrs in (("a", "[1e-6, 3e-6]"), ("b", "[3e-6, 1e-5]")):
        (root / "specs" / f"{name}.toml").write_text(
            f'[experiment]\nextends = "base.toml"\n\n[sweep]\ngrid = {{ "actor.lr" = {lrs} }}\n')


def _shared(root):
    """The bundle of the point both sweeps hold (lr 3e-6), and its manifest."""
    import json

    (folder,) = [m.parent for m in (root / "bundles").glob("*/manifest.json")
                 if json.loads(m.read_text())["experiment"].endswith("lr_3e-06")]
    return folder, json.loads((folder / "manifest.json").read_text())


def test_a_point_two_sweeps_hold_keeps_one_record_through_compiles_in_turn(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _two_sweeps(tmp_path)
    assert cli.main(["compile", "specs/base.toml"]) == 0  # (it compiles alone: a bundle of its own)
    assert cli.main(["compile", "specs/a.toml"]) == 0
    after_a = _bytes(tmp_path / "bundles")
    assert cli.main(["compile", "specs/b.toml"]) == 0
    after_b = _bytes(tmp_path / "bundles")
    assert cli.main(["compile", "specs/a.toml"]) == 0
    # Compiling the holders in turn rewrites nothing: B added its one new bundle, A again nothing.
    assert {k: v for k, v in after_b.items() if k in after_a} == after_a and len(after_b) == len(after_a) * 4 // 3
    assert _bytes(tmp_path / "bundles") == after_b
    folder, manifest = _shared(tmp_path)
    assert set(manifest["sources"]) == {"a.toml", "base.toml"}  # the first holder's record, still true
    report = run_check()
    assert report.exit_code == 0, format_report(report)
    assert [r.state for r in report.specs if r.bundle.endswith(folder.name)] == ["ok", "ok"]
    # So does the point written out as a spec of its own (one file: no sources to record).
    (tmp_path / "specs" / "point.toml").write_bytes(BASE.replace(b'name = "tiny-cpu-grpo"', b'name = "tiny-cpu-grpo-lr_3e-06"')
                                                    .replace(b"[actor]\n", b"[actor]\nlr = 3e-6\n"))
    assert cli.main(["compile", "specs/point.toml"]) == 0
    assert _bytes(tmp_path / "bundles") == after_b
    assert run_check().exit_code == 0

    # A base edited where it changes no launch: the record is no longer true; the first holder
    # compiled records its sources, and the other then keeps them.
    (tmp_path / "specs" / "base.toml").write_bytes(BASE + b"\n# a comment changes no launch\n")
    stale = run_check()
    assert [r.state for r in stale.specs if r.bundle.endswith(folder.name)] == ["stale"] * 3  # (the record no holder tells now)
    assert cli.main(["compile", "specs/b.toml"]) == 0
    assert set(_shared(tmp_path)[1]["sources"]) == {"b.toml", "base.toml"}
    assert cli.main(["compile", "specs/a.toml"]) == 0  # (records the new base in its own 1e-6 point)
    assert set(_shared(tmp_path)[1]["sources"]) == {"b.toml", "base.toml"}
    once = _bytes(tmp_path / "bundles")
    for name in ("b", "a", "point", "b"):
        assert cli.main(["compile", f"specs/{name}.toml"]) == 0
    assert _bytes(tmp_path / "bundles") == once and run_check().exit_code == 0

    # Its recorded holder removed: compiling the other cannot prove the record false (b.toml is not
    # there, as another folder's spec would not be), so a plain compile keeps it, and check says
    # to compile one holder with --rerecord: in place, the folder (and any runs/ in it) kept.
    (tmp_path / "specs" / "b.toml").unlink()
    assert cli.main(["compile", "specs/a.toml"]) == 0
    assert set(_shared(tmp_path)[1]["sources"]) == {"b.toml", "base.toml"}
    (folder / "runs" / "r1").mkdir(parents=True)
    (folder / "runs" / "r1" / "run.json").write_text("{}")
    capsys.readouterr()
    gone = run_check()
    assert gone.exit_code == 1
    stale = [r for r in gone.specs if r.bundle.endswith(folder.name)]
    assert [r.state for r in stale] == ["stale", "stale"], format_report(gone)
    assert all("--rerecord" in r.message and "compile again" not in r.message for r in stale)
    assert not any(folder.name in f for f in gone.fix if not f.startswith("tutorrl compile")), gone.fix
    import shlex
    import shutil

    for fix in gone.fix:  # done as said: the removal (b's other point is an orphan now), then the compile
        if fix.startswith("rm -r "):
            shutil.rmtree(shlex.split(fix)[-1])
    # One holder re-records it; the other, which then holds a true record, has nothing to do.
    assert [f for f in gone.fix if not f.startswith("rm -r ")] == ["tutorrl compile specs/a.toml --rerecord"]
    assert cli.main(shlex.split(gone.fix[-1])[1:]) == 0
    assert set(_shared(tmp_path)[1]["sources"]) == {"a.toml", "base.toml"}
    assert (folder / "runs" / "r1" / "run.json").read_text() == "{}"
    report = run_check()
    assert [r.state for r in report.specs if r.bundle.endswith(folder.name)] == ["ok", "ok"], format_report(report)
    # And a plain compile of each holder in turn rewrites no byte again.
    once = _bytes(tmp_path / "bundles")
    for name in ("point", "a", "point"):
        assert cli.main(["compile", f"specs/{name}.toml"]) == 0
    assert _bytes(tmp_path / "bundles") == once


def test_two_sweeps_compiled_together_write_their_shared_point_once_the_same_way(tmp_path, monkeypatch, capsys):
    trees = []
    for n in (1, 2):
        root = tmp_path / str(n)
        root.mkdir()
        monkeypatch.chdir(root)
        _two_sweeps(root)
        assert cli.main(["compile", "specs/base.toml", "specs/a.toml", "specs/b.toml"]) == 0
        trees.append(_bytes(root / "bundles"))
        assert set(_shared(root)[1]["sources"]) == {"a.toml", "base.toml"}  # the first named
        assert run_check().exit_code == 0
    assert trees[0] == trees[1] and len(trees[0]) == 4 * len(list((root / "bundles" / next(iter(trees[0])).split("/")[0]).iterdir()))


@pytest.mark.parametrize("key", ["a.toml\0x", "ABSOLUTE", "sub/../a.toml", "./a.toml", "a.toml/..", ""])
def test_a_recorded_source_no_compile_writes_is_no_true_record_and_never_read(tmp_path, monkeypatch, key):
    """A manifest edited by hand to name a source the compiler never records (NUL, an absolute or
    unnormalised path): compile replaces the record, reads nothing by it, and never raises."""
    import json

    monkeypatch.chdir(tmp_path)
    _two_sweeps(tmp_path)
    assert cli.main(["compile", "specs/a.toml"]) == 0 and cli.main(["compile", "specs/b.toml"]) == 0
    folder, manifest = _shared(tmp_path)
    key = str(tmp_path / "specs" / "a.toml") if key == "ABSOLUTE" else key  # (a true digest, if it were read)
    manifest["sources"] = {key if name == "a.toml" else name: digest
                           for name, digest in manifest["sources"].items()}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert cli.main(["compile", "specs/b.toml"]) == 0
    assert set(_shared(tmp_path)[1]["sources"]) == {"b.toml", "base.toml"}
    assert [r.state for r in run_check().specs if r.bundle.endswith(folder.name)] == ["ok", "ok"]


def test_a_recorded_source_above_the_spec_is_read_only_where_the_compile_reads_it(tmp_path, monkeypatch):
    """``../x.toml`` is how a base in a folder above is recorded; one this compile does not read
    itself is no proof either way (never read), so the record is kept, as for a file not there."""
    import json

    monkeypatch.chdir(tmp_path)
    _two_sweeps(tmp_path)
    assert cli.main(["compile", "specs/a.toml"]) == 0 and cli.main(["compile", "specs/b.toml"]) == 0
    (tmp_path / "outside.toml").write_text("# another digest than the one recorded\n")
    folder, manifest = _shared(tmp_path)
    manifest["sources"]["../outside.toml"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    before = (folder / "manifest.json").read_bytes()
    assert cli.main(["compile", "specs/b.toml"]) == 0
    assert (folder / "manifest.json").read_bytes() == before


def test_staged_check_asks_the_index_whether_a_recorded_holder_is_there(tmp_path):
    """The holder removed from the index but still on disk (edited): the commit would hold no
    spec that gives the record, and none the compile could prove it false by, so --rerecord."""
    import os
    import subprocess
    import sys

    config = tmp_path / "gitconfig"
    config.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1")
    root = tmp_path / "work"
    root.mkdir()
    _two_sweeps(root)

    def run(*argv):
        return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)

    assert run("git", "init", "-q", "-b", "main").returncode == 0
    assert run(sys.executable, "-m", "tutorrl", "compile", "specs/base.toml").returncode == 0
    assert run(sys.executable, "-m", "tutorrl", "compile", "specs/a.toml").returncode == 0
    assert run(sys.executable, "-m", "tutorrl", "compile", "specs/b.toml").returncode == 0
    folder, _ = _shared(root)
    assert run("git", "add", "specs", "bundles").returncode == 0
    assert run(sys.executable, "-m", "tutorrl", "check", "--staged").returncode == 0
    # a.toml unstaged (its own point too), and edited on disk: the work tree's a.toml would
    # prove the record false; the index holds no a.toml at all.
    (a_only,) = [m.parent.name for m in (root / "bundles").glob("*/manifest.json")
                 if m.parent != folder and "a.toml" in m.read_text()]
    assert run("git", "rm", "-q", "--cached", "specs/a.toml").returncode == 0
    assert run("git", "rm", "-q", "-r", "--cached", f"bundles/{a_only}").returncode == 0
    (root / "specs" / "a.toml").write_text((root / "specs" / "a.toml").read_text() + "# edited\n")
    staged = run(sys.executable, "-m", "tutorrl", "check", "--staged")
    assert staged.returncode == 1, staged.stdout + staged.stderr
    assert f"tutorrl compile specs/b.toml --rerecord && git add bundles/{folder.name}" in staged.stdout, staged.stdout
    assert "compile again" not in staged.stdout


def test_rerecord_in_a_set_compile_records_the_first_spec_that_names_the_launch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _two_sweeps(tmp_path)
    assert cli.main(["compile", "specs/a.toml", "specs/b.toml"]) == 0
    assert set(_shared(tmp_path)[1]["sources"]) == {"a.toml", "base.toml"}
    assert cli.main(["compile", "specs/b.toml", "specs/a.toml"]) == 0  # (a plain compile keeps a true record)
    assert set(_shared(tmp_path)[1]["sources"]) == {"a.toml", "base.toml"}
    assert cli.main(["compile", "specs/b.toml", "specs/a.toml", "--rerecord"]) == 0
    assert set(_shared(tmp_path)[1]["sources"]) == {"b.toml", "base.toml"}
