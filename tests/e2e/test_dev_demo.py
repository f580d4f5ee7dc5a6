"""The README's first command, `bash tools/dev.sh demo`, as a newcomer sees it
(set-up skipped: the suite's own virtualenv already holds verl and Ray)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_demo_compiles_dry_runs_and_says_what_next(tmp_path):
    venv = Path(sys.prefix)
    if not (venv / "bin" / "tutorrl").exists():
        pytest.skip("the suite does not run from a virtualenv holding the tutorrl script")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TUTORRL_"))}
    env.update(TUTORRL_DEV_SETUP="skip", TUTORRL_VENV=str(venv), PYTHON=sys.executable,
               TUTORRL_DEMO_DIR=str(tmp_path / "demo"))
    proc = subprocess.run(["bash", str(ROOT / "tools" / "dev.sh"), "demo"], env=env, capture_output=True,
                          text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out, err = proc.stdout.splitlines(), proc.stderr.splitlines()
    # A fresh compile the user sees happen, never "unchanged, already at".
    assert any(f"wrote {tmp_path / 'demo' / 'bundles'}/" in line for line in err), proc.stderr
    (bundle,) = (tmp_path / "demo" / "bundles").iterdir()
    assert any(line.startswith("ok: ") and str(bundle) in line for line in out)
    # A summary, not verl's thousand-line config.
    assert any("dry run succeeded: verl 0.9.1" in line and "accepted all" in line for line in err)
    assert "actor_rollout_ref:" not in proc.stdout
    assert len(out) + len(err) < 40, proc.stdout + proc.stderr
    # It ends saying what the bundle is, where it is, and what to do next.
    what, where, nxt = out[-3:]
    assert what.startswith("The bundle is the launch, sealed: launch.sh")
    assert where.startswith(f"It is at {bundle} ")
    assert nxt.startswith(f"Next: source {venv}/bin/activate (puts tutorrl on PATH), then: tutorrl runs {bundle};")
    assert list(bundle.glob("runs/*/verl-config.yaml"))
