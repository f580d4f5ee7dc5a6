"""The Python API (one function or more per command): its surface held still, and what each returns.

A change to a name, a parameter or a default here is a change for every
caller: this test is where it is seen (as torchtitan freezes its CLI options).
Running through the API is tested in tests/runtime/test_run_seam.py.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import msgspec
import pytest

import support
import tutorrl

SURFACE = {
    'add_checkpoint': "(bundle: 'str | os.PathLike[str]', checkpoint: 'str | os.PathLike[str]', *, run_id: 'str' = 'manual', engines: 'list[str] | tuple[str, ...]' = (), base_model: 'str | None' = None, workers: 'int | None' = None) -> 'Entry'",
    'anchor': "(bundle: 'str | os.PathLike[str]', *, out: 'str | None' = None) -> 'Anchored'",
    'check': "(specs: 'str | os.PathLike[str]' = 'specs', bundles: 'str | os.PathLike[str]' = 'bundles', *, staged: 'bool' = False) -> 'CheckReport'",
    'compare': "(old: 'str', new: 'list[str] | tuple[str, ...]' = (), *, against: 'str | None' = None, trust_digests: 'bool' = False) -> 'Compared'",
    'compile': "(spec: 'str | os.PathLike[str] | bytes', *, name: 'str | None' = None) -> 'CompiledBundle'",
    'compile_family': "(spec: 'str | os.PathLike[str]', *, sets: 'list[str] | tuple[str, ...]' = ()) -> 'list[CompiledPoint]'",
    'compile_files': "(specs: 'list[str] | tuple[str, ...]', out: 'str | os.PathLike[str]' = 'bundles', *, sets: 'list[str] | tuple[str, ...]' = (), rerecord: 'bool' = False) -> 'CompiledFiles'",
    'diff': "(old: 'str | os.PathLike[str]', new: 'str | os.PathLike[str]', *, trust_digests: 'bool' = False) -> 'Diff'",
    'evidence_records': "(bundle: 'str | os.PathLike[str]') -> 'tuple[str, list[Entry]]'",
    'export_bundle': "(bundle: 'str | os.PathLike[str]', options: 'ExportOptions', *, output: 'str | os.PathLike[str] | None' = None) -> 'Exported'",
    'import_script': "(options: 'ImportOptions') -> 'list[Imported]'",
    'keygen': "(key: 'str | None' = None) -> 'KeyMade'",
    'keys_add': "(release: 'str', *, wheel: 'str | None' = None, moves: 'list[str] | tuple[str, ...]' = (), wheel_cache: 'str | None' = None) -> 'release_add.AddedRelease'",
    'keys_import': "(releases: 'list[str] | tuple[str, ...]', *, dest: 'str | None' = None, wheel_cache: 'str | None' = None) -> 'list[ImportedKeySet]'",
    'keys_list': "() -> 'KeySets'",
    'keys_lock': "(*, check: 'bool' = False) -> 'LockResult'",
    'keys_remove': "(release: 'str') -> 'str'",
    'load': "(bundle: 'str | os.PathLike[str]', *, trust_digests: 'bool' = False) -> 'LoadedBundle'",
    'logs': "(run: 'str', *, follow: 'bool' = False) -> 'Iterator[bytes]'",
    'migrate': "(spec: 'str | os.PathLike[str]', to: 'str', *, source: 'str | None' = None) -> 'Migrated'",
    'model': "(bundle: 'str | os.PathLike[str]', out: 'str | os.PathLike[str]', *, step: 'int | None' = None, merge_lora: 'bool' = False, python: 'str | None' = None, workers: 'int | None' = None) -> 'ModelMade'",
    'run': "(bundle: 'str | os.PathLike[str] | RunOptions', *, jobs: 'Jobs | None' = None, progress: 'bool' = False, echo: 'bool | None' = None, **options: 'Any') -> 'Run'",
    'run_set': "(bundles: 'list[str] | tuple[str, ...]', *, max_parallel: 'int | None' = None, address: 'str | None' = None, upload: 'bool | None' = None, dry_run: 'bool' = False, num_gpus: 'int | None' = None, quiet: 'bool' = False, no_progress: 'bool' = False, trust_digests: 'bool' = False, detach: 'bool' = False) -> 'SetRun'",
    'runs': "(bundle: 'str | os.PathLike[str]') -> 'list[RunRow]'",
    'schema': "() -> 'str'",
    'status': "(run: 'str | None' = None, *, show_all: 'bool' = False) -> 'StatusReport'",
    'stop': "(run: 'str') -> 'Stopped | int'",
    'verify': "(bundle: 'str | os.PathLike[str]', *, rehash: 'bool' = False, jobs: 'int | None' = None, trust: 'list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...]' = (), anchors: 'list[str] | tuple[str, ...]' = (), require_checkpoints: 'bool' = False, trust_digests: 'bool' = False, require_lineage: 'bool' = False) -> 'Verification'",
    'write': "(compiled: 'CompiledBundle', out: 'str | os.PathLike[str]' = 'bundles', *, spec_dir: 'str | os.PathLike[str] | None' = None) -> 'WriteResult'",
}


def test_the_surface_is_what_it_was():
    import tutorrl.api

    assert tutorrl.__all__ == tutorrl.api.__all__
    assert sorted(set(tutorrl.__all__) - set(SURFACE)) == ["ExportOptions", "ImportOptions", "Run", "RunOptions",
                                                           "Verification"]
    assert {name: str(inspect.signature(getattr(tutorrl, name))) for name in SURFACE} == SURFACE
    assert [m for m in ("logs", "state", "stop", "evidence") if callable(getattr(tutorrl.Run, m))] == [
        "logs", "state", "stop", "evidence"]
    assert set(dir(tutorrl)) >= set(tutorrl.__all__)
    with pytest.raises(AttributeError):
        tutorrl.no_such_thing  # noqa: B018


def test_run_options_are_the_run_commands_flags():
    """Each RunOptions field is a `tutorrl run` flag of the same name, and each flag a field."""
    from tutorrl.cli import build_parser

    parser = build_parser("run")
    run = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith(" run"))
    flags = {a.dest for a in run._actions if a.dest != "help"}
    assert flags == set(tutorrl.RunOptions.__struct_fields__)
    assert tutorrl.RunOptions(bundle="b").address is None


def test_importing_tutorrl_loads_nothing_of_the_api():
    code = ("import sys, tutorrl; print(sorted(m for m in ('tutorrl.api', 'msgspec', 'tutorrl.compiler', "
            "'tutorrl.runtime') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=support.REPO.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_compile_write_load_verify_diff(tmp_path):
    from tutorrl.errors import BundleError, SpecError

    spec = support.REPO / "specs" / "tiny_cpu_grpo.toml"
    from_path = tutorrl.compile(spec)
    from_bytes = tutorrl.compile(spec.read_bytes(), name="mine.toml")
    assert from_path.manifest.digest == from_bytes.manifest.digest
    assert from_path.files == from_bytes.files
    assert not (tmp_path / "bundles").exists()  # compile writes nothing

    written = tutorrl.write(from_path, tmp_path / "bundles")
    assert written.path.name == from_path.manifest.id
    loaded = tutorrl.load(written.path)
    assert loaded.digest == from_path.manifest.digest

    checked = tutorrl.verify(written.path)
    assert checked.ok and checked.records == 0 and checked.problems == [] and checked.digest == loaded.digest
    cli = support.cli("verify", str(written.path), "--format", "json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["digest"] == checked.digest  # the command is made of this function

    (written.path / "launch.sh").write_text("echo changed\n")
    with pytest.raises(BundleError):
        tutorrl.verify(written.path)

    with pytest.raises(SpecError) as bad:
        tutorrl.compile(b"[experiment]\nname = 3\n", name="inline.toml")
    assert "inline.toml" in bad.value.render()

    changes = tutorrl.diff(support.REPO / "specs" / "chess_tutor_grpo.toml", support.REPO / "specs" / "chess_tutor_lora.toml")
    assert not changes.same and changes.experiment and changes.explained
    assert json.dumps(msgspec.to_builtins(changes))  # typed, and plain data once converted
    same = tutorrl.diff(spec, spec)
    assert same.same and not same.explained


def test_compile_family_gives_one_bundle_per_point():
    family = support.REPO / "specs" / "families" / "chess_tutor_lr_sweep.toml"
    points = tutorrl.compile_family(family)
    assert len(points) == 12 and all(p.point is not None for p in points)
    assert len({p.bundle.manifest.digest for p in points}) == 12
    one = tutorrl.compile_family(support.REPO / "specs" / "tiny_cpu_grpo.toml", sets=["actor.lr=3e-6"])
    assert len(one) == 1 and one[0].point is None
    assert one[0].bundle.manifest.digest != tutorrl.compile(support.REPO / "specs" / "tiny_cpu_grpo.toml").manifest.digest


def test_write_keeps_a_recorded_provenance_unless_the_specs_folder_shows_it_no_longer_holds(tmp_path):
    base = (support.SPECS / "tiny_cpu_grpo.toml").read_bytes()
    (tmp_path / "base.toml").write_bytes(base)
    (tmp_path / "child.toml").write_text('[experiment]\nextends = "base.toml"\n\n[actor]\nlr = 3e-6\n')

    def recorded():
        (manifest,) = (tmp_path / "bundles").glob("*/manifest.json")
        return json.loads(manifest.read_text())["sources"]["base.toml"]

    [before] = tutorrl.compile_family(tmp_path / "child.toml")
    tutorrl.write(before.bundle, tmp_path / "bundles", spec_dir=tmp_path)
    (tmp_path / "base.toml").write_bytes(base + b"\n# a comment changes no launch\n")
    [after] = tutorrl.compile_family(tmp_path / "child.toml")
    assert after.bundle.id == before.bundle.id
    old = recorded()
    tutorrl.write(after.bundle, tmp_path / "bundles")  # no folder to read the sources in: kept
    assert recorded() == old
    tutorrl.write(after.bundle, tmp_path / "bundles", spec_dir=tmp_path)
    assert recorded() == after.bundle.manifest.sources["base.toml"] != old


# What each command of the shell is in Python: every command has its functions, and only the command line's
# own helper (`completion`, which writes shell code for the parser) has none.
COMMANDS = {
    "compile": ["compile", "compile_family", "compile_files", "write"], "verify": ["load", "verify"],
    "keys": ["keys_add", "keys_import", "keys_list", "keys_lock", "keys_remove"], "migrate": ["migrate"],
    "run": ["run", "run_set"], "runs": ["runs"], "status": ["status"], "logs": ["logs"], "stop": ["stop"],
    "model": ["model"], "evidence": ["add_checkpoint", "anchor", "evidence_records", "keygen"],
    "diff": ["compare", "diff"], "check": ["check"], "schema": ["schema"], "import": ["import_script"],
    "export": ["export_bundle"], "completion": [],
}


def test_every_command_of_the_shell_has_its_python_form():
    from tutorrl.cli import COMMAND_OWNERS

    assert set(COMMANDS) == set(COMMAND_OWNERS)
    named = [name for names in COMMANDS.values() for name in names]
    assert sorted(named) == sorted(SURFACE)  # each function is some command's, and each is named once


def test_the_stub_names_what_the_package_exports():
    import ast

    stub = ast.parse((support.REPO / "tutorrl" / "__init__.pyi").read_text())
    named = [a.asname for node in stub.body if isinstance(node, ast.ImportFrom) for a in node.names]
    assert named == tutorrl.__all__
