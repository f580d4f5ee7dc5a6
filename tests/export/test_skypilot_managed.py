"""`tutorrl export --to skypilot --managed --bucket NAME`: the task for `sky jobs launch`, with SkyPilot's
job recovery, checkpoints and evidence on a mounted bucket, and a recovered start that resumes from the
newest checkpoint whose evidence verifies (the shell function export/resume.py writes, run in real bash
over recorded checkpoints by test_slurm_requeue.py).

The task is read back by SkyPilot 0.14.1's own loader (`sky.Task.from_yaml`, in its own virtualenv, as
test_skypilot_loader.py does). No cloud is launched and no bucket is made: what SkyPilot does on a
preemption is its documented contract, not run here.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

import support
from export_helpers import bundle_named, export

GOLDEN = Path(__file__).parent / "golden" / "chess-tutor-grpo-wandb.managed.skypilot.yaml"
WANDB = bundle_named("chess-tutor-grpo-wandb")
ARGS = ("--to", "skypilot", "--accelerator", "H100", "--bucket", "tutorrl-ckpts", "--retries", "2")


def _task(*args: str) -> str:
    result = export(f"bundles/{WANDB}", *args, cwd=support.REPO)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_managed_task_matches_the_golden_file():
    text = _task(*ARGS)
    if os.environ.get("TUTORRL_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), f"{GOLDEN.name} is stale: rerun with TUTORRL_UPDATE_GOLDEN=1"
    task = yaml.safe_load(text)
    assert task["resources"]["job_recovery"] == {"strategy": "EAGER_NEXT_REGION", "max_restarts_on_errors": 2}
    assert task["file_mounts"]["/tutorrl-store"] == {"name": "tutorrl-ckpts", "mode": "MOUNT"}
    run = task["run"]
    assert subprocess.run(["bash", "-n"], input=run, text=True).returncode == 0
    # The output folder the spec names is the bucket's; the evidence is appended to the bucket's bundle copy.
    assert f"ln -sfn /tutorrl-store/checkpoints/{WANDB} checkpoints/chess-tutor/chess-tutor-grpo-wandb" in run
    assert f"bundle=/tutorrl-store/bundles/{WANDB}\n" in run and "export TUTORRL_BUNDLE_DIR" in run
    assert "sky jobs launch" in text
    # --managed without retries recovers preemptions only; the plain task is unchanged.
    managed = yaml.safe_load(_task("--to", "skypilot", "--accelerator", "H100", "--managed", "--bucket", "b1"))
    assert managed["resources"]["job_recovery"]["max_restarts_on_errors"] == 0
    plain = _task("--to", "skypilot", "--accelerator", "H100")
    assert plain == (GOLDEN.parent / "chess-tutor-grpo-wandb.skypilot.yaml").read_text()


@pytest.mark.parametrize("args, message", [
    (("--managed",), "--managed: a managed SkyPilot job needs --bucket NAME"),
    (("--retries", "1"), "--retries: a managed SkyPilot job needs --bucket NAME"),
    (("--bucket", "b1"), "--bucket is for a managed job"),
    (("--managed", "--bucket", "Not_A/Bucket"), "--bucket 'Not_A/Bucket'"),
])
def test_managed_options_are_checked(args, message):
    result = export(f"bundles/{WANDB}", "--to", "skypilot", "--accelerator", "H100", *args, cwd=support.REPO)
    assert result.returncode == 2 and message in result.stderr and not result.stdout, result.stderr
    assert "Traceback" not in result.stderr


LOADER = r"""
import json, sys
import sky
task = sky.Task.from_yaml(sys.argv[1])
(res,) = task.resources
print(json.dumps({"job_recovery": res.job_recovery, "file_mounts": dict(task.file_mounts or {}),
                  "storage": {k: [v.name, v.mode.value] for k, v in (task.storage_mounts or {}).items()},
                  "run": task.run, "num_nodes": task.num_nodes}))
