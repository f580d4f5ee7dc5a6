"""The lean head's zygotes: a fork of `ray start` that becomes the process Ray started a stand-in for,
with the stand-in's arguments, Ray's variables and standard streams; and the stand-in's own way when
there is no zygote. Ray's scripts are stood in for by one that says who ran it and how."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tutorrl.runtime import head

_SCRIPT = """import json, os, sys
json.dump({"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv, "stdin": os.fstat(0).st_ino,
           "probe": os.environ.get("RAY_PROBE"), "secret": os.environ.get("NOT_RAYS"),
           "unbuffered": type(sys.stdout.buffer).__name__ == "FileIO",
           "pyarrow_blocked": "pyarrow" in sys.modules and sys.modules["pyarrow"] is None},
          open(os.environ["OUT"], "w"))
"""
# Forks the zygote "probe" from a fresh interpreter (one thread), then starts a stand-in for it with
# a pipe of its own on standard input, and reports what the stand-in did.
_DRIVER = """import json, os, runpy, subprocess, sys
program, setup, default = sys.argv[1:4]
lean = runpy.run_path(program, run_name="lean_under_test")
forked = lean["fork_zygote"]("probe", ["json"]) if sys.argv[4] == "zygote" else False
read, write = os.pipe()
env = {**os.environ, "RAY_PROBE": "from-the-stand-in", "NOT_RAYS": "stays-with-the-stand-in"}
standin = subprocess.Popen([sys.executable, "-u", program, "handoff", "probe", "worker", setup, default,
                            "--language=PYTHON"], stdin=read, env=env, stderr=subprocess.PIPE, text=True)
err = standin.communicate(timeout=60)[1]
print(json.dumps({"forked": forked, "standin": standin.pid, "code": standin.returncode, "err": err,
                  "driver": os.getpid(), "pipe": os.fstat(read).st_ino}))
"""


def _handoff(tmp_path, mode: str) -> tuple[dict, dict]:
    folder = tmp_path / "workers"
    folder.mkdir()
    setup, default = folder / "setup_worker.py", folder / "default_worker.py"
    setup.write_text(_SCRIPT)
    default.write_text(_SCRIPT)
    program = tmp_path / "lean_ray.py"
    program.write_text(head._LEAN_RAY)
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    out = tmp_path / "out.json"
    env = {"OUT": str(out), "PATH": "/usr/bin:/bin"}  # no PYTHONUNBUFFERED: -u alone says unbuffered
    proc = subprocess.run([sys.executable, str(driver), str(program), str(setup), str(default), mode],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1]), json.loads(out.read_text())


def test_a_zygote_becomes_the_process_its_stand_in_was_started_for(tmp_path):
    report, ran = _handoff(tmp_path, "zygote")
    assert report["forked"] is True, report
    # The role ran in the zygote, a fork of the driver (`ray start`), not in the stand-in Ray started.
    assert ran["ppid"] == report["driver"] and ran["pid"] != report["standin"], (report, ran)
    # With the stand-in's standard input (the raylet's pipe an agent watches), Ray's variables it was
    # given, none of its other variables, and `python -u`'s unbuffered streams.
    assert ran["stdin"] == report["pipe"], (report, ran)
    assert ran["probe"] == "from-the-stand-in" and ran["secret"] is None, ran
    assert ran["unbuffered"] and ran["pyarrow_blocked"], ran
    assert ran["argv"][0].endswith("default_worker.py"), ran
    # The stand-in lived as long as the role's process and then ended, saying so.
    assert report["code"] == 1 and f"the probe ({ran['pid']}) ended" in report["err"], report


def test_without_a_zygote_the_stand_in_runs_the_role_itself(tmp_path):
    report, ran = _handoff(tmp_path, "none")
    assert report["forked"] is False and report["code"] == 0, report
    # The stand-in became the role (exec: same pid), with the interpreter flags Ray started it with.
    assert ran["pid"] == report["standin"] and ran["unbuffered"], (report, ran)
    assert ran["stdin"] == report["pipe"] and ran["probe"] == "from-the-stand-in", ran
