import multiprocessing
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_helpers import digest_of, make_bundle, make_fsdp_step
from tutorrl.evidence.bundle import load_bundle
from tutorrl.evidence.chain import record_files
from tutorrl.evidence.record import read_records, record_checkpoint
from tutorrl.evidence.verify import verify_evidence

WRITERS, PER_WRITER = 4, 5


def _writer(bundle_dir, step_dir, tag, barrier):
    barrier.wait()
    for i in range(PER_WRITER):
        record_checkpoint(load_bundle(bundle_dir), f"{tag}-{i}", step_dir, source="manual", finished=None,
                          workers=1, progress=False)


def test_concurrent_processes_lose_nothing(tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    step = make_fsdp_step(tmp_path / "ckpts", 1)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(bundle, step, f"w{n}", barrier)) for n in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    records = read_records(bundle)
    assert len(records) == WRITERS * PER_WRITER
    assert sorted(s.predicate.run.run_id for _, s in records) == sorted(
        f"w{n}-{i}" for n in range(WRITERS) for i in range(PER_WRITER))
    assert [s.predicate.chain.sequence for _, s in records] == list(range(1, WRITERS * PER_WRITER + 1))
    assert verify_evidence(bundle, digest_of(bundle)) == []
    assert not [p for p in (bundle / "evidence").iterdir() if p.name.startswith(".tmp")]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    bundle = make_bundle(root / "bundles")
    digest = digest_of(bundle)
    for step in (1, 2, 3):
        make_fsdp_step(root / "ckpts", step)
        record_checkpoint(load_bundle(bundle), "r", root / "ckpts" / f"global_step_{step}", source="manual",
                          finished=True, progress=False)
    assert verify_evidence(bundle, digest) == []
    files = sorted(record_files(bundle / "evidence").values()) + [bundle / "evidence" / "HEAD"]
    return bundle, digest, files


def _detected_after(bundle, digest, path, new_bytes):
    old = path.read_bytes()
    path.write_bytes(new_bytes)
    try:
        return verify_evidence(bundle, digest)
    finally:
        path.write_bytes(old)


def test_every_sampled_byte_edit_and_truncation_is_detected(corpus):
    bundle, digest, files = corpus
    rng = random.Random(1234)
    for path in files:
        data = path.read_bytes()
        positions = sorted(set(rng.sample(range(len(data)), min(40, len(data))) + [0, len(data) - 1]))
        for pos in positions:
            new = bytes([data[pos] ^ (1 << rng.randrange(8))])
            assert _detected_after(bundle, digest, path, data[:pos] + new + data[pos + 1:]), (path.name, pos)
            assert _detected_after(bundle, digest, path, data[:pos]), (path.name, "truncate", pos)
    assert verify_evidence(bundle, digest) == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_single_byte_edit_is_detected(corpus, data):
    bundle, digest, files = corpus
    path = data.draw(st.sampled_from(files))
    raw = path.read_bytes()
    pos = data.draw(st.integers(0, len(raw) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda v: v != raw[pos]))
    assert _detected_after(bundle, digest, path, raw[:pos] + bytes([value]) + raw[pos + 1:])


def test_removal_of_any_record_or_head_is_detected(corpus, tmp_path):
    bundle, digest, files = corpus
    for path in files:
        copy = tmp_path / path.name
        shutil.copy2(path, copy)
        path.unlink()
        try:
            assert verify_evidence(bundle, digest), path.name
        finally:
            shutil.move(copy, path)
    assert verify_evidence(bundle, digest) == []


def test_reordering_is_detected(corpus):
    bundle, digest, files = corpus
    records = files[:-1]
    for a in range(len(records)):
        for b in range(a + 1, len(records)):
            da, db = records[a].read_bytes(), records[b].read_bytes()
            records[a].write_bytes(db)
            records[b].write_bytes(da)
            try:
                assert verify_evidence(bundle, digest)
            finally:
                records[a].write_bytes(da)
                records[b].write_bytes(db)


def test_foreign_bundle_and_stray_files_are_reported(corpus):
    bundle, digest, _ = corpus
    foreign = "sha256:" + "cd" * 32
    assert foreign != digest
    assert any("recorded for bundle" in p for p in verify_evidence(bundle, foreign))
    stray = bundle / "evidence" / "7.json"
    stray.write_text("{}")
    try:
        assert any("7.json" in p for p in verify_evidence(bundle, digest))
    finally:
        stray.unlink()


def test_no_evidence_dir_is_fine(tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    assert verify_evidence(bundle, digest_of(bundle)) == [] and verify_evidence(bundle) == []
