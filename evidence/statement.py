"""Canonical bytes of evidence records.

One encoding, so that a record's digest is a function of its content: keys
sorted at every level, no insignificant whitespace, UTF-8, one trailing
newline. Decoding insists the bytes are exactly that encoding, so any edit --
even one that keeps the JSON valid and the meaning equal -- is caught.

A record file is a DSSE envelope (payloadType `application/vnd.in-toto+json`)
whose payload is the statement's canonical bytes, base64-encoded; its
signatures (none when no key was found) cover DSSE's PAE of those bytes.
Records written before records were enveloped are the bare statement; they
are still read, as unsigned.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from tutorrl.evidence.schema import DSSE_PAYLOAD_TYPE, Envelope, Head, Signature, Statement

T = TypeVar("T")


class RecordFormatError(ValueError):
    pass


def canonical(obj: object) -> bytes:
    return msgspec.json.encode(obj, order="sorted") + b"\n"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE v1's pre-authentication encoding: what a signature is over."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def _decode(data: bytes, typ: type[T]) -> T:
    try:
        obj = msgspec.json.decode(data, type=typ, strict=True)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # bad UTF-8 surfaces as the latter
        raise RecordFormatError(str(exc)) from None
    except RecursionError:  # the schema is shallow; msgspec recurses only while skipping garbage
        raise RecordFormatError("nested too deeply to be a record") from None
    if canonical(obj) != data:
        raise RecordFormatError("not in canonical form (edited after it was written?)")
    return obj


def decode_statement(data: bytes) -> Statement:
    return _decode(data, Statement)


def decode_head(data: bytes) -> Head:
    return _decode(data, Head)


@dataclass(frozen=True, slots=True)
class Record:
    statement: Statement
    # The bytes the signatures cover (inside PAE): the statement's canonical encoding.
    payload: bytes
    signatures: tuple[Signature, ...]
    # False for a bare statement, written before records were enveloped.
    enveloped: bool


def encode_record(statement: Statement, signers=()) -> bytes:
    """The record file's bytes: `statement` enveloped, signed by each of `signers`
    (objects with `sign(pae_bytes) -> Signature`, see `evidence/sign.py`)."""
    body = canonical(statement)
    to_sign = pae(DSSE_PAYLOAD_TYPE, body)
    return canonical(Envelope(payload=base64.b64encode(body).decode("ascii"),
                              signatures=[s.sign(to_sign) for s in signers]))


def decode_record(data: bytes) -> Record:
    """A record file, enveloped or bare; RecordFormatError when it is neither, exactly."""
    # Canonical JSON sorts keys: an envelope starts with "payload", a statement with "_type".
    if not data.startswith(b'{"payload"'):
        s = decode_statement(data)
        return Record(statement=s, payload=data, signatures=(), enveloped=False)
    env = _decode(data, Envelope)
    body = _b64("payload", env.payload)
    for n, sig in enumerate(env.signatures, 1):
        # Padding bits a decoder ignores would let two files carry one signature.
        _b64(f"signature {n}: publicKey", sig.publicKey)
        _b64(f"signature {n}: sig", sig.sig)
    try:
        s = decode_statement(body)
    except RecordFormatError as exc:
        raise RecordFormatError(f"payload: {exc}") from None
    return Record(statement=s, payload=body, signatures=tuple(env.signatures), enveloped=True)


def _b64(what: str, text: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise RecordFormatError(f"{what} is not base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise RecordFormatError(f"{what} is not in canonical base64")
    return raw


def is_signed(data: bytes) -> bool:
    """Whether a record file carries a signature, without decoding it (a record
    can be tens of MB and a writer asks on every append). Canonical JSON puts
    `signatures` last, so an unsigned envelope ends with an empty list; a bare
    statement is never signed. Nothing is checked: that is `verify`'s job."""
    return data.startswith(b'{"payload"') and not data.endswith(b',"signatures":[]}\n')
