"""The lean head's zygotes: a fork of `ray start` that becomes the process Ray started a stand-in for,
with the stand-in's arguments, Ray's variables and standard streams; and the stand-in's own way when
there is no zygote. Ray's scripts are stood in for by one that says who ran it and how."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tutorrl.runtime import head

_SCRIPT = """import json, os, sys
with open(os.environ["OUT"] + ".part", "w") as fh:
    json.dump({"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv, "stdin": os.fstat(0).st_ino,
               "probe": os.environ.get("RAY_PROBE"), "secret": os.environ.get("NOT_RAYS"),
               "unbuffered": type(sys.stdout.buffer).__name__ == "FileIO"}, fh)
os.rename(os.environ["OUT"] + ".part", os.environ["OUT"])
if os.environ.get("RAY_PROBE_HOLD"):  # handed over with Ray's variables
    sys.stdin.read()  # until the driver's end of the pipe closes: a process that lives on
"""
# Forks the zygote "probe" from a fresh interpreter (one thread), then starts a stand-in for it with
# a pipe of its own on standard input, and reports what the stand-in did.
_DRIVER = """import json, os, runpy, signal, subprocess, sys, time
program, setup, default, mode, check, hold = sys.argv[1:7]
lean = runpy.run_path(program, run_name="lean_under_test")
forked = lean["fork_zygote"]("probe", ["json"]) if mode == "zygote" else False
read, write = os.pipe()
env = {**os.environ, "RAY_PROBE": "from-the-stand-in", "NOT_RAYS": "stays-with-the-stand-in",
       # What the raylet sets for its agents: a forked agent can watch its raylet only through the pipe.
       "RAY_enable_pipe_based_agent_to_parent_health_check": check}
if hold == "hold":
    env["RAY_PROBE_HOLD"] = "1"
standin = subprocess.Popen([sys.executable, "-u", program, "handoff", "probe", "worker", setup, default,
                            "--language=PYTHON"], stdin=read, env=env, stderr=subprocess.PIPE, text=True)
ended = None
if hold == "hold":  # the role runs on, waiting on the pipe: the stand-in is told to end
    while not os.path.exists(os.environ["OUT"]):
        time.sleep(0.01)
    standin.send_signal(signal.SIGTERM)
    role = json.load(open(os.environ["OUT"]))["pid"]
    if role != standin.pid:  # the zygote, this process's child: how it ended
        ended = os.waitpid(role, 0)[1]
err = standin.communicate(timeout=60)[1]
print(json.dumps({"forked": forked, "standin": standin.pid, "code": standin.returncode, "err": err,
                  "driver": os.getpid(), "pipe": os.fstat(read).st_ino, "ended": ended}))
"""


def _handoff(tmp_path, mode: str, check: str = "1", hold: str = "") -> tuple[dict, dict]:
    folder = tmp_path / "workers"
    folder.mkdir()
    setup, default = folder / "setup_worker.py", folder / "default_worker.py"
    setup.write_text(_SCRIPT)
    default.write_text(_SCRIPT)
    program = tmp_path / "lean_ray.py"
    shutil.copyfile(head._LEAN_SOURCE, program)
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    out = tmp_path / "out.json"
    env = {"OUT": str(out), "PATH": "/usr/bin:/bin"}  # no PYTHONUNBUFFERED: -u alone says unbuffered
    proc = subprocess.run([sys.executable, str(driver), str(program), str(setup), str(default), mode, check,
                           hold or "-"],
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
    assert ran["unbuffered"], ran
    assert ran["argv"][0].endswith("default_worker.py"), ran
    # The stand-in lived as long as the role's process and then ended, saying so.
    assert report["code"] == 1 and f"the probe ({ran['pid']}) ended" in report["err"], report


def test_without_a_zygote_the_stand_in_runs_the_role_itself(tmp_path):
    report, ran = _handoff(tmp_path, "none")
    assert report["forked"] is False and report["code"] == 0, report
    # The stand-in became the role (exec: same pid), with the interpreter flags Ray started it with.
    assert ran["pid"] == report["standin"] and ran["unbuffered"], (report, ran)
    assert ran["stdin"] == report["pipe"] and ran["probe"] == "from-the-stand-in", ran


def test_a_zygote_refuses_an_agent_that_could_not_watch_its_raylet(tmp_path):
    # With the pipe check off, Ray's agent checks that its parent is the raylet, and a fork of
    # `ray start` would end itself within seconds: the stand-in runs the role itself.
    report, ran = _handoff(tmp_path, "zygote", check="0")
    assert report["forked"] is True and report["code"] == 0, report
    assert ran["pid"] == report["standin"], (report, ran)


def test_a_stand_in_told_to_end_ends_its_zygote_first(tmp_path):
    import signal

    report, ran = _handoff(tmp_path, "zygote", hold="hold")
    assert ran["pid"] != report["standin"], (report, ran)
    # The role's process got the stand-in's SIGTERM (and ended by it); the stand-in then ended cleanly.
    assert os.WIFSIGNALED(report["ended"]) and os.WTERMSIG(report["ended"]) == signal.SIGTERM, report
    assert report["code"] == 0, report


def test_a_zygote_no_process_is_asked_of_is_ended(tmp_path):
    # Ray starting a process from a command line the program did not rewrite (or the full head):
    # its zygote is ended at once, not left importing and waiting for a stand-in that never comes.
    program = tmp_path / "lean_ray.py"
    shutil.copyfile(head._LEAN_SOURCE, program)
    driver = ("import os, runpy, signal, sys\n"
              "lean = runpy.run_path(sys.argv[1], run_name='lean_under_test')\n"
              "assert lean['fork_zygote']('probe', ['json'])\n"
              "pid = lean['FORKED']['probe']\n"
              "lean['end_zygote']('probe')\n"
              "status = os.waitpid(pid, 0)[1]\n"
              "print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, 'probe' in lean['FORKED'])\n")
    proc = subprocess.run([sys.executable, "-c", driver, str(program)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # Ended by the signal, and forgotten.
    assert proc.stdout.split() == ["True", "False"], proc.stdout
