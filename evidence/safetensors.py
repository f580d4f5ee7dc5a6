"""Reading a safetensors file's raw header: tensor names, dtypes and byte ranges.

Parsed by hand (8-byte little-endian length, JSON, offsets relative to the end of
the header) because the `safetensors` numpy loader rejects BF16 -- the dtype most
LLM exports use -- and torch is too heavy for `tutorrl evidence`.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

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
    with open(path, "rb") as f:
        prefix = f.read(8)
        size = f.seek(0, 2)
        if len(prefix) < 8:
            raise SafetensorsError(f"{path.name}: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", prefix)
        if n > MAX_HEADER or 8 + n > size:
            raise SafetensorsError(f"{path.name}: header length {n} exceeds the file ({size} bytes)")
        f.seek(8)
        raw = f.read(n)
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SafetensorsError(f"{path.name}: header is not JSON: {exc}") from None
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
    if not isinstance(info, dict):
        raise SafetensorsError(f"{fname}: tensor {name!r}: entry is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str):
        raise SafetensorsError(f"{fname}: tensor {name!r}: dtype missing")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise SafetensorsError(f"{fname}: tensor {name!r}: bad shape {shape!r}")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(o) is int for o in offsets)
        and 0 <= offsets[0] <= offsets[1] <= data_len
    ):
        raise SafetensorsError(f"{fname}: tensor {name!r}: data_offsets {offsets!r} outside the data")
    itemsize = ITEMSIZE.get(dtype)
    if itemsize is not None and math.prod(shape) * itemsize != offsets[1] - offsets[0]:
        raise SafetensorsError(
            f"{fname}: tensor {name!r}: {dtype}{shape} needs {math.prod(shape) * itemsize} bytes,"
            f" offsets give {offsets[1] - offsets[0]}"
        )
    return TensorEntry(name, dtype, tuple(shape), data_start + offsets[0], data_start + offsets[1])


def _check_layout(fname: str, entries: list[TensorEntry], data_len: int, data_start: int) -> None:
    # The format requires tensors to tile the data buffer exactly; a hole or
    # overlap means bytes nobody's digest covers, or two names for one byte.
    pos = data_start
    for e in sorted(entries, key=lambda e: (e.start, e.end)):
        if e.start != pos:
            raise SafetensorsError(f"{fname}: tensor {e.name!r} starts at {e.start - data_start}, expected {pos - data_start}")
        pos = e.end
    if pos != data_start + data_len:
        raise SafetensorsError(f"{fname}: {data_start + data_len - pos} trailing bytes belong to no tensor")
