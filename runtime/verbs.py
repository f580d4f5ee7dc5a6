"""``tutorrl runs``, ``status``, ``logs``, ``stop``, ``model`` and the run of a set, as functions of typed values
(what ``tutorrl.api`` calls).

``runs``, ``status`` and ``logs`` write their report as they go (a follow, a table read run by run),
as the set's run writes its progress: their typed results are still to come (issue 41)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import msgspec

from tutorrl.runtime.observe import Stopped


def run_bundles(bundles: list[str], *, max_parallel: int | None = None, address: str | None = None,
                upload: bool | None = None, dry_run: bool = False, num_gpus: int | None = None, quiet: bool = False,
                no_progress: bool = False, trust_digests: bool = False, detach: bool = False) -> int:
    from tutorrl.runtime.runset import run_set

    return run_set(SimpleNamespace(bundle=list(bundles), max_parallel=max_parallel, address=address, upload=upload,
                                   dry_run=dry_run, num_gpus=num_gpus, quiet=quiet, no_progress=no_progress,
                                   trust_digests=trust_digests, detach=detach, retries=None, retry_backoff=None))


def list_runs(bundle: str, fmt: str = "text") -> int:
    from tutorrl.compiler.pipeline import require_bundle_folder
    from tutorrl.runtime.run import runs_command

    require_bundle_folder(bundle)
    return runs_command(SimpleNamespace(bundle=bundle, format=fmt, json=fmt == "json"))


def show_status(run: str | None, fmt: str = "text", show_all: bool = False) -> int:
    from tutorrl.errors import RefusedError
    from tutorrl.runtime.runset import is_set_ref

    if show_all and run:
        raise RefusedError("--all lists every set; it takes no run or set id")
    if run is not None and is_set_ref(run):
        from tutorrl.runtime.runset import status_set

        return status_set(run, fmt)
    if not run:
        from tutorrl.runtime.runset import status_overview

        return status_overview(fmt, show_all=show_all)
    from tutorrl.runtime.observe import status_command

    return status_command(SimpleNamespace(run=run, format=fmt, all=show_all))


def show_logs(run: str, follow: bool = False) -> int:
    from tutorrl.runtime.observe import logs_command

    return logs_command(SimpleNamespace(run=run, follow=follow))


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
