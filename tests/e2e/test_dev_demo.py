"""The README's first command, `bash tools/dev.sh demo`, as a newcomer sees it: a model trained
for real, its checkpoints' evidence verified, and the model merged and loaded (set-up skipped: the suite's virtualenv already
holds tutorrl and Ray, and `tools/dev.sh test` built the training environment)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_train_env("TUTORRL_TRAIN_PYTHON", "TUTORRL_TINY_DIR")]

ROOT = Path(__file__).resolve().parents[2]


def test_demo_trains_records_evidence_verifies_and_says_what_next(tmp_path):
    venv = Path(sys.prefix)
    if not (venv / "bin" / "tutorrl").exists():
        pytest.skip("the suite does not run from a virtualenv holding the tutorrl script")
    train_python, tiny = os.environ.get("TUTORRL_TRAIN_PYTHON"), os.environ.get("TUTORRL_TINY_DIR")
    if not train_python or not tiny:
        pytest.fail("the CPU training environment is not set up: run the suite with `bash tools/dev.sh test`")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TUTORRL_"))}
    env.update(TUTORRL_DEV_SETUP="skip", TUTORRL_VENV=str(venv), PYTHON=sys.executable,
               TUTORRL_TRAIN_VENV=str(Path(train_python).parent.parent), TUTORRL_TINY_DIR=tiny,
               TUTORRL_DEMO_DIR=str(tmp_path / "demo"), XDG_STATE_HOME=str(tmp_path / "state"))
    proc = subprocess.run(["bash", str(ROOT / "tools" / "dev.sh"), "demo"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out, err = proc.stdout.splitlines(), proc.stderr.splitlines()
    bundles = tmp_path / "demo" / "bundles"
    # Fresh compiles the user sees happen, never "unchanged, already at".
    assert sum(f"wrote {bundles}/" in line for line in err) == 2, proc.stderr
    tiny_bundle = next(b for b in bundles.iterdir() if "tiny-cpu-grpo" in (b / "spec.toml").read_text())
    # verl trained: its two steps, with a loss and a gradient norm, as verl logged them.
    steps = [line for line in out if re.match(r"^   step:[12]  actor/pg_loss:\S+  actor/grad_norm:\S+  ", line)]
    assert len(steps) == 2, proc.stdout
    assert any("SUCCEEDED (exit code 0)" in line for line in out)
    # One evidence record per checkpoint verl wrote, then every file re-hashed.
    assert sum(bool(re.match(r"^00000[12]\.json  step [12] ", line)) for line in out) == 2, proc.stdout
    assert any(line.startswith("ok: ") and "2 evidence record(s)" in line and "re-hashed and matches" in line
               for line in out), proc.stdout
    assert (tmp_path / "demo" / "checkpoints" / "tiny-cpu-grpo" / "global_step_2" / "actor").is_dir()
    # Short: verl's own output is in train.log, not on the terminal.
    assert "actor_rollout_ref" not in proc.stdout
    # The model, last: verl's merger wrote a folder, its record links step 2's, transformers generated a line.
    assert (tmp_path / "demo" / "model" / "model.safetensors").is_file()
    assert any(re.match(r"^   evidence: 000003\.json: step 2, \d+ files, PASS .*merged from global_step_2, recorded as "
                        r"000002\.json", line) for line in out), proc.stdout
    assert any(line.startswith("   'What is 2 + 3?' -> ") for line in out), proc.stdout
    assert len(out) + len(err) < 56, proc.stdout + proc.stderr
    # What a healthy run shows: no warnings from Ray or verl, no "missing" notes about the demo's own
    # files, no line a terminal has to wrap several times (one of 733 characters once).
    shown = out + err
    assert not [line for line in shown if "WARNING" in line or " missing" in line or "Hugging Face Hub id" in line], (
        proc.stdout + proc.stderr)
    # (The demo's folder is spelled out in full on its last lines; it counts as one word.)
    longest = max((line.replace(str(tmp_path / "demo"), "DEMO") for line in shown), key=len)
    assert len(longest) < 300, longest
    # It ends saying what the bundle is, where it is, and what to do next.
    what, where, nxt = out[-3:]
    assert what.startswith("The bundle is the launch, sealed: launch.sh")
    assert where.startswith(f"It is at {tiny_bundle};")
    assert nxt.startswith(f"Next: source {venv}/bin/activate (puts tutorrl on PATH), then: tutorrl runs {tiny_bundle};")
