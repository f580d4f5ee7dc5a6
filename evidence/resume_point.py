"""Where a retried run resumes: the newest checkpoint whose evidence record still holds.

A checkpoint is resumed from only when this bundle's chain verifies for its
record (its place in the chain, its digests) and its files, hashed again now,
are the files that record gave: a checkpoint a crash left half-written, one
changed on disk since, or one no record covers would hand verl something
nobody vouched for. Each checkpoint passed over is named with the reason, newest
first, so the run says why it went further back. None left: from scratch.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from tutorrl.evidence.checkpoints import find_step_dirs


class Choice(msgspec.Struct, frozen=True):
    """The checkpoint a retry resumes from (None: from scratch), and each newer one passed over, and why."""

    step: int | None
    directory: str | None
    record: str | None
    skipped: list[str]
    # Every step folder in the output folder when the choice was made (the steps above the chosen one
    # are written again by the retry).
    steps: list[int]


def _files_problem(folder: Path, recorded) -> str | None:
    """The first way ``folder``'s files differ from ``recorded`` (a record's file manifest); None when equal."""
    from tutorrl.evidence.hashing import Job, default_workers, hash_jobs, list_files

    present, odd = list_files(folder)
    want = {r.name: r for r in recorded.resources}
    now = {rel: (p, size) for rel, p, size in present}
    if odd:
        return f"{odd[0]}: not a regular file"
    for rel in sorted(set(want) - set(now)):
        return f"{rel}: missing (recorded, now gone)"
    for rel in sorted(set(now) - set(want)):
        return f"{rel}: not in its record (added since)"
    for rel in sorted(want):
        if now[rel][1] != want[rel].size:
            return f"{rel}: {now[rel][1]} bytes, recorded {want[rel].size}"
    errors: dict[str, OSError] = {}
    digests = hash_jobs([Job(p, ((rel, 0, size),)) for rel, (p, size) in now.items()],
                        workers=default_workers(), errors=errors)
    for rel in sorted(want):
        if rel in errors:
            return f"{rel}: unreadable ({errors[rel].strerror or errors[rel]})"
        if digests.get(rel) != want[rel].digest:
            return f"{rel}: content changed since it was recorded"
    return None


def choose(bundle_path: Path, root: Path | None, bundle_digest: str | None = None) -> Choice:
    """The newest checkpoint under ``root`` (the bundle's output folder) to resume from."""
    from tutorrl.evidence.paths import recorded_root
    from tutorrl.evidence.record import read_records
    from tutorrl.evidence.verify import verify_evidence

    steps = find_step_dirs(root) if root is not None else []
    if not steps:
        return Choice(step=None, directory=None, record=None, skipped=[], steps=[])
    chain = verify_evidence(Path(bundle_path), bundle_digest)
    records = [(path, s) for path, s in read_records(Path(bundle_path)) if s is not None]
    wanted = os.path.realpath(root)  # type: ignore[arg-type]  # root is set: steps were found under it
    skipped = []
    for sd in reversed(steps):
        mine = [(path, s) for path, s in records if s.predicate.checkpoint.step == sd.step
                and os.path.realpath(recorded_root(s.predicate.checkpoint.root, Path(bundle_path))) == wanted]
        name = sd.path.name
        if not mine:
            # A record that cannot be read covers nothing; the chain's first problem says which one that is.
            skipped.append(f"{name}: no evidence record of this bundle covers it"
                           + (f" (the evidence chain: {chain[0]})" if chain else ""))
            continue
        path, statement = mine[-1]  # the newest record of the folder is what it holds now
        broken = [p for p in chain if path.name in p]
        if broken:
            skipped.append(f"{name}: its record {path.name} does not verify: {broken[0]}")
            continue
        if statement.predicate.verdict.status == "fail":
            failed = ", ".join(c.id for c in statement.predicate.verdict.checks if c.status == "fail")
            skipped.append(f"{name}: its record {path.name} failed ({failed})")
            continue
        problem = _files_problem(sd.path, statement.predicate.checkpoint.files)
        if problem is not None:
            skipped.append(f"{name}: its files, hashed again, are not those record {path.name} gave ({problem})")
            continue
        return Choice(step=sd.step, directory=str(sd.path), record=path.name, skipped=skipped,
                      steps=[s.step for s in steps])
    return Choice(step=None, directory=None, record=None, skipped=skipped, steps=[s.step for s in steps])
