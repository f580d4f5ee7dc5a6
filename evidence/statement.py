"""Canonical bytes of evidence records.

One encoding, so that a record's digest is a function of its content: keys
sorted at every level, no insignificant whitespace, UTF-8, one trailing
newline. Decoding insists the bytes are exactly that encoding, so any edit --
even one that keeps the JSON valid and the meaning equal -- is caught.
"""

from __future__ import annotations

import hashlib
from typing import TypeVar

import msgspec

from tutorrl.evidence.schema import Head, Statement

T = TypeVar("T")


class RecordFormatError(ValueError):
    pass


def canonical(obj: object) -> bytes:
    return msgspec.json.encode(obj, order="sorted") + b"\n"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


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
