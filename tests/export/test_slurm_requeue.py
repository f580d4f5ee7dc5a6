"""`tutorrl export --to slurm` with retries: `#SBATCH --requeue` and a script that resumes a requeued start
from the newest checkpoint whose evidence verifies.

The resume logic runs in real bash with a real Python (tutorrl's own resume-point choice, files hashed
again) over real checkpoint step folders recorded by tutorrl's recorder; Slurm's part is only the
restart count it sets (SLURM_RESTART_COUNT), given here by the test. No Slurm daemon is needed for it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import support
from export_helpers import bundle_named, export

sys.path.insert(0, str(Path(__file__).parent.parent / "evidence"))
from evidence_helpers import make_bundle, make_fsdp_step  # noqa: E402

from tutorrl.evidence import record_run_checkpoints  # noqa: E402

GOLDEN = Path(__file__).parent / "golden" / "chess-tutor-grpo-wandb.retries.slurm.sh"
WANDB = bundle_named("chess-tutor-grpo-wandb")


def _script(*args: str) -> str:
    result = export(f"bundles/{WANDB}", "--to", "slurm", "--partition", "gpu", *args, cwd=support.REPO)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_retries_requeue_and_match_the_golden_file():
    text = _script("--retries", "2")
    if os.environ.get("TUTORRL_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), f"{GOLDEN.name} is stale: rerun with TUTORRL_UPDATE_GOLDEN=1"
    assert "#SBATCH --requeue\n" in text and subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    # Without retries (flag 0, or a spec without [run] retries) the script is the one without requeue.
    plain = _script("--retries", "0")
    assert plain == (GOLDEN.parent / "chess-tutor-grpo-wandb.slurm.sh").read_text()
    assert "--requeue" not in plain and "SLURM_RESTART_COUNT" not in plain


def test_retries_out_of_range_and_for_another_target_are_refused():
    result = export(f"bundles/{WANDB}", "--to", "slurm", "--retries", "-1", cwd=support.REPO)
    assert result.returncode == 2 and "--retries -1: 0 to 100" in result.stderr and not result.stdout
    result = export(f"bundles/{WANDB}", "--to", "kuberay", "--image", "x", "--retries", "1", cwd=support.REPO)
    assert result.returncode == 2 and "--retries is for --to slurm" in result.stderr


def _resume_function() -> str:
    text = _script("--retries", "2")
    start = text.index("tutorrl_resume_args() {\n")
    return text[start:text.index("# tutorrl-resume-end\n")]


def _run(tmp_path: Path, bundle: Path, restarts: str | None, python_bin: str, env_path: bool = True):
    """The exported function in real bash, as the batch script calls it; prints launch.sh's resume arguments."""
    program = (f"set -euo pipefail\npython_bin={python_bin}\nbundle={bundle}\n{_resume_function()}"
               "tutorrl_resume_args\nfor a in ${resume[@]+\"${resume[@]}\"}; do printf '%s\\n' \"$a\"; done\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_RESTART_COUNT", "PYTHONPATH")}
    if env_path:
        env["PYTHONPATH"] = str(support.REPO)
    if restarts is not None:
        env["SLURM_RESTART_COUNT"] = restarts
    return subprocess.run(["bash", "-c", program], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def _recorded(tmp_path: Path, steps) -> tuple[Path, Path]:
    ckpt = tmp_path / "ckpt"
    bundle = make_bundle(tmp_path / "b", output_dir=str(ckpt))
    for step in steps:
        make_fsdp_step(ckpt, step)
    record_run_checkpoints(bundle, "slurm-1", False)
    return bundle, ckpt


def test_a_first_start_passes_no_resume_arguments(tmp_path):
    bundle, _ = _recorded(tmp_path, [1])
    for restarts in (None, "0"):
        result = _run(tmp_path, bundle, restarts, sys.executable)
        assert result.returncode == 0 and result.stdout == "", result.stderr


def test_a_requeued_start_resumes_from_the_newest_verified_checkpoint(tmp_path):
    bundle, ckpt = _recorded(tmp_path, [1, 2])
    result = _run(tmp_path, bundle, "1", sys.executable)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ['trainer.resume_mode="resume_path"',
                                          f'trainer.resume_from_path="{ckpt / "global_step_2"}"']
    # A changed shard (same size: only hashing again finds it) sends the job back to step 1, and it says why.
    shard = ckpt / "global_step_2" / "actor" / "model_world_size_2_rank_0.pt"
    data = bytearray(shard.read_bytes())
    data[100] ^= 1
    shard.write_bytes(bytes(data))
    result = _run(tmp_path, bundle, "2", sys.executable)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == f'trainer.resume_from_path="{ckpt / "global_step_1"}"'
    assert "not resumed from global_step_2: its files, hashed again, are not those record 000002.json gave" \
        in result.stderr


def test_no_verified_checkpoint_restarts_from_scratch_not_from_verls_newest(tmp_path):
    bundle, ckpt = _recorded(tmp_path, [])
    make_fsdp_step(ckpt, 3)  # on disk, but no record covers it: verl's "auto" would take it
    result = _run(tmp_path, bundle, "1", sys.executable)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ['trainer.resume_mode="disable"']
    assert "global_step_3: no evidence record of this bundle covers it" in result.stderr


def test_more_restarts_than_retries_stop_the_job(tmp_path):
    bundle, _ = _recorded(tmp_path, [1])
    result = _run(tmp_path, bundle, "3", sys.executable)
    assert result.returncode == 1 and result.stdout == ""
    assert "restart 3 of at most 2; not starting again" in result.stderr


def test_a_node_python_without_tutorrl_leaves_the_resume_to_verl_and_says_so(tmp_path):
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None or subprocess.run([python, "-c", "import tutorrl"], cwd=tmp_path, capture_output=True,
                                        env={"PATH": "/usr/bin:/bin"}).returncode == 0:
        pytest.fail("this test needs a system python3 without tutorrl")
    bundle, _ = _recorded(tmp_path, [1])
    result = _run(tmp_path, bundle, "1", python, env_path=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ['trainer.resume_mode="auto"']
    assert "has no tutorrl, so no checkpoint's evidence is checked" in result.stderr


def test_the_specs_run_retries_drive_the_export_and_the_flag_wins(tmp_path):
    from evidence_helpers import EXAMPLE_SPEC

    from tutorrl.compiler import compile_bytes, write_bundle

    text = support.spec_toml(support.example_spec(EXAMPLE_SPEC), trainer={"output_dir": "checkpoints/r"},
                             run={"retries": 3})
    bundle = write_bundle(compile_bytes(text.encode(), "retries.toml"), tmp_path / "bundles").path
    shown = f"bundles/{bundle.name}"
    script = export(shown, "--to", "slurm", cwd=tmp_path)
    assert script.returncode == 0, script.stderr
    assert "#SBATCH --requeue\n" in script.stdout and 'if [ "$restarts" -gt 3 ]; then' in script.stdout
    plain = export(shown, "--to", "slurm", "--retries", "0", cwd=tmp_path)
    assert plain.returncode == 0 and "--requeue" not in plain.stdout and "SLURM_RESTART_COUNT" not in plain.stdout
    # SkyPilot: retries make the task a managed job, which needs its bucket.
    sky = export(shown, "--to", "skypilot", "--accelerator", "H100", cwd=tmp_path)
    assert sky.returncode == 2 and "the spec's [run] retries: a managed SkyPilot job needs --bucket NAME" in sky.stderr
    sky = export(shown, "--to", "skypilot", "--accelerator", "H100", "--bucket", "b1", cwd=tmp_path)
    assert sky.returncode == 0 and "max_restarts_on_errors: 3" in sky.stdout
    sky = export(shown, "--to", "skypilot", "--accelerator", "H100", "--retries", "0", cwd=tmp_path)
    assert sky.returncode == 0 and "job_recovery" not in sky.stdout and "sky jobs launch" not in sky.stdout
