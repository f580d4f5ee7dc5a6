"""launch.sh's evidence-callback check (evidence/hook_check.py) under real bash and real Pythons:
it passes without importing verl or torch, and stops a launch with exit 3 and a reason
when tutorrl is missing from the job's Python or is not one that can run the callback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import support

from tutorrl.compiler import compile_bytes, write_bundle
from tutorrl.evidence.hook_check import problem

SPEC = support.SPECS / "chess_tutor_prompted.toml"  # trainer.evidence_callback = true
HEAVY = ("torch", "verl", "transformers", "tensordict")


@pytest.fixture
def bundle(tmp_path) -> Path:
    return write_bundle(compile_bytes(SPEC.read_bytes(), "spec.toml"), tmp_path / "bundles").path


def _launch(bundle: Path, tmp_path: Path, flags: str = "", pythonpath: Path | None = None):
    """launch.sh with a `python` that answers the verl release check and runs every other
    `-c` program with the real interpreter (given ``flags``); verl's own start is recorded, not run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "python"
    stand_in.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, sys
        args = sys.argv[1:]
        if args[:1] == ["-c"] and "importlib.metadata" in args[1]:
            print("0.9.1")
        elif args[:1] == ["-c"]:
            flags = os.environ["STANDIN_FLAGS"].split()
            os.execv({sys.executable!r}, [{sys.executable!r}, *flags, *args])
        else:
            with open(os.environ["STANDIN_ARGV"], "w") as fh:
                json.dump(args, fh)
        """))
    stand_in.chmod(0o755)
    argv_file = tmp_path / "argv.json"
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STANDIN_FLAGS": flags,
           "STANDIN_ARGV": str(argv_file), "HOME": str(tmp_path)}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    proc = subprocess.run(["bash", str(bundle / "launch.sh")], env=env, cwd=work, capture_output=True, text=True,
                          timeout=120)
    return proc, (json.loads(argv_file.read_text()) if argv_file.exists() else None)


@pytest.mark.needs_verl
def test_the_check_passes_and_verl_starts(bundle, tmp_path):
    assert "tutorrl.evidence.hook_check" in (bundle / "launch.sh").read_text()
    proc, argv = _launch(bundle, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert argv is not None and argv[:2] == ["-m", "verl.trainer.main_ppo"]


@pytest.mark.needs_verl
def test_the_check_loads_none_of_the_training_stack(bundle):
    code = ("import sys; from tutorrl.evidence.hook_check import problem; why = problem(sys.argv[1]); "
            f"print(repr(why), sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))")
    done = subprocess.run([sys.executable, "-c", code, str(bundle)], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "[]"]


def test_no_tutorrl_in_the_job_python_stops_the_launch(bundle, tmp_path):
    # -S: no site-packages, so neither tutorrl nor anything installed is importable.
    proc, argv = _launch(bundle, tmp_path, flags="-S")
    assert proc.returncode == 3 and argv is None
    assert "cannot run tutorrl.evidence.callback: ModuleNotFoundError: No module named 'tutorrl'" in proc.stderr
    assert "install tutorrl where the job runs, or set trainer.evidence_callback = false" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_older_tutorrl_stops_the_launch(bundle, tmp_path):
    # A tutorrl from before the check (its callback importable, no hook_check), alone on the
    # job's path (-S: this environment's own tutorrl is installed through site-packages).
    other = tmp_path / "other"
    (other / "tutorrl" / "evidence").mkdir(parents=True)
    (other / "tutorrl" / "__init__.py").write_text("__version__ = '0.0.1'\n")
    (other / "tutorrl" / "evidence" / "__init__.py").write_text("")
    (other / "tutorrl" / "evidence" / "callback.py").write_text("class EvidenceCallback:\n    pass\n")
    proc, argv = _launch(bundle, tmp_path, flags="-S", pythonpath=other)
    assert proc.returncode == 3 and argv is None
    assert "No module named 'tutorrl.evidence.hook_check'" in proc.stderr, proc.stderr


@pytest.mark.needs_verl
def test_a_bundle_this_tutorrl_cannot_read_is_refused(bundle):
    manifest = bundle / "manifest.json"
    data = json.loads(manifest.read_text())
    data["schema"] = "tutorrl.bundle/9"
    manifest.write_text(json.dumps(data))
    why = problem(bundle)
    assert why is not None and "cannot read the bundle the callback records into" in why
    assert "tutorrl.bundle/9" in why


def test_a_verl_without_the_callback_base_is_refused(bundle, tmp_path):
    fake = tmp_path / "fake"
    (fake / "verl" / "trainer").mkdir(parents=True)
    (fake / "verl" / "__init__.py").write_text("")
    code = "import sys; from tutorrl.evidence.hook_check import main; main(sys.argv[1])"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(fake)}
    done = subprocess.run([sys.executable, "-c", code, str(bundle)], capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 1
    assert done.stderr.strip() == f"verl at {fake / 'verl'} has no verl.trainer.ppo.checkpoint_callback"
