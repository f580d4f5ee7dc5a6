"""Typed uses of tutorrl's public API, checked by ``mypy --strict`` (tests/cli/test_lint.py), never run.

As msgspec checks its stubs: each line is what a user writes, and the types it
binds are spelled out, so an API whose annotations loosen (to ``Any``) or
change shape fails the check. The lines marked ``type: ignore[...]`` are
misuses the checker must refuse: with ``warn_unused_ignores`` (part of
--strict), one it stops refusing is an error too.
"""

from __future__ import annotations

from pathlib import Path

import tutorrl
from tutorrl.errors import TutorrlError


def compile_and_write(spec: Path) -> str:
    compiled = tutorrl.compile(spec)
    also = tutorrl.compile(b"[experiment]\nname = 'x'\n", name="inline.toml")
    points = tutorrl.compile_family(str(spec), sets=["actor.lr=1e-6"])
    first_id: str = points[0].bundle.id
    written = tutorrl.write(compiled, "bundles", spec_dir=spec.parent)
    created: bool = written.created
    folder: Path = written.path
    return compiled.id + also.id + first_id + str(folder) + str(created)


def verify_and_diff(bundle: Path) -> bool:
    loaded = tutorrl.load(bundle, trust_digests=True)
    warnings: list[str] = list(loaded.warnings)
    found = tutorrl.verify(bundle, rehash=True, jobs=2, require_checkpoints=True)
    ok: bool = found.ok
    records: int = found.records
    problems: list[str] = found.problems
    changes = tutorrl.diff(bundle, "specs/other.toml", trust_digests=False)
    same: bool = changes.same
    return ok and same and not problems and records >= 0 and not warnings


def run_one(bundle: Path) -> int | None:
    run = tutorrl.run(bundle, dry_run=True)
    again = tutorrl.run(tutorrl.RunOptions(bundle=str(bundle), dry_run=True, trust_digests=True))
    run_id: str = run.run_id
    log: str = again.logs(last=1024)
    status: str = run.state().status
    exit_code: int | None = run.exit_code
    return exit_code if run_id and log and status else None


def every_other_command(bundle: Path, spec: Path) -> list[str]:
    """The rest of the shell's commands, each as its one call."""
    compared = tutorrl.compare(str(bundle), [str(spec)], trust_digests=True)
    report = tutorrl.check("specs", "bundles", staged=False)
    schema: str = tutorrl.schema()
    exported = tutorrl.export_bundle(bundle, tutorrl.ExportOptions(to="slurm", partition="gpu"), output=None)
    text: str = exported.text
    written: str | None = exported.written
    imported = tutorrl.import_script(tutorrl.ImportOptions(script="train.sh", var=["HOME=/h"]))
    spec_text: str = imported[0].text
    exact: bool = imported[0].exact
    release: str = imported[0].report.release
    keys = tutorrl.keys_list()
    lock = tutorrl.keys_lock(check=True)
    current: bool = lock.current
    added = tutorrl.keys_add("0.9.2", moves=["actor.lr=a.b"])
    folder: str = tutorrl.keys_remove("0.9.2")
    moved = tutorrl.migrate(spec, "0.8.0")
    compiles: bool = moved.migration.compiles
    where, entries = tutorrl.evidence_records(bundle)
    entry = tutorrl.add_checkpoint(bundle, "ckpt", engines=["http://e"])
    made = tutorrl.keygen(None)
    anchored = tutorrl.anchor(bundle, out="head.anchor")
    stopped = tutorrl.stop("tutorrl-abc-1")
    model = tutorrl.model(bundle, "out", step=3)
    codes: list[int] = [tutorrl.run_set([str(bundle)], max_parallel=2).exit_code]
    return [compared.kind, str(compared.same), str(report.exit_code), schema, text, str(written), spec_text,
            str(exact), release, str(len(keys.rows)), str(current), added.folder, folder, str(compiles), where,
            str(len(entries)), entry.name, made.keyid, anchored.text, str(stopped), model.folder, str(codes)]


def watch_runs(bundle: Path) -> list[str]:
    """``runs``, ``status``, ``logs`` and a set's ``run``: typed results, printed by the caller."""
    rows = tutorrl.runs(bundle)
    run_ids: list[str] = [row.run_id for row in rows]
    first = rows[0].record
    status: str | None = first.status if first is not None else None
    report = tutorrl.status("tutorrl-abc-1")
    state = report.run_state
    step: int | None = state.progress.step if state is not None else None
    every = tutorrl.status(show_all=True)
    open_ids: list[str] = [s.record.run_id for s in every.open] + [s.record.set_id for s in every.sets]
    hidden: int = every.hidden_sets + every.hidden_runs
    log: bytes = b"".join(tutorrl.logs("tutorrl-abc-1", follow=True))
    done = tutorrl.run_set([str(bundle)], max_parallel=2, detach=True)
    per_bundle: list[tuple[str | None, str, int | None]] = [(r.run, r.state, r.exit_code) for r in done.state.rows]
    return [*run_ids, str(status), str(step), *open_ids, str(hidden), log.decode(), done.set_id, str(per_bundle)]


def refused(spec: Path) -> str:
    try:
        tutorrl.compile(spec)
    except TutorrlError as exc:
        message: str = exc.render()
        code: int = exc.exit_code
        return f"{message} ({code})"
    return ""


def misuses(bundle: Path) -> None:
    tutorrl.load(bundle, trust_digests="yes")  # type: ignore[arg-type]
    tutorrl.verify(bundle, jobs="2")  # type: ignore[arg-type]
    tutorrl.compile(42)  # type: ignore[arg-type]
    flag: str = tutorrl.verify(bundle).ok  # type: ignore[assignment]
    tutorrl.export_bundle(bundle, "slurm")  # type: ignore[arg-type]
    tutorrl.keys_lock(True)  # type: ignore[call-arg]
    tutorrl.status("tutorrl-abc-1", fmt="json")  # type: ignore[call-arg]
    text: str = tutorrl.logs("tutorrl-abc-1")  # type: ignore[assignment]
    del text
    del flag
