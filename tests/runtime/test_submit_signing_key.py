"""The trainer's evidence callback signs with the submitter's key: only the
key's path travels, by name, and only where the job sees this machine's files."""

import json

import pytest

from tutorrl.errors import RefusedError
from tutorrl.runtime.submit import build_submission

JOB = {"entrypoint": "bash launch.sh", "runtime_env": {"env_vars": {"A": "1"}}}


def _env(tmp_path, *, upload: bool, job=JOB):
    sub = build_submission(job, bundle_path=tmp_path, cwd=tmp_path, submission_id="tutorrl-x-1", upload=upload,
                           dry_run=False, passthrough={})
    return sub.kwargs


def test_the_key_path_travels_by_name_never_its_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    key = tmp_path / "key"
    key.write_bytes(b"-----BEGIN PRIVATE KEY-----\nnot-to-be-copied\n")
    monkeypatch.setenv("TUTORRL_EVIDENCE_KEY", str(key))
    local = _env(tmp_path, upload=False)
    assert local["runtime_env"]["env_vars"]["TUTORRL_EVIDENCE_KEY"] == str(key)
    assert "not-to-be-copied" not in json.dumps(local)
    # An uploaded bundle runs on the cluster, where this path means nothing and records are not kept.
    assert "TUTORRL_EVIDENCE_KEY" not in _env(tmp_path, upload=True)["runtime_env"]["env_vars"]


def test_the_default_key_is_named_when_present_and_nothing_when_absent(tmp_path, monkeypatch):
    monkeypatch.delenv("TUTORRL_EVIDENCE_KEY", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert "TUTORRL_EVIDENCE_KEY" not in _env(tmp_path, upload=False)["runtime_env"]["env_vars"]
    default = tmp_path / "cfg" / "tutorrl" / "evidence-signing-key"
    default.parent.mkdir(parents=True)
    default.write_bytes(b"k")
    assert _env(tmp_path, upload=False)["runtime_env"]["env_vars"]["TUTORRL_EVIDENCE_KEY"] == str(default)


def test_a_bundle_cannot_set_the_key_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("TUTORRL_EVIDENCE_KEY", raising=False)
    job = {"entrypoint": "bash launch.sh", "runtime_env": {"env_vars": {"TUTORRL_EVIDENCE_KEY": "/elsewhere"}}}
    with pytest.raises(RefusedError, match="TUTORRL_EVIDENCE_KEY"):
        _env(tmp_path, upload=False, job=job)
