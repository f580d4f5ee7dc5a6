"""Checking a bundle's evidence directory: every record, every link, and HEAD;
then the signatures (`sign.judge_signatures`, against `--trust` keys) and the
anchors kept outside the bundle (`anchor.check_anchor`).

HEAD and the list of records are read together under the chain's shared lock
(`chain.chain_lock`), so a writer publishing meanwhile can never make a record
look removed. Work is bounded by the files actually present: a record named
with a huge sequence number is one gap to report, not a loop up to it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import msgspec

from tutorrl._read import ReadError
from tutorrl.evidence.chain import (
    HEAD_NAME, LOCK_NAME, RECORD, TEMP, ChainError, chain_lock, directory_problem, read_head, read_record,
    record_files, record_name,
)
from tutorrl.evidence.hashing import manifest_root
from tutorrl.evidence.schema import (
    MODEL_LINK_CHECK, MODEL_SOURCE, PREDICATE_TYPE, STATEMENT_TYPE, Statement, overall_status,
)
from tutorrl.evidence.statement import Record, RecordFormatError, decode_head, decode_record, digest

from tutorrl.contract import EVIDENCE_DIR  # noqa: E402


def _record_problems(name: str, s: Statement, bundle_digest: str | None) -> list[str]:
    p = s.predicate
    problems = []
    if s.type != STATEMENT_TYPE or s.predicateType != PREDICATE_TYPE:
        problems.append(f"{name}: not a tutorrl checkpoint statement ({s.type}, {s.predicateType})")
    if bundle_digest is not None and p.bundle.digest != bundle_digest:
        problems.append(f"{name}: recorded for bundle {p.bundle.digest}, this bundle is {bundle_digest}")
    if p.verdict.status != overall_status(p.verdict.checks):
        problems.append(f"{name}: verdict says {p.verdict.status!r} but its checks make it {overall_status(p.verdict.checks)!r}")
    files = p.checkpoint.files
    if files.root != manifest_root(files.resources):
        problems.append(f"{name}: file manifest root does not match its resources")
    expected = [(f"{p.checkpoint.directory}/{r.name}", r.digest) for r in files.resources]
    if [(d.name, d.digest.get("sha256")) for d in s.subject] != expected or any(len(d.digest) != 1 for d in s.subject):
        problems.append(f"{name}: subject does not list exactly the manifest's files and digests")
    problems.extend(model_problems(name, s))
    return problems


def model_problems(name: str, s: Statement) -> list[str]:
    """What `verify` requires of a model record beyond any record's checks: it says how it was made and
    links the checkpoint it came from; and no other record claims to be one."""
    p = s.predicate
    if p.run.source != MODEL_SOURCE:
        return [f"{name}: has a model section but is not a model-merger record"] if p.model is not None else []
    problems = []
    if p.model is None:
        problems.append(f"{name}: a model-merger record without its model section")
    if p.lineage is None or p.lineage.record is None:
        problems.append(f"{name}: a model-merger record that links no checkpoint record")
    if not any(c.id == MODEL_LINK_CHECK for c in p.verdict.checks):
        problems.append(f"{name}: a model-merger record without its {MODEL_LINK_CHECK} check")
    return problems


def _gaps(present: list[int]) -> list[str]:
    """The missing sequence numbers below the newest, as ranges: O(records present), whatever the numbers."""
    problems, expected = [], 1
    for seq in present:
        if seq > expected:
            if seq == expected + 1:
                problems.append(f"{record_name(expected)}: missing (record removed?); the chain is broken here")
            else:
                problems.append(f"{record_name(expected)} to {record_name(seq - 1)}: {seq - expected} records missing "
                                "(removed, or a record misnamed?); the chain is broken here")
        expected = seq + 1
    return problems


def _stray_problems(evdir: Path, records: dict[int, Path]) -> list[str]:
    known = {p.name for p in records.values()}
    problems = []
    for name in sorted(os.listdir(evdir)):
        if name in known or name in (HEAD_NAME, LOCK_NAME) or TEMP.fullmatch(name):
            continue  # a writer's temp file is inert: left only by a crash between write and link
        why = "record name not in NNNNNN.json form" if RECORD.fullmatch(name) else "unexpected file"
        problems.append(f"{name}: {why}")
    return problems


@dataclass
class EvidenceReport:
    problems: list[str] = field(default_factory=list)
    # What holds but proves less than it may seem to (unsigned records, untrusted keys).
    warnings: list[str] = field(default_factory=list)
    # HEAD's (sequence, digest) when HEAD is readable and names a record that is there.
    head: tuple[int, str] | None = None
    records: int = 0
    # One line per record that links to the record of the checkpoint its run resumed from.
    lineage: list[str] = field(default_factory=list)
    # Links that could not be checked (the linked bundle gone, or no record to link): said, and
    # failures under `--require-lineage`.
    unlinked: list[str] = field(default_factory=list)


def verify_evidence(bundle_path: Path, bundle_digest: str | None = None) -> list[str]:
    """Problems with `bundle_path/evidence` (empty: all hold; no evidence dir: empty).

    `bundle_digest`, when given, must be the digest every record names.
    """
    return check_evidence(bundle_path, bundle_digest).problems


def check_evidence(bundle_path: Path, bundle_digest: str | None = None, *, trust=None, anchors=(),
                   rehash: bool = False) -> EvidenceReport:
    """`verify_evidence` with signatures judged against `trust` (a list of
    `sign.TrustedKey`, or None: no key trusted) and the chain held to each of
    `anchors` (`anchor.Claim`). `rehash`: the lineage notes say the linked
    checkpoints are re-hashed too (`rehash_evidence` does it)."""
    from tutorrl.evidence.anchor import check_anchor

    report = EvidenceReport()
    evdir = Path(bundle_path) / EVIDENCE_DIR
    if not os.path.lexists(evdir):
        for claim in anchors:
            report.problems.extend(check_anchor(claim, bundle_digest=bundle_digest, evidence_present=False,
                                                digests={}, head=None))
        return report
    problem = directory_problem(evdir)
    if problem:
        report.problems.append(problem)
        return report
    report.problems.extend(_chain_problems(evdir, bundle_path, bundle_digest, report, trust, anchors, rehash))
    return report


def _chain_problems(evdir: Path, bundle_path: Path, bundle_digest: str | None, report: EvidenceReport,
                    trust=None, anchors=(), rehash: bool = False) -> list[str]:
    if bundle_digest is None:
        try:
            from tutorrl.evidence.bundle import load_bundle

            bundle_digest = load_bundle(Path(bundle_path)).digest
        except Exception as exc:  # the bundle's own check reports this better; note and go on
            return [f"cannot read the bundle's digest to check records against: {exc}"]
    for _ in range(2):
        try:
            with chain_lock(evdir, exclusive=False) as locked:
                try:
                    head = read_head(evdir)
                except ReadError as exc:
                    head = exc
                files = record_files(evdir)
                problems = _stray_problems(evdir, files)
        except (ChainError, OSError) as exc:
            return [f"{evdir}: cannot take a consistent look: {exc}"]
        # No lock file when we looked: no writer had started. A first writer
        # creates it before writing anything, so if it exists now one may
        # have published between our HEAD and our listing: look again, locked.
        if locked or not os.path.lexists(evdir / LOCK_NAME):
            break
    present = sorted(files)
    problems.extend(_gaps(present))
    digests: dict[int, str] = {}
    decoded: list[tuple[str, Record]] = []
    for seq in present:
        name = record_name(seq)
        try:
            data = read_record(files[seq])
        except FileNotFoundError:
            problems.append(f"{name}: removed while being verified")
            continue
        except ReadError as exc:
            problems.append(f"{exc}")
            continue
        digests[seq] = digest(data)
        try:
            r = decode_record(data)
        except RecordFormatError as exc:
            problems.append(f"{name}: malformed: {exc}")
            continue
        decoded.append((name, r))
        s = r.statement
        link = s.predicate.chain
        if link.sequence != seq:
            problems.append(f"{name}: says it is record {link.sequence} (reordered or renamed?)")
        if seq == 1 and link.previous is not None:
            problems.append(f"{name}: first record names a predecessor (earlier records removed?)")
        elif seq > 1 and (seq - 1) in digests and link.previous != digests[seq - 1]:
            problems.append(f"{name}: names a predecessor digest that is not {record_name(seq - 1)}'s (edited or reordered?)")
        try:
            problems.extend(_record_problems(name, s, bundle_digest))
        except ValueError as exc:  # a value the schema admits but the checks cannot use
            problems.append(f"{name}: inconsistent: {exc}")
        if s.predicate.lineage is not None:
            from tutorrl.evidence.lineage import verify_link

            how = "merged from" if s.predicate.model is not None else "resumed from"
            wrong, said, unlinked = verify_link(name, s.predicate.lineage, Path(bundle_path), rehash=rehash, how=how)
            problems.extend(wrong)
            report.lineage.extend(said)
            report.unlinked.extend(unlinked)
    problems.extend(_head_problems(head, max(present, default=0), digests))
    problems.extend(_authenticity(decoded, digests, head, bundle_digest, report, trust, anchors))
    return problems


def _authenticity(decoded, digests, head_bytes, bundle_digest, report, trust, anchors) -> list[str]:
    """Signatures (`sign.judge_signatures`) and anchors (`anchor.check_anchor`); fills `report`'s warnings and head."""
    from tutorrl.evidence.anchor import check_anchor
    from tutorrl.evidence.sign import judge_signatures

    problems, warnings = judge_signatures(decoded, trust)
    report.warnings.extend(warnings)
    report.records = len(decoded)
    head_seq = None
    if isinstance(head_bytes, bytes):
        try:
            h = decode_head(head_bytes)
        except RecordFormatError:
            h = None
        if h is not None:
            head_seq = h.sequence
            if digests.get(h.sequence) == h.digest:
                report.head = (h.sequence, h.digest)
    for claim in anchors:
        problems.extend(check_anchor(claim, bundle_digest=bundle_digest, evidence_present=True, digests=digests,
                                     head=head_seq))
    return problems


