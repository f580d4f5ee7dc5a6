"""Anchors: the chain head at one moment, kept by the user outside the bundle.

Everything inside a bundle's `evidence/` can be rewritten by whoever can
write the folder: a signature proves who wrote each record that is there,
never that nothing was taken away. An anchor -- the sequence number and digest
of the chain head, for one bundle -- committed or published elsewhere, is
what catches a rewind of HEAD, a truncated chain, a deleted `evidence/` and a
rewrite relinked from the first record: `tutorrl verify --anchor` requires
the record at that sequence to still have that digest, HEAD to be at or past
it, and the chain up to it to link.

Spellings: the file `tutorrl evidence anchor --out` writes (canonical JSON of
`schema.Anchor`), or `N:sha256:HEX` (sequence and digest) on the command line,
or a bare `sha256:HEX` (whichever record has that digest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import msgspec

from tutorrl._read import ReadError, read_file
from tutorrl.errors import AnchorError  # its home; importable from here too
from tutorrl.evidence.chain import record_name
from tutorrl.evidence.schema import Anchor

MAX_ANCHOR = 4096
_SPELLED = re.compile(r"(?:([1-9][0-9]{0,17}):)?(sha256:[0-9a-f]{64})")


@dataclass(frozen=True, slots=True)
class Claim:
    """What an anchor says; `sequence` and `bundle` are None when the spelling does not give them."""

    digest: str
    sequence: int | None
    bundle: str | None
    source: str


def spell(anchor: Anchor) -> str:
    return f"{anchor.sequence}:{anchor.digest}"


def parse_anchor(arg: str) -> Claim:
    """`arg` as an anchor: `N:sha256:HEX`, `sha256:HEX`, or the path of an anchor file."""
    m = _SPELLED.fullmatch(arg.strip())
    if m:
        return Claim(digest=m.group(2), sequence=int(m.group(1)) if m.group(1) else None, bundle=None, source=arg)
    try:
        data = read_file(arg, MAX_ANCHOR, name=f"--anchor {arg}", follow=True)
    except FileNotFoundError:
        raise AnchorError(f"--anchor {arg}: neither an anchor (N:sha256:HEX) nor an existing file") from None
    except ReadError as exc:
        raise AnchorError(str(exc)) from None
    try:
        # The user's own file: any JSON layout is accepted, the fields are not.
        a = msgspec.json.decode(data, type=Anchor, strict=True)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise AnchorError(f"--anchor {arg}: not an anchor file ({exc})") from None
    return Claim(digest=a.digest, sequence=a.sequence, bundle=a.bundle, source=arg)


def check_anchor(claim: Claim, *, bundle_digest: str | None, evidence_present: bool, digests: dict[int, str],
                 head: int | None) -> list[str]:
    """Why the chain no longer holds what `claim` anchored (empty: it does).

    `digests` is every readable record's digest by sequence; `head` HEAD's
    sequence when HEAD is readable. The links up to the anchored record are
    `verify`'s own check; this adds only what an anchor knows.
    """
    where = f"anchor {claim.source}"
    if claim.bundle is not None and bundle_digest is not None and claim.bundle != bundle_digest:
        return [f"{where}: anchors bundle {claim.bundle}, not this one ({bundle_digest})"]
    seq = claim.sequence
    if not evidence_present:
        at = record_name(seq) if seq else "a record"
        return [f"{where}: names {at}, but evidence/ is missing (deleted?)"]
    if seq is None:
        found = [s for s, d in digests.items() if d == claim.digest]
        if not found:
            return [f"{where}: no record has digest {claim.digest} (rewritten, truncated or rewound?)"]
        seq = found[0]
    name = record_name(seq)
    if seq not in digests:
        return [f"{where}: {name} is missing or unreadable (truncated, or the chain rewound?)"]
    if digests[seq] != claim.digest:
        return [f"{where}: {name} is not the anchored record: its digest is {digests[seq]}, the anchor says "
                f"{claim.digest} (rewritten?)"]
    if head is not None and head < seq:
        return [f"{where}: HEAD names {record_name(head)}, before the anchored {name} (HEAD rewound?)"]
    return []


def anchor_of(bundle_digest: str, head_sequence: int, head_digest: str) -> Anchor:
    return Anchor(bundle=bundle_digest, sequence=head_sequence, digest=head_digest)


def write_anchor(path: Path, anchor: Anchor, bundle_path: Path) -> None:
    from tutorrl._files import replace_atomic
    from tutorrl._read import inside
    from tutorrl.evidence.statement import canonical

    if inside(Path(path).parent, bundle_path):
        raise AnchorError(f"--out {path}: inside the bundle; an anchor kept beside the evidence it vouches for "
                          "can be rewritten with it (commit or publish it elsewhere)")
    try:
        replace_atomic(Path(path), canonical(anchor))
    except OSError as exc:
        raise AnchorError(f"--out {path}: cannot write ({exc.strerror})") from None
