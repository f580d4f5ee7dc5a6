"""The shared durable-write primitives, and the compile path's sha256."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorrl._files import display_path, fsync_dir, write_new


def test_write_new_refuses_existing_writes_all_and_fixes_the_mode(tmp_path):
    path = tmp_path / "f"
    data = os.urandom(3 * 1024 * 1024)
    old = os.umask(0o077)
    try:
        write_new(path, data, 0o755)
    finally:
        os.umask(old)
    assert path.read_bytes() == data and path.stat().st_mode & 0o777 == 0o755
    with pytest.raises(FileExistsError):
        write_new(path, b"other")
    assert path.read_bytes() == data
    fsync_dir(tmp_path)


def test_display_path(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path)
    assert display_path(tmp_path / "a") == "a"
    assert display_path("/") == "/"


@settings(max_examples=200)
@given(st.binary(max_size=4096))
def test_compile_path_sha256_is_hashlibs(data):
    import hashlib

    from tutorrl import _sha256

    assert _sha256.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
