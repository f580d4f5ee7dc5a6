"""``tutorrl runs``, ``status``, ``logs``, ``stop``, ``model`` and the run of a set, as functions of typed values
(what ``tutorrl.api`` calls).

A set's run writes its progress lines as it goes, as ``tutorrl run`` does; the others write nothing: the
commands print what they return (runtime/text.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import msgspec

from tutorrl.runtime.observe import Stopped
from tutorrl.runtime.reports import RunRow, SetRun, StatusReport


def run_bundles(bundles: list[str], *, max_parallel: int | None = None, address: str | None = None,
                upload: bool | None = None, dry_run: bool = False, num_gpus: int | None = None, quiet: bool = False,
                no_progress: bool = False, trust_digests: bool = False, detach: bool = False) -> SetRun:
    from tutorrl.runtime.runset import run_set

    return run_set(SimpleNamespace(bundle=list(bundles), max_parallel=max_parallel, address=address, upload=upload,
                                   dry_run=dry_run, num_gpus=num_gpus, quiet=quiet, no_progress=no_progress,
                                   trust_digests=trust_digests, detach=detach, retries=None, retry_backoff=None))


def list_runs(bundle: str) -> list[RunRow]:
    from tutorrl.compiler.pipeline import require_bundle_folder
    from tutorrl.runtime.observe import run_rows

    require_bundle_folder(bundle)
    return run_rows(bundle)


def run_status(run: str | None, show_all: bool = False) -> StatusReport:
    from tutorrl.runtime.status import status_report

    return status_report(run, show_all)


def run_log(run: str, follow: bool = False) -> Iterator[bytes]:
    from tutorrl.runtime.observe import log_chunks

    return log_chunks(run, follow)


def stop_ref(run: str) -> Stopped | int:
    """A run stopped (what was found), or, for a set id, the set stopped and the exit code."""
    from tutorrl.runtime import lifecycle
    from tutorrl.runtime.observe import stop_run
    from tutorrl.runtime.runset import is_set_ref

    if is_set_ref(run):
        from tutorrl.runtime.runset import stop_set

        return stop_set(run)
    return stop_run(lifecycle.find_run(run))


class ModelMade(msgspec.Struct, frozen=True):
    """The folder ``tutorrl model`` made, its evidence record's file and one-line summary, and whether it
    holds a LoRA adapter (``lora_adapter/``) beside the base weights."""

    folder: str
    record: str
    recorded: str | None
    adapter: bool


def make_model_folder(bundle: str, out: str, *, step: int | None = None, merge_lora: bool = False,
                      python: str | None = None, workers: int | None = None) -> ModelMade:
    from tutorrl.compiler.pipeline import require_bundle_folder
    from tutorrl.evidence import read_records, recorded_line
    from tutorrl.runtime.model import ADAPTER, make_model

    require_bundle_folder(bundle)
    target, record = make_model(bundle, out, step=step, merge_lora=merge_lora, python=python, workers=workers)
    statement = next((s for p, s in read_records(Path(bundle)) if p.name == record.name), None)
    return ModelMade(str(target), record.name, recorded_line(record.name, statement) if statement is not None else None,
                     (target / ADAPTER).is_dir())
