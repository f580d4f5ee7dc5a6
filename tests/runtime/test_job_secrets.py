"""Secret values on the embedded head: a private file and a worker setup hook, never env_vars."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from tutorrl.errors import RefusedError
from tutorrl.runtime import job_secrets, submit

JOB = {"entrypoint": "bash launch.sh", "runtime_env": {"env_vars": {"A": "1"}}}
VALUE = "tok-$HOME-'quoted' \"and\" ${X}"


def test_file_is_private_and_the_entrypoint_loader_passes_values_exactly(tmp_path):
    path = job_secrets.write(tmp_path, {"MY_TOKEN": VALUE})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    env = {k: v for k, v in os.environ.items() if k != "MY_TOKEN"} | {job_secrets.FILE_ENV: str(path)}
    out = subprocess.run([sys.executable, "-m", "tutorrl.runtime.job_secrets", "--", "bash", "-c",
                          'printf "%s" "$MY_TOKEN"'], env=env, capture_output=True, text=True, check=True).stdout
    assert out == VALUE


def test_embedded_submission_carries_the_path_not_the_value(tmp_path):
    path = job_secrets.write(tmp_path, {"MY_TOKEN": VALUE})
    sub = submit.build_submission(JOB, bundle_path=tmp_path, cwd=tmp_path, submission_id="s-1", upload=False,
                                  dry_run=False, passthrough={"MY_TOKEN": VALUE}, secrets_file=path)
    env = sub.kwargs["runtime_env"]["env_vars"]
    assert "MY_TOKEN" not in env and env[job_secrets.FILE_ENV] == str(path)
    assert sub.kwargs["runtime_env"]["worker_process_setup_hook"] == job_secrets.HOOK
    assert VALUE not in repr(sub.kwargs)
    assert f"-m {job_secrets.__name__} -- bash" in sub.kwargs["entrypoint"]
    assert sub.secrets == [VALUE]  # still masked in job.log


def test_cluster_submission_keeps_env_vars(tmp_path):
    sub = submit.build_submission(JOB, bundle_path=tmp_path, cwd=tmp_path, submission_id="s-1", upload=True,
                                  dry_run=False, passthrough={"MY_TOKEN": "v4lue"})
    assert sub.kwargs["runtime_env"]["env_vars"]["MY_TOKEN"] == "v4lue"
    assert "worker_process_setup_hook" not in sub.kwargs["runtime_env"]


def test_the_file_variable_is_reserved(tmp_path):
    job = {**JOB, "runtime_env": {"env_vars": {job_secrets.FILE_ENV: "/elsewhere"}}}
    with pytest.raises(RefusedError, match=job_secrets.FILE_ENV):
        submit.build_submission(job, bundle_path=tmp_path, cwd=tmp_path, submission_id="s-1", upload=False,
                                dry_run=False, passthrough={})
