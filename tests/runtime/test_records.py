import threading

import pytest

from tutorrl.runtime import records


def _record(run_dir, attempt):
    return records.RunRecord(
        schema=1, run_id=run_dir.name, bundle="sha256:" + "0" * 64, submission_id=run_dir.name, attempt=attempt,
        address_kind="embedded", address="http://127.0.0.1:1", dry_run=False,
        versions=records.Versions(tutorrl="0", ray="2.60.0", python="3.11"), started=records.utc_now(),
        status="starting")


def test_concurrent_claims_get_distinct_attempts(tmp_path):
    got, lock = [], threading.Lock()

    def claim():
        attempt, path = records.claim_run_dir(tmp_path, "abcd")
        records.create_record(path, _record(path, attempt))
        with lock:
            got.append(attempt)

    threads = [threading.Thread(target=claim) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 17))
    listed = records.list_records(tmp_path)
    assert [r.attempt for _, r in listed] == list(range(1, 17))


def test_record_is_created_once(tmp_path):
    attempt, path = records.claim_run_dir(tmp_path, "abcd")
    records.create_record(path, _record(path, attempt))
    with pytest.raises(FileExistsError):
        records.create_record(path, _record(path, attempt))
    rec = records.read_record(path)
    rec.status = "succeeded"
    records.update_record(path, rec)
    assert records.read_record(path).status == "succeeded"
    assert sorted(p.name for p in path.iterdir()) == ["run.json"]


def test_next_attempt_follows_the_highest(tmp_path):
    (tmp_path / "runs" / "tutorrl-abcd-7").mkdir(parents=True)
    attempt, path = records.claim_run_dir(tmp_path, "abcd")
    assert attempt == 8 and path.name == "tutorrl-abcd-8"
