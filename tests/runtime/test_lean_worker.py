"""The lean head's worker role: Ray's setup_worker.py done in the worker's own process when the runtime
env is environment variables alone, and Ray's own setup_worker.py for anything else."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tutorrl.runtime import head

# Stand-ins for Ray's two scripts: each says who ran, with what arguments and environment.
_SCRIPT = """import json, os, sys
json.dump({"who": %r, "argv": sys.argv, "path0": sys.path[0], "A": os.environ.get("A"),
           "B": os.environ.get("B"), "pyarrow_blocked": "pyarrow" in sys.modules and sys.modules["pyarrow"] is None},
          open(os.environ["OUT"], "w"))
"""


def _worker(tmp_path, context: dict | None, language: str = "PYTHON", extra: tuple[str, ...] = ()) -> dict:
    folder = tmp_path / "workers"
    folder.mkdir(exist_ok=True)
    setup, default = folder / "setup_worker.py", folder / "default_worker.py"
    setup.write_text(_SCRIPT % "setup")
    default.write_text(_SCRIPT % "default")
    args = [*extra, str(default), "--node-ip-address=127.0.0.1", "--gcs-address=127.0.0.1:1"]
    if context is not None:
        args.append("--serialized-runtime-env-context=" + json.dumps(context))
    args.append(f"--language={language}")
    program = tmp_path / "lean_ray.py"
    shutil.copyfile(head._LEAN_SOURCE, program)
    out = tmp_path / "out.json"
    env = {"OUT": str(out), "HOME": "/home/someone", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, str(program), "worker", str(setup), *args], env=env, check=True, timeout=60)
    return json.loads(out.read_text())


def test_a_worker_whose_runtime_env_is_variables_alone_runs_in_its_own_process(tmp_path):
    got = _worker(tmp_path, {"env_vars": {"A": "${HOME}/x", "B": "${NOT_SET_ANYWHERE}y"}, "py_executable": sys.executable})
    assert got["who"] == "default", got
    # Ray's update_envs: ${X} from the environment, one that is not there made empty.
    assert (got["A"], got["B"]) == ("/home/someone/x", "y"), got
    # default_worker.py's own arguments, as Ray's exec would have passed them, and its folder first on the path.
    assert got["argv"][0].endswith("default_worker.py") and "--node-ip-address=127.0.0.1" in got["argv"], got
    assert not [a for a in got["argv"] if a.startswith(("--serialized-runtime-env-context", "--language"))], got
    assert got["path0"] == str(tmp_path / "workers"), got
    assert got["pyarrow_blocked"], got


def test_a_worker_with_no_runtime_env_context_runs_in_its_own_process(tmp_path):
    assert _worker(tmp_path, None)["who"] == "default"


@pytest.mark.parametrize("context, language, extra", [
    ({"command_prefix": ["source", "activate", "env", "&&"], "env_vars": {}}, "PYTHON", ()),  # conda
    ({"env_vars": {}, "py_executable": "/another/python"}, "PYTHON", ()),
    ({"env_vars": {}, "override_worker_entrypoint": "/in/the/container/default_worker.py"}, "PYTHON", ()),
    ({"env_vars": {"PYTHONPATH": "/somewhere"}}, "PYTHON", ()),  # read only as an interpreter starts
    ({"env_vars": {"LD_PRELOAD": "/lib/x.so"}}, "PYTHON", ()),
    ({"env_vars": {}, "a_key_this_tutorrl_does_not_know": 1}, "PYTHON", ()),
    ({"env_vars": {}}, "JAVA", ()),
    ({"env_vars": {}}, "PYTHON", ("-S",)),  # Ray passes the interpreter's site flags on
    ("not a context", "PYTHON", ()),
])
def test_anything_else_goes_through_rays_own_setup_worker(tmp_path, context, language, extra):
    got = _worker(tmp_path, context, language, extra)
    assert got["who"] == "setup", got
    # Every argument, as the raylet gave them.
    assert any(a.startswith("--serialized-runtime-env-context=") for a in got["argv"]), got
    assert f"--language={language}" in got["argv"] and not got["pyarrow_blocked"], got
