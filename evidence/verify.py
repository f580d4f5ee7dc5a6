"""Checking a bundle's evidence directory: every record, every link, and HEAD."""

from __future__ import annotations

from pathlib import Path

from tutorrl.evidence.chain import HEAD_NAME, RECORD, record_files, record_name
from tutorrl.evidence.hashing import manifest_root
from tutorrl.evidence.schema import PREDICATE_TYPE, STATEMENT_TYPE, Statement, overall_status
from tutorrl.evidence.statement import RecordFormatError, decode_head, decode_statement, digest

EVIDENCE_DIR = "evidence"


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
    return problems


def verify_evidence(bundle_path: Path, bundle_digest: str | None = None) -> list[str]:
    """Problems with `bundle_path/evidence` (empty: all hold; no evidence dir: empty).

    `bundle_digest`, when given, must be the digest every record names.
    """
    evdir = Path(bundle_path) / EVIDENCE_DIR
    if not evdir.exists():
        return []
    if not evdir.is_dir():
        return [f"{evdir}: not a directory"]
    if bundle_digest is None:
        try:
            from tutorrl.evidence.bundle import load_bundle

            bundle_digest = load_bundle(Path(bundle_path)).digest
        except Exception as exc:  # the bundle's own check reports this better; note and go on
            return [f"cannot read the bundle's digest to check records against: {exc}"]
    problems: list[str] = []
    files = record_files(evdir)
    for p in sorted(evdir.iterdir()):
        if p.name.startswith(".") or p.name == HEAD_NAME or p.name in {f.name for f in files.values()}:
            continue
        why = "record name not in NNNNNN.json form" if RECORD.fullmatch(p.name) else "unexpected file"
        problems.append(f"{p.name}: {why}")
    last = max(files, default=0)
    previous: str | None = None
    digests: dict[int, str] = {}
    for seq in range(1, last + 1):
        name = record_name(seq)
        if seq not in files:
            problems.append(f"{name}: missing (record removed?); the chain is broken here")
            previous = None
            continue
        data = files[seq].read_bytes()
        digests[seq] = digest(data)
        try:
            s = decode_statement(data)
        except RecordFormatError as exc:
            problems.append(f"{name}: malformed: {exc}")
            previous = digests[seq]
            continue
        link = s.predicate.chain
        if link.sequence != seq:
            problems.append(f"{name}: says it is record {link.sequence} (reordered or renamed?)")
        if seq == 1 and link.previous is not None:
            problems.append(f"{name}: first record names a predecessor (earlier records removed?)")
        elif seq > 1 and (seq - 1) in files and link.previous != previous:
            problems.append(f"{name}: names a predecessor digest that is not {record_name(seq - 1)}'s (edited or reordered?)")
        try:
            problems.extend(_record_problems(name, s, bundle_digest))
        except ValueError as exc:  # a value the schema admits but the checks cannot use
            problems.append(f"{name}: inconsistent: {exc}")
        previous = digests[seq]
    problems.extend(_head_problems(evdir, last, digests))
    return problems


def _head_problems(evdir: Path, last: int, digests: dict[int, str]) -> list[str]:
    head_path = evdir / HEAD_NAME
    if not head_path.exists():
        return [f"{HEAD_NAME}: missing while {last} record(s) exist"] if last else []
    try:
        head = decode_head(head_path.read_bytes())
    except RecordFormatError as exc:
        return [f"{HEAD_NAME}: malformed: {exc}"]
    if head.sequence > last:
        return [f"{HEAD_NAME}: names record {head.sequence} but the newest is {last} (records removed?)"]
    if head.sequence < 1 or digests.get(head.sequence) != head.digest:
        return [f"{HEAD_NAME}: digest of {record_name(head.sequence)} does not match (edited?)"]
    # Records after HEAD can only come from a writer that crashed between
    # publishing its record and advancing HEAD; they still have to chain.
    return []
