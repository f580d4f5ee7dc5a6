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


def test_hydras_record_of_the_run_goes_under_the_run_folder_without_changing_the_bundle(tmp_path):
    """launch.sh passes its arguments to verl first: the run's folder reaches Hydra as an
    argument, so the job leaves no outputs/ where it starts and the bundle's bytes stay."""
    def entrypoint(where, **kw):
        return build_submission(JOB, bundle_path=tmp_path, cwd=tmp_path, submission_id="tutorrl-x-1",
                                passthrough={}, hydra_dir=where, **{"upload": False, "dry_run": False, **kw}
                                ).kwargs["entrypoint"]

    run_dir = tmp_path / "runs" / "tutorrl-x-1" / "hydra"
    assert entrypoint(run_dir).endswith(f"launch.sh hydra.run.dir={run_dir}")
    assert "hydra.run.dir" not in entrypoint(run_dir, dry_run=True)  # --cfg writes no outputs/
    assert "hydra.run.dir" not in entrypoint(run_dir, upload=True)  # the job's cwd is Ray's copy of the bundle
    # A path Hydra would read as grammar (a quote, an interpolation) is not passed.
    assert "hydra.run.dir" not in entrypoint(tmp_path / "it's ${here}")
