import struct

import numpy as np
import pytest

from evidence_helpers import model_tensors, write_safetensors
from tutorrl.evidence.safetensors import SafetensorsError, read_header


def test_reads_bf16_and_offsets(tmp_path):
    p = tmp_path / "m.safetensors"
    write_safetensors(p, model_tensors(3))
    h = read_header(p)
    assert [t.name for t in h.tensors] == sorted(model_tensors(3))
    raw = p.read_bytes()
    for t in h.tensors:
        assert raw[t.start:t.end] == model_tensors(3)[t.name][1]
    assert {t.dtype for t in h.tensors} == {"BF16", "F32"}


def test_agrees_with_the_safetensors_library(tmp_path):
    import safetensors.numpy as st

    p = tmp_path / "lib.safetensors"
    arrays = {"a": np.arange(7, dtype=np.float16), "b": np.ones((2, 3), dtype=np.int64), "z": np.zeros((0, 4), np.float32)}
    st.save_file(arrays, str(p))
    raw = p.read_bytes()
    h = read_header(p)
    for t in h.tensors:
        assert raw[t.start:t.end] == arrays[t.name].tobytes()
        assert list(t.shape) == list(arrays[t.name].shape)


@pytest.mark.parametrize("mutate,match", [
    (lambda b: b[:5], "shorter than"),
    (lambda b: struct.pack("<Q", 10**9) + b[8:], "exceeds"),
    (lambda b: b[:-1], "outside the data|needs"),
    (lambda b: b + b"\0\0", "trailing bytes"),
    (lambda b: b[:8] + b"[" + b[9:], "not JSON|not a JSON object"),
])
def test_rejects_malformed(tmp_path, mutate, match):
    p = tmp_path / "m.safetensors"
    write_safetensors(p, model_tensors(1))
    p.write_bytes(mutate(p.read_bytes()))
    with pytest.raises(SafetensorsError, match=match):
        read_header(p)


def test_rejects_size_mismatch_and_holes(tmp_path):
    p = tmp_path / "m.safetensors"
    write_safetensors(p, {"a": ("F32", bytes(8), [3])})
    with pytest.raises(SafetensorsError, match="needs 12 bytes"):
        read_header(p)
    write_safetensors(p, {"a": ("U8", bytes(4), [4]), "b": ("U8", bytes(4), [4])})
    raw = bytearray(p.read_bytes())
    p.write_bytes(bytes(raw).replace(b'"data_offsets": [4, 8]', b'"data_offsets": [0, 4]'))
    with pytest.raises(SafetensorsError, match="starts at"):
        read_header(p)
