"""What ``tutorrl evidence`` does by hand: list a bundle's records, record a checkpoint, make a signing key,
anchor the chain's head. Each returns what it found; ``evidence/commands.py`` prints it."""

from __future__ import annotations

from pathlib import Path

import msgspec

from tutorrl.errors import EvidenceInputError  # its home; importable from here too
from tutorrl.evidence.bundle import load_bundle
from tutorrl.evidence.checkpoints import find_step_dirs, read_tracker, step_of
from tutorrl.evidence.record import read_records, record_checkpoint
from tutorrl.evidence.schema import Statement


class Entry(msgspec.Struct, frozen=True):
    """One record of a bundle's chain: its file name, the statement (None: malformed), who says they signed it."""

    name: str
    statement: Statement | None
    signed_by: str = ""


def records_of(bundle: str) -> tuple[str, list[Entry]]:
    """The bundle's folder and its records, oldest first. Records are only as good as the bundle they
    name: a tampered bundle is refused before any of its records is read."""
    path = load_bundle(Path(bundle)).path
    return str(path), [Entry(p.name, s, _signed_by(p) if s is not None else "") for p, s in read_records(path)]


def _signed_by(path: Path) -> str:
    """Who says they signed the record (unchecked here: `tutorrl verify --trust` checks)."""
    from tutorrl._read import ReadError
    from tutorrl.evidence.chain import read_record
    from tutorrl.evidence.statement import RecordFormatError, decode_record

    try:
        sigs = decode_record(read_record(path)).signatures
    except (OSError, ReadError, RecordFormatError):
        return ""
    return "  signed by " + ",".join(s.keyid[:16] for s in sigs) if sigs else "  unsigned"


class KeyMade(msgspec.Struct, frozen=True):
    """A signing key ``tutorrl evidence keygen`` wrote: its file, the public key's, its keyid, and whether it is
    the user's default key (used without ``TUTORRL_SIGNING_KEY``)."""

    key: str
    public: str
    keyid: str
    default: bool


def make_signing_key(key: str | None = None) -> KeyMade:
    """A new signing key at ``key`` (default: the user's default key path), mode 0600, beside its ``.pub``."""
    from tutorrl.evidence.sign import default_key_path, generate_key

    path = Path(key) if key else default_key_path()
    signer = generate_key(path)
    default = key is None or Path(key).absolute() == default_key_path().absolute()
    return KeyMade(str(path), str(path.with_name(path.name + ".pub")), signer.keyid, default)


class Anchored(msgspec.Struct, frozen=True):
    """The chain head ``tutorrl evidence anchor`` vouches for: the anchor's one-line spelling, its canonical JSON,
    the file it was written to (None: none asked for), and what the evidence check warned."""

    text: str
    json: str
    written: str | None
    warnings: list[str]


def anchor_chain(bundle: str, out: str | None = None) -> Anchored:
    """The head of the bundle's evidence chain, once the chain verifies; also written to ``out`` if given."""
    from tutorrl.evidence.anchor import anchor_of, spell, write_anchor
    from tutorrl.evidence.verify import check_evidence
    from tutorrl.evidence.statement import canonical

    loaded = load_bundle(Path(bundle))
    # Anchoring a broken chain would vouch for it: the chain must verify first.
    report = check_evidence(loaded.path, loaded.digest)
    if report.problems:
        raise EvidenceInputError(f"{bundle}: the evidence does not verify, so it is not anchored:\n  "
                                 + "\n  ".join(report.problems))
    if report.head is None:
        raise EvidenceInputError(f"{bundle}: no evidence recorded yet; nothing to anchor")
    a = anchor_of(loaded.digest, *report.head)
    if out:
        write_anchor(Path(out), a, loaded.path)
    return Anchored(spell(a), canonical(a).decode(), out or None, list(report.warnings))


def _pick_step_dir(path: Path) -> Path:
    if not path.is_dir():
        raise EvidenceInputError(f"{path}: not a directory")
    if step_of(path) is not None:
        return path
    steps = find_step_dirs(path)
    if not steps:
        raise EvidenceInputError(f"{path}: neither a global_step_N directory nor a checkpoint root containing one")
    tracker = read_tracker(path)
    by_step = {s.step: s.path for s in steps}
    # The tracker is only a hint; fall back to the newest directory.
    return by_step.get(tracker.step, steps[-1].path) if tracker.step is not None else steps[-1].path


def add_checkpoint(bundle: str, checkpoint: str, *, run_id: str = "manual", engines: list[str] | tuple[str, ...] = (),
        base_model: str | None = None, workers: int | None = None) -> Entry:
    """A checkpoint (a ``global_step_N`` folder, or a root holding some: its tracker's step, else the newest)
    hashed and recorded in the bundle's evidence; the record appended. A record whose checks fail is returned
    (its verdict says so), not raised."""
    from tutorrl.evidence.record import CheckpointError

    for url in engines:
        if not url.startswith(("http://", "https://")):
            raise EvidenceInputError(f"--engine {url!r}: expected an http:// or https:// URL")
    if workers is not None and workers < 1:
        raise EvidenceInputError("--workers must be at least 1")
    base = Path(base_model) if base_model else None
    if base is not None and not base.is_dir():
        raise EvidenceInputError(f"--base-model {base}: not a directory")
    loaded = load_bundle(Path(bundle))
    step_dir = _pick_step_dir(Path(checkpoint))
    try:
        path = record_checkpoint(loaded, run_id, step_dir, source="manual", finished=None,
                                 engines=list(engines), base_model=base, workers=workers)
    except CheckpointError as exc:
        raise EvidenceInputError(str(exc)) from None
    return Entry(path.name, dict(read_records(loaded.path)).get(path))