def _head_problems(head_bytes: bytes | ReadError | None, last: int, digests: dict[int, str]) -> list[str]:
    if isinstance(head_bytes, ReadError):
        return [str(head_bytes)]
    if head_bytes is None:
        return [f"{HEAD_NAME}: missing while {last} record(s) exist"] if last else []
    try:
        head = decode_head(head_bytes)
    except RecordFormatError as exc:
        return [f"{HEAD_NAME}: malformed: {exc}"]
    if head.sequence > last:
        return [f"{HEAD_NAME}: names record {head.sequence} but the newest is {last} (records removed?)"]
    if head.sequence < 1 or digests.get(head.sequence) != head.digest:
        return [f"{HEAD_NAME}: digest of {record_name(head.sequence)} does not match (edited?)"]
    # Records after HEAD can only come from a writer that crashed between
    # publishing its record and advancing HEAD; they still have to chain.
    return []


class Rehash(msgspec.Struct):
    """What `tutorrl verify --rehash` found: files that no longer match, checkpoints gone, checkpoints that hold."""

    mismatches: list[str]
    not_on_disk: list[str]
    matched: list[str]


def rehash_evidence(bundle_path: Path, *, jobs: int | None = None, stream: TextIO | None = None) -> Rehash:
    """Hash again every file of every recorded checkpoint still on disk and compare with its record.

    Every file of every checkpoint is one job in one pool (largest first), so
    many small checkpoints and one huge one both use every thread. Each file
    that changed, disappeared or appeared since it was recorded is named; a
    record whose `global_step_N` folder is gone is listed apart (retention
    deletes old checkpoints, so that is not itself a mismatch). A file named
    by several records is hashed once.
    """
    from tutorrl.evidence.hashing import Job, Progress, default_workers, hash_jobs, list_files
    from tutorrl.evidence.record import read_records

    stream = stream or sys.stderr
    out = Rehash(mismatches=[], not_on_disk=[], matched=[])
    # Per record on disk: its label, folder, files to compare (rel, recorded digest, path), problems found already.
    wanted: list[tuple[str, Path, list[tuple[str, str, Path]], int]] = []
    to_hash: dict[Path, int] = {}
    from tutorrl.evidence.lineage import linked_checkpoint
    from tutorrl.evidence.paths import recorded_root

    # Each record's own checkpoint, then the checkpoint each resumed run started from (as its
    # linked record gives it): "link checked" vouches for those files too only once they are hashed.
    checkpoints = []
    records = read_records(Path(bundle_path))
    for path, s in records:
        if s is None:
            continue  # malformed: verify_evidence names it
        ck = s.predicate.checkpoint
        what = f"model of step {ck.step}" if s.predicate.model is not None else f"step {ck.step}"
        checkpoints.append((f"{path.name} ({what})", Path(bundle_path), ck))
    for path, s in records:
        lineage = s.predicate.lineage if s is not None else None
        hit = linked_checkpoint(Path(bundle_path), lineage) if lineage is not None else None
        if hit is not None:
            ck = hit[1].predicate.checkpoint
            checkpoints.append((f"lineage of {path.name}: {lineage.record} of bundle {lineage.bundle[:19]} "
                                f"(step {ck.step})", hit[0], ck))
    for label, base, ck in checkpoints:
        folder = recorded_root(ck.root, base) / ck.directory
        if not folder.is_dir():
            out.not_on_disk.append(f"{label}: {folder} is no longer on disk")
            continue
        recorded = {r.name: r for r in ck.files.resources}
        present, odd = list_files(folder)
        now = {rel: (p, size) for rel, p, size in present}
        problems = [f"{label}: {folder / rel}: missing (recorded, now gone)" for rel in sorted(set(recorded) - set(now))]
        problems += [f"{label}: {folder / rel}: not in the record (added since)" for rel in sorted(set(now) - set(recorded))]
        problems += [f"{label}: {folder}/{name}: not a regular file now" for name in odd]
        compare = []
        for rel in sorted(set(recorded) & set(now)):
            p, size = now[rel]
            if size != recorded[rel].size:
                problems.append(f"{label}: {p}: {size} bytes, recorded {recorded[rel].size}")
            else:
                compare.append((rel, recorded[rel].digest, p))
                to_hash[p] = size
        out.mismatches.extend(problems)
        wanted.append((label, folder, compare, len(problems)))
    total = sum(to_hash.values())
    print(f"rehash: {len(wanted)} recorded checkpoint(s) on disk, {len(to_hash)} file(s), "
          f"{total / 1024**3:.2f} GiB; {len(out.not_on_disk)} no longer on disk", file=stream, flush=True)
    errors: dict[str, OSError] = {}
    bar = Progress(total, label="rehash", stream=stream)
    try:
        digests = hash_jobs([Job(p, ((str(p), 0, size),)) for p, size in to_hash.items()],
                            workers=jobs or default_workers(), progress=bar, errors=errors)
    finally:
        bar.close()
    for label, folder, compare, bad in wanted:
        for _rel, recorded, p in compare:
            key = str(p)
            if key in errors:
                out.mismatches.append(f"{label}: {p}: unreadable now ({errors[key]})")
                bad += 1
            elif digests.get(key) != recorded:
                out.mismatches.append(f"{label}: {p}: content changed (sha256 {digests.get(key, '?')[:16]}..., "
                                      f"recorded {recorded[:16]}...)")
                bad += 1
        if not bad:
            out.matched.append(f"{label}: {folder}: all {len(compare)} file(s) match")
        print(f"rehash: {label}: " + (f"{bad} file(s) do not match" if bad else "matches"), file=stream, flush=True)
    return out
