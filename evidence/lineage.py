"""A checkpoint's history across runs: which recorded checkpoint a run resumed from.

verl resumes from what ``latest_checkpointed_iteration.txt`` names when
``trainer.resume_mode`` is ``auto`` (or from ``trainer.resume_from`` with
``resume_path``), in a folder earlier runs -- of this bundle or another --
wrote to. ``before_run`` looks before the job starts: which steps are already
there (not this run's: the scan afterwards does not claim them) and which one
the run resumes from. After the run, ``link`` finds the evidence record of
that checkpoint among the bundles the runtime names (this machine's runs) and
states it in the first record of the run (``Predicate.lineage``): bundle
digest, record name and the sha256 of the record file, and the checkpoint's
files root as hashed now, which must equal the root its record gave.
``tutorrl verify`` re-reads the linked record and checks both digests.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import msgspec

from tutorrl.evidence.checkpoints import TRACKER, find_step_dirs, step_of
from tutorrl.evidence.schema import Check, Lineage

from tutorrl.contract import EVIDENCE_DIR  # noqa: E402


class Before(msgspec.Struct, frozen=True):
    """The output folder as a run found it."""

    steps: list[int] = []
    # The step verl resumes from, when it will (resume_mode auto with a tracker, or resume_path).
    resumed_step: int | None = None


def before_run(output_dir: Path | None, resume_mode: str | None, resume_from: str | None) -> Before:
    if output_dir is None:
        return Before()
    steps = [sd.step for sd in find_step_dirs(output_dir)]
    resumed = None
    if resume_mode == "auto":
        try:
            raw = (output_dir / TRACKER).read_text(encoding="ascii", errors="replace")[:64].strip()
        except OSError:
            raw = ""
        resumed = int(raw) if raw.isdigit() and int(raw) in steps else None
    elif resume_mode == "resume_path" and resume_from:
        resumed = step_of(Path(resume_from.rstrip("/")))
    return Before(steps=steps, resumed_step=resumed)


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _records(bundle: Path):
    from tutorrl.evidence.chain import read_record, record_files
    from tutorrl.evidence.statement import RecordFormatError, decode_record

    for _seq, path in sorted(record_files(Path(bundle) / EVIDENCE_DIR).items()):
        try:
            yield path, decode_record(read_record(path)).statement
        except (OSError, ValueError, RecordFormatError):
            yield path, None


def find_record(root: Path, step: int, bundles: Iterable[Path]):
    """(bundle path, record path, statement) of the newest record of ``root``'s
    ``global_step_<step>`` among ``bundles``' evidence; None when none covers it."""
    from tutorrl.evidence.paths import recorded_root

    wanted_root = os.path.realpath(root)
    found = None
    for bundle in bundles:
        try:
            recs = _records(bundle)
        except Exception:  # an unreadable chain of another bundle links nothing
            continue
        for path, statement in recs:
            ck = statement.predicate.checkpoint if statement else None
            # The directory too: a model record (evidence/merged.py) names the step it was merged from
            # and may sit beside the checkpoints, but its folder is not global_step_<step>.
            if (ck and ck.step == step and ck.directory == f"global_step_{step}"
                    and os.path.realpath(recorded_root(ck.root, bundle)) == wanted_root):
                found = (bundle, path, statement)
    return found


def link(root: Path, step: int, files_root: str, bundles: Iterable[Path],
         own: Path | None = None) -> tuple[Lineage, Check]:
    """The lineage of a run that resumed from ``root``'s step ``step`` (hashed now: ``files_root``),
    recorded in bundle ``own`` (the linked bundle is named relative to it)."""
    from tutorrl.evidence.paths import relative_to_bundle

    directory = f"global_step_{step}"
    hit = find_record(root, step, bundles)
    if hit is None:
        lineage = Lineage(step=step, directory=directory, files_root=files_root)
        return lineage, Check(id="lineage.resumed_from", status="skipped",
                              detail=f"resumed from {directory}, which no evidence record of this machine's runs covers")
    bundle, path, statement = hit
    recorded_root = statement.predicate.checkpoint.files.root
    where = relative_to_bundle(bundle, own) if own is not None else str(Path(bundle).resolve())
    lineage = Lineage(step=step, directory=directory, files_root=files_root,
                      bundle=statement.predicate.bundle.digest, record=path.name, record_digest=_sha256(path),
                      bundle_path=where)
    if recorded_root != files_root:
        return lineage, Check(id="lineage.resumed_from", status="fail",
                              detail=f"resumed from {directory}, whose files ({files_root[:19]}) are not those its "
                                     f"record {path.name} gave ({recorded_root[:19]}): changed since it was recorded")
    return lineage, Check(id="lineage.resumed_from", status="pass",
                          detail=f"resumed from {directory}, recorded as {path.name} of bundle "
                                 f"{statement.predicate.bundle.digest[:19]}; its files are unchanged")


