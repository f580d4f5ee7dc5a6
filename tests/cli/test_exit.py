"""How the ``tutorrl`` program ends a short command (tutorrl._startup.end_now): by ``os._exit``,
after what an exit owes (exit handlers, the standard streams), and never while
a thread is still running."""

from __future__ import annotations

import os
import subprocess
import sys

import support

# Runs the program as its console script does, with three witnesses: an exit
# handler, an object whose finaliser only the interpreter's teardown calls,
# and (with "thread") a thread that outlives the command until the main
# thread has finished.
PROBE = """
import atexit, sys, threading
from tutorrl import cli

marks = sys.argv.pop(1)
with_thread = sys.argv.pop(1) == "thread"

def mark(what):
    with open(marks, "a") as fh:
        fh.write(what + "\\n")

class Torn:
    # Late in teardown the module's globals (and builtins) may be gone: the
    # finaliser keeps what it needs.
    def __init__(self):
        import os
        self.write, self.fd = os.write, os.open(marks, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def __del__(self):
        self.write(self.fd, b"teardown\\n")

# Held by a module of its own, in no reference cycle: the teardown frees it by
# reference counting alone, collector or not (a short command freezes it).
import types
witness = types.ModuleType("witness")
witness.torn = Torn()
sys.modules["witness"] = witness
del witness
atexit.register(mark, "atexit")
if with_thread:
    def outlive():
        threading.main_thread().join()
        mark("thread")
    threading.Thread(target=outlive).start()
sys.argv = ["tutorrl", *sys.argv[1:]]
cli.entry()
"""


def _run(tmp_path, *args, thread=False):
    marks = tmp_path / "marks"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", PROBE, str(marks), "thread" if thread else "-", *args],
                          capture_output=True, text=True, env=env, timeout=120)
    return done, marks.read_text().split() if marks.exists() else []


def test_a_short_command_skips_teardown_but_runs_exit_handlers_and_flushes(tmp_path):
    done, marks = _run(tmp_path, "compile", str(support.SPECS / "chess_tutor_grpo.toml"), "--out",
                       str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    # stdout is a pipe here, so block-buffered: the bundle's path reached it only by the flush.
    assert done.stdout.strip().startswith(str(tmp_path / "out")), done.stdout
    assert marks == ["atexit"]


def test_a_short_command_keeps_its_exit_code(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[experiment]\nverl = "9.9.9"\n')
    done, marks = _run(tmp_path, "compile", str(bad), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "verl 9.9.9 is not supported" in done.stderr
    assert marks == ["atexit"]


def test_a_thread_still_running_gets_the_usual_exit(tmp_path):
    done, marks = _run(tmp_path, "compile", str(support.SPECS / "chess_tutor_grpo.toml"), "--out",
                       str(tmp_path / "out"), thread=True)
    assert done.returncode == 0, done.stderr
    # The interpreter waited for the thread, then ran the handlers and tore down.
    assert marks == ["thread", "atexit", "teardown"]


def test_a_long_command_gets_the_usual_exit(tmp_path):
    done, marks = _run(tmp_path, "schema")
    assert done.returncode == 0, done.stderr
    assert marks == ["atexit", "teardown"]