"""


@pytest.mark.slow
@pytest.mark.needs_train_env("TUTORRL_SKYPILOT_PYTHON")
def test_skypilots_own_loader_reads_the_managed_task(tmp_path):
    # The marker deselects the test where the variable is unset, and --full fails it there.
    python = os.environ["TUTORRL_SKYPILOT_PYTHON"]
    text = _task(*ARGS)
    path = tmp_path / "task.yaml"
    path.write_text(text)
    result = subprocess.run([python, "-c", LOADER, str(path)], cwd=support.REPO, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    read = json.loads(result.stdout.splitlines()[-1])
    assert read["job_recovery"] == {"strategy": "EAGER_NEXT_REGION", "max_restarts_on_errors": 2}
    assert read["storage"] == {"/tutorrl-store": ["tutorrl-ckpts", "MOUNT"]}
    assert read["file_mounts"] == {f"~/tutorrl-bundles/{WANDB}": f"bundles/{WANDB}"}
    assert read["run"] == yaml.safe_load(text)["run"] and read["num_nodes"] == 1
    # A misspelt storage mode is refused by the same loader, so it reads what it is given (SkyPilot's client
    # lets unknown job_recovery fields through for its server to check).
    path.write_text(text.replace("mode: MOUNT", "mode: MOUNTED"))
    bad = subprocess.run([python, "-c", LOADER, str(path)], cwd=support.REPO, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "HOME": str(tmp_path)})
    assert bad.returncode != 0


def test_the_managed_rank0_block_keeps_bundle_evidence_and_checkpoints_on_the_bucket(tmp_path):
    """The task's rank-0 managed block in real bash, started twice as SkyPilot's recovery would: the bucket
    is a folder here (the test puts its path where the task says /tutorrl-store), Ray's part is not run."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "evidence"))
    from evidence_helpers import make_fsdp_step
    from export_helpers import copy_bundle

    from tutorrl.evidence import record_run_checkpoints

    run = yaml.safe_load(_task(*ARGS))["run"]
    block = run[run.index("# A managed job:"):run.index("tutorrl_resume_args\n") + len("tutorrl_resume_args\n")]
    store, work = tmp_path / "bucket", tmp_path / "work"
    work.mkdir()
    local = copy_bundle(WANDB, tmp_path / "local")
    program = (f"set -euo pipefail\nbundle={local}\n" + block.replace("/tutorrl-store", str(store))
               + "for a in ${resume[@]+\"${resume[@]}\"}; do printf '%s\\n' \"$a\"; done\n"
               "printf 'BUNDLE %s\\n' \"$TUTORRL_BUNDLE_DIR\"\n")
    env = {**os.environ, "PYTHONPATH": str(support.REPO), "TUTORRL_PYTHON": sys.executable,
           "SKYPILOT_TASK_ID": "sky-1"}

    def start(cwd: Path) -> list[str]:
        result = subprocess.run(["bash", "-c", program], cwd=cwd, env=env, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr
        # `tutorrl verify`'s line (the bucket's copy re-derived from its spec) aside
        assert f"ok: {store}/bundles/{WANDB} is bundle" in result.stdout
        return [line for line in result.stdout.splitlines() if not line.startswith("ok: ")]

    copy = store / "bundles" / WANDB
    assert start(work) == [f"BUNDLE {copy}"]
    out = work / "checkpoints" / "chess-tutor" / "chess-tutor-grpo-wandb"
    assert out.is_symlink() and out.resolve() == (store / "checkpoints" / WANDB).resolve()
    # What the run left on the bucket: a checkpoint and the record the evidence callback would append.
    make_fsdp_step(out, 1)
    record_run_checkpoints(copy, "skypilot-sky-1", False, cwd=work)
    # A recovered start, on a new machine: a fresh working folder, the bucket as it was.
    work2 = tmp_path / "work2"
    work2.mkdir()
    out2 = work2 / "checkpoints" / "chess-tutor" / "chess-tutor-grpo-wandb"
    assert start(work2) == ['trainer.resume_mode="resume_path"',
                                          f'trainer.resume_from_path="{out2 / "global_step_1"}"', f"BUNDLE {copy}"]
    assert (store / "starts" / WANDB).read_text() == "2\n"
