import hashlib
import io
import os

import pytest

from tutorrl.evidence.hashing import Job, Progress, build_manifest, hash_jobs, list_files, manifest_root


def _tree(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    sizes = {"a/b/big.bin": 20 * 1024 * 1024 + 3, "a/small.txt": 5, "z.bin": 0, "m.bin": 9 * 1024 * 1024}
    for rel, n in sizes.items():
        (tmp_path / rel).write_bytes(os.urandom(n))
    return sizes


@pytest.mark.parametrize("workers", [1, 4])
def test_manifest_equals_hashlib(tmp_path, workers):
    _tree(tmp_path)
    files, links = list_files(tmp_path)
    assert links == [] and [f[0] for f in files] == sorted(f[0] for f in files)
    digests = hash_jobs([Job(p, ((rel, 0, n),)) for rel, p, n in files], workers=workers)
    m = build_manifest(files, digests)
    for r in m.resources:
        assert r.digest == hashlib.sha256((tmp_path / r.name).read_bytes()).hexdigest()
    raw = b"".join(bytes.fromhex(r.digest) for r in m.resources)
    assert m.root == "sha256:" + hashlib.sha256(raw).hexdigest() == manifest_root(list(reversed(m.resources)))


def test_ranges_and_progress(tmp_path):
    data = os.urandom(3 * 1024 * 1024)
    (tmp_path / "f").write_bytes(data)
    out = io.StringIO()
    bar = Progress(len(data), stream=out, enabled=True)
    got = hash_jobs([Job(tmp_path / "f", (("x", 10, 2_000_000), ("y", 2_000_000, len(data))))], progress=bar)
    assert got == {"x": hashlib.sha256(data[10:2_000_000]).hexdigest(), "y": hashlib.sha256(data[2_000_000:]).hexdigest()}
    assert "GiB" in out.getvalue()
    assert not Progress(1, stream=io.StringIO()).enabled  # not a TTY: no bar


def test_symlinks_are_reported_not_followed(tmp_path):
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    files, links = list_files(tmp_path)
    assert [f[0] for f in files] == ["real"] and links == ["link"]


def test_root_matches_openssf_model_signing(tmp_path):
    from model_signing import hashing as ms_hashing

    _tree(tmp_path)
    files, _ = list_files(tmp_path)
    m = build_manifest(files, hash_jobs([Job(p, ((rel, 0, n),)) for rel, p, n in files]))
    manifest = ms_hashing.Config().use_file_serialization(hashing_algorithm="sha256").hash(tmp_path)
    theirs = {str(d.identifier): d.digest.digest_hex for d in manifest.resource_descriptors()}
    assert theirs == {r.name: r.digest for r in m.resources}


def test_a_name_that_is_not_utf8_is_reported_not_hashed(tmp_path):
    """A record is JSON text: such a name cannot be written into it, so it is named (escaped) as uncovered."""
    (tmp_path / "ok.bin").write_bytes(b"x")
    with open(os.path.join(os.fsencode(tmp_path), b"w\xff.bin"), "wb") as fh:
        fh.write(b"y")
    files, links = list_files(tmp_path)
    assert [f[0] for f in files] == ["ok.bin"] and links == ["w\\xff.bin (name not UTF-8)"]
    assert all(s.encode("utf-8") for s in links)  # every entry can go into the record


class _PriorityProbe(Progress):
    """A progress counter that notes the nice value of each thread that reports bytes."""

    def __init__(self, total):
        super().__init__(total, enabled=False)
        self.seen = {}

    def add(self, n):
        import threading

        tid = threading.get_native_id()
        self.seen[tid] = os.getpriority(os.PRIO_PROCESS, tid)
        super().add(n)


@pytest.mark.parametrize("workers", [1, 4])
def test_background_hashing_lowers_its_own_threads_only(tmp_path, workers):
    """On Linux (a nice value per thread; the suite runs there): the pool's threads yield, the caller does not."""
    import threading

    from tutorrl.evidence import hashing

    sizes = _tree(tmp_path)
    files, _ = list_files(tmp_path)
    jobs = [Job(p, ((rel, 0, n),)) for rel, p, n in files]
    me = threading.get_native_id()
    mine = os.getpriority(os.PRIO_PROCESS, me)
    probe = _PriorityProbe(sum(sizes.values()))
    assert hash_jobs(jobs, workers=workers, background=True, progress=probe) == hash_jobs(jobs, workers=workers)
    assert probe.seen and me not in probe.seen  # hashed in pool threads, even with one worker
    assert set(probe.seen.values()) == {max(mine, hashing.BACKGROUND_NICE)}
    assert os.getpriority(os.PRIO_PROCESS, me) == mine  # the caller (the trainer's thread) keeps its own
