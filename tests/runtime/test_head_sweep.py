"""Head folders a killed tutorrl left behind are removed by the next tutorrl; folders in use are not."""

from __future__ import annotations

import os
import subprocess
import sys

from tutorrl.runtime import head


def _folder(base, name: str, owner: str | None):
    path = base / name
    (path / "ray" / "logs").mkdir(parents=True)
    (path / "ray" / "logs" / "job-driver.log").write_text("what a job printed")
    if owner is not None:
        (path / "owner").write_text(owner)
    return path


def test_only_folders_of_gone_owners_are_removed(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    me = f"{os.getpid()} {head._process_start(os.getpid())}"
    killed = _folder(tmp_path, "trl-killed", f"{ended.stdout.strip()} 1")
    reused_pid = _folder(tmp_path, "trl-reused", f"{os.getpid()} 1")  # same pid, another process's start
    live = _folder(tmp_path, "trl-live", me)
    unowned = _folder(tmp_path, "trl-making", None)
    garbage = _folder(tmp_path, "trl-garbage", "not an owner")
    other = _folder(tmp_path, "not-ours", f"{ended.stdout.strip()} 1")
    removed = head.sweep_orphans(str(tmp_path))
    assert sorted(removed) == sorted([killed, reused_pid])
    assert not killed.exists() and not reused_pid.exists()
    assert live.exists() and unowned.exists() and garbage.exists() and other.exists()


def test_a_symlinked_folder_is_not_followed(tmp_path):
    target = _folder(tmp_path, "elsewhere", "1 1")
    (tmp_path / "trl-link").symlink_to(target)
    assert head.sweep_orphans(str(tmp_path)) == []
    assert (target / "ray" / "logs" / "job-driver.log").exists()
