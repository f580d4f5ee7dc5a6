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


def _not_regular_outputs(tmp_path):
    """An output path that exists and is not a regular file, one of each kind a user can make."""
    import socket

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = tmp_path / "target.txt"
    target.write_text("kept\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    sock = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock))
    server.close()
    return {"a FIFO": fifo, "a symbolic link": link, "a symbolic link ": dangling, "a socket": sock}


def _unchanged(path):
    import stat

    mode = os.lstat(path).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISLNK(mode) or stat.S_ISSOCK(mode)


def test_replace_atomic_replaces_only_a_regular_file(tmp_path):
    from tutorrl._files import replace_atomic

    for kind, path in _not_regular_outputs(tmp_path).items():
        with pytest.raises(OSError) as caught:
            replace_atomic(path, b"new\n")
        assert f"it exists and is {kind.strip()}, not a regular file" in caught.value.strerror
        assert _unchanged(path), kind
    assert (tmp_path / "target.txt").read_text() == "kept\n"
    assert not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "fifo", "link", "sock", "target.txt"]
    plain = tmp_path / "target.txt"
    replace_atomic(plain, b"new\n")
    assert plain.read_text() == "new\n"


def test_export_refuses_an_output_that_is_not_a_regular_file(tmp_path):
    # `import -o` and `evidence anchor --out` write through the same replace_atomic
    # (tests/evidence/test_signing.py runs the anchor's case).
    import support

    bundle = sorted(p for p in support.BUNDLES.iterdir() if (p / "manifest.json").is_file())[0]
    for kind, path in _not_regular_outputs(tmp_path).items():
        result = support.cli("export", str(bundle), "--to", "slurm", "-o", str(path))
        assert result.returncode == 2, result.stderr
        assert f"it exists and is {kind.strip()}, not a regular file" in result.stderr
        assert "Traceback" not in result.stderr
        assert _unchanged(path), kind
    assert (tmp_path / "target.txt").read_text() == "kept\n"
