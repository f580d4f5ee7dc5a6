"""Reading a safetensors file's raw header: tensor names, dtypes and byte ranges.

Parsed by hand (8-byte little-endian length, JSON, offsets relative to the end of
the header) because the `safetensors` numpy loader rejects BF16 -- the dtype most
LLM exports use -- and torch is too heavy for `tutorrl evidence`.
"""

from __future__ import annotations

import errno
import math
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from tutorrl._read import ReadError, decode_json, file_kind

# Bytes per element; None where elements are not byte-addressable (packed types).
ITEMSIZE: dict[str, int | None] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8, "C64": 8,
    "F4": None, "F6_E2M3": None, "F6_E3M2": None,
}  # fmt: skip

# A header larger than this is not a checkpoint we should trust our RAM to.
MAX_HEADER = 100 * 1024 * 1024
MAX_DIMS = 64


class SafetensorsError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # absolute file offset
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Header:
    tensors: tuple[TensorEntry, ...]  # sorted by name
    data_start: int
    file_size: int


def read_header(path: Path) -> Header:
    # Opened like every untrusted file (tutorrl._read): no symlinks, regular
    # files only, and a FIFO cannot block the open.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "is a symlink; not followed" if exc.errno == errno.ELOOP else f"cannot read ({exc.strerror})"
        raise SafetensorsError(f"{path.name}: {why}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SafetensorsError(f"{path.name}: is {file_kind(st.st_mode)}, not a regular file")
        size = st.st_size
        prefix = f.read(8)
        if len(prefix) < 8:
            raise SafetensorsError(f"{path.name}: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", prefix)
        if n > MAX_HEADER or 8 + n > size:
            raise SafetensorsError(f"{path.name}: header length {n} exceeds the file ({size} bytes) or the "
                                   f"{MAX_HEADER}-byte limit")
        raw = f.read(n)
    if len(raw) != n:
        raise SafetensorsError(f"{path.name}: shrank while its header was read")
    try:
        obj = decode_json(raw, name=f"{path.name} header")
    except ReadError as exc:
        raise SafetensorsError(str(exc)) from None
    if not isinstance(obj, dict):
        raise SafetensorsError(f"{path.name}: header is not a JSON object")
    data_start = 8 + n
    data_len = size - data_start
    entries: list[TensorEntry] = []
    for name, info in obj.items():
        if name == "__metadata__":
            continue
        entries.append(_entry(path.name, name, info, data_start, data_len))
    _check_layout(path.name, entries, data_len, data_start)
    entries.sort(key=lambda e: e.name)
    return Header(tensors=tuple(entries), data_start=data_start, file_size=size)


def _entry(fname: str, name: str, info: object, data_start: int, data_len: int) -> TensorEntry:
    label = name if len(name) <= 200 else name[:200] + "..."  # for messages only
    if not isinstance(info, dict):
        raise SafetensorsError(f"{fname}: tensor {label!r}: entry is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str):
        raise SafetensorsError(f"{fname}: tensor {label!r}: dtype missing")
    if len(dtype) > 40:
        raise SafetensorsError(f"{fname}: tensor {label!r}: dtype {dtype[:40]!r}... is no dtype")
    # The product of a crafted shape with many huge dimensions would take
    # unbounded time to compute; no real tensor has more than a handful.
    if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(type(d) is int and d >= 0 for d in shape)):
        raise SafetensorsError(f"{fname}: tensor {label!r}: bad shape {str(shape)[:200]}")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(o) is int for o in offsets)
        and 0 <= offsets[0] <= offsets[1] <= data_len
    ):
        raise SafetensorsError(f"{fname}: tensor {label!r}: data_offsets {str(offsets)[:200]} outside the data")
    itemsize = ITEMSIZE.get(dtype)
    if itemsize is not None and math.prod(shape) * itemsize != offsets[1] - offsets[0]:
        raise SafetensorsError(
            f"{fname}: tensor {label!r}: {dtype}{shape} needs {math.prod(shape) * itemsize} bytes,"
            f" offsets give {offsets[1] - offsets[0]}"
        )
    return TensorEntry(name, dtype, tuple(shape), data_start + offsets[0], data_start + offsets[1])


def _check_layout(fname: str, entries: list[TensorEntry], data_len: int, data_start: int) -> None:
    # The format requires tensors to tile the data buffer exactly; a hole or
    # overlap means bytes nobody's digest covers, or two names for one byte.
    pos = data_start
    for e in sorted(entries, key=lambda e: (e.start, e.end)):
        if e.start != pos:
            raise SafetensorsError(f"{fname}: tensor {e.name[:200]!r} starts at {e.start - data_start}, expected {pos - data_start}")
        pos = e.end
    if pos != data_start + data_len:
        raise SafetensorsError(f"{fname}: {data_start + data_len - pos} trailing bytes belong to no tensor")