class Linked(msgspec.Struct, frozen=True):
    """What one record's lineage points at, as found now."""

    # The linked bundle's folder (relative names resolved against the linking bundle's).
    bundle_dir: Path | None
    # The linked record's file.
    target: Path | None
    # "none": no record was linked; "bundle-gone": no bundle there any more; "present": the bundle is there.
    state: str


def locate(bundle_dir: Path, lineage: Lineage) -> Linked:
    if lineage.record is None or lineage.bundle_path is None:
        return Linked(bundle_dir=None, target=None, state="none")
    from tutorrl.evidence.paths import recorded_root

    linked = recorded_root(lineage.bundle_path, bundle_dir)
    from tutorrl.contract import MANIFEST

    state = "present" if (linked / MANIFEST).is_file() else "bundle-gone"
    return Linked(bundle_dir=linked, target=linked / EVIDENCE_DIR / lineage.record, state=state)


def verify_link(name: str, lineage: Lineage, bundle_dir: Path, *, rehash: bool = False, how: str = "resumed from"
                ) -> tuple[list[str], list[str], list[str]]:
    """(problems, notes, unlinked) for one record's lineage: the linked record is re-read where it is.

    ``how`` the record came from the linked checkpoint: a run "resumed from" it, a model
    (evidence/merged.py) was "merged from" it; the messages say which.

    A bundle still there whose linked record is not is a problem: an unsigned chain
    can be cut back to before that record (HEAD rewritten) and still verify on its
    own, so only the link notices. A linked bundle that is gone altogether (moved,
    archived) is said, in ``unlinked`` (a failure under ``--require-lineage``).
    """
    found = locate(bundle_dir, lineage)
    if found.state == "none":
        return [], [], [f"{name}: {how} {lineage.directory}, which had no record to link"]
    bundle = lineage.bundle[:19]
    if found.state == "bundle-gone":
        return [], [], [f"{name}: {how} {lineage.record} of bundle {bundle}, but no bundle is at "
                        f"{found.bundle_dir} any more (moved or removed); the link is not checked"]
    target = found.target
    try:
        digest = _sha256(target)
    except FileNotFoundError:
        return [f"{name}: the record it {how}, {lineage.record} of bundle {bundle}, is gone from "
                f"{target.parent} while that bundle is still at {found.bundle_dir} (removed?)"], [], []
    except OSError as exc:
        return [f"{name}: the record it {how}, {target}, cannot be read: {exc.strerror or exc}"], [], []
    if digest != lineage.record_digest:
        return [f"{name}: the record it {how}, {target}, is not the one linked "
                f"({digest[:19]}, linked {lineage.record_digest[:19]}): edited or replaced since"], [], []
    from tutorrl.evidence.chain import read_record
    from tutorrl.evidence.statement import decode_record

    statement = decode_record(read_record(target)).statement
    problems = []
    if statement.predicate.bundle.digest != lineage.bundle:
        problems.append(f"{name}: {target} is a record of bundle {statement.predicate.bundle.digest[:19]}, "
                        f"not {lineage.bundle[:19]}")
    ck = statement.predicate.checkpoint
    if ck.step != lineage.step or ck.files.root != lineage.files_root:
        problems.append(f"{name}: {target} records step {ck.step} with files {ck.files.root[:19]}; the lineage "
                        f"says {how} step {lineage.step} with files {lineage.files_root[:19]}")
    if problems:
        return problems, [], []
    files = (f"its files re-hashed too: see `rehash: lineage of {name}`" if rehash
             else "its files not re-hashed: --rehash does")
    return [], [f"{name}: {how} {lineage.record} of bundle {bundle}: link checked (that record is unchanged "
                f"and gives the files root found for {lineage.directory}; {files})"], []


def linked_checkpoint(bundle_dir: Path, lineage: Lineage):
    """(linked bundle folder, linked statement) of a record's lineage, when that record is there and is the one
    linked: what ``--rehash`` hashes again beside the bundle's own checkpoints. None otherwise (verify says why)."""
    found = locate(bundle_dir, lineage)
    if found.state != "present":
        return None
    try:
        if _sha256(found.target) != lineage.record_digest:
            return None
        from tutorrl.evidence.chain import read_record
        from tutorrl.evidence.statement import decode_record

        return found.bundle_dir, decode_record(read_record(found.target)).statement
    except Exception:  # unreadable or malformed: verify_link names it
        return None
