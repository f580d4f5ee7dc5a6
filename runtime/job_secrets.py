"""Secret values for a job on the embedded head, by a route the Jobs API does not show.

Ray returns a job's ``runtime_env.env_vars`` in plain text to anyone who can
reach its Jobs API (``GET /api/jobs/<id>``), and its runtime-env agent logs
them. On the embedded head every process of the job runs on this machine, so
the values need not travel through Ray at all: ``tutorrl run`` writes them to
a file only its user can read, in the head's private temp folder (removed with
the head), and Ray carries only that file's *path* and a worker setup hook
(``runtime_env.worker_process_setup_hook``) that loads the values into each
worker process's environment as it starts -- the job supervisor (whose
environment the entrypoint, launch.sh, inherits) and every actor verl starts.

A cluster's nodes do not see this machine's files: there the values still go
in ``env_vars``, and ``tutorrl run`` says who can read them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tutorrl.contract import SECRETS_FILE_ENV as FILE_ENV  # noqa: E402
HOOK = "tutorrl.runtime.job_secrets.load"
_MAX = 1024 * 1024


def write(folder: Path, values: dict[str, str], job: str = "job") -> Path:
    """The secrets file for one job, readable by its owner only. ``job`` (its submission id)
    keeps the files of the jobs of a set, which share one head's folder, apart."""
    path = Path(folder) / f"{job}-secrets.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(values, fh)
    return path


def load() -> None:
    """Ray's worker setup hook: put the job's secret values into this process's environment."""
    path = os.environ.get(FILE_ENV)
    if not path:
        return
    # A job's workers keep starting until it ends; the file goes with the head.
    with open(path, "rb") as fh:
        values = json.loads(fh.read(_MAX))
    for name, value in values.items():
        if isinstance(name, str) and isinstance(value, str):
            os.environ[name] = value


def main(argv: list[str]) -> None:
    """``python -m tutorrl.runtime.job_secrets -- CMD...``: the job's entrypoint
    (launch.sh) started with the values set, as the workers get them."""
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.exit("usage: python -m tutorrl.runtime.job_secrets -- COMMAND [ARG...]")
    load()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
