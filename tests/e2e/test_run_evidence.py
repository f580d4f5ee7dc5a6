"""Evidence hooked into runs, end to end on a real embedded Ray head.

The GPU training cannot run here, so launch.sh is a stand-in (sealed with the
compiler's `reseal`) that does what verl 0.9.1 does around a save: its trainer
runs in a Ray actor, writes an FSDP-shaped checkpoint under the spec's
(relative) output_dir and calls the checkpoint callback the compiler wires
into `trainer.checkpoint_callback_class`; a second save is written without the
callback, as an older verl would. tutorrl's post-run scan must record that one,
and a failed run must record what exists and say the run did not finish.
The stand-in's trainer says the callback's save is the last step, as verl's
does at the end of training, so the callback waits for its record there.
A checkpoint without its data.pt fails a check: with the default
evidence.on_failure the run exits 4 after a successful job, with "stop" the
callback stops the job and the run exits 5.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import support
from tutorrl.compiler import compile_bytes, write_bundle
from tutorrl.compiler.bundle.manifest import reseal

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray]  # a real embedded Ray head per test (about 40 s)

STANDIN = r'''#!/usr/bin/env bash
set -euo pipefail
python - <<'PY'
import os, sys
from pathlib import Path

import ray


def make_fsdp_step(*args, **kwargs):
    # Imported where it runs: the actor's process does not share the driver's sys.path.
    sys.path.insert(0, os.environ["TUTORRL_TEST_HELPERS"])
    from evidence_helpers import make_fsdp_step as make

    return make(*args, **kwargs)


ray.init()


class Trainer:
    total_training_steps = int(os.environ["STANDIN_FIRST_STEP"])  # the callback's save is the last step


@ray.remote
class TaskRunner:  # verl's trainer lives in an actor like this one
    def save(self, step):
        from tutorrl.evidence.callback import EvidenceCallback

        # relative, as verl writes default_local_dir
        step_dir = make_fsdp_step(Path("ckpt"), step, data_pt=os.environ.get("STANDIN_BROKEN") != "1")
        EvidenceCallback(config=None).on_save(trainer=Trainer(), global_step=step,
                                              checkpoint_dir=os.path.relpath(step_dir), async_save=False)
        return os.getcwd()


first = int(os.environ["STANDIN_FIRST_STEP"])
print("actor cwd", ray.get(TaskRunner.remote().save.remote(first)))
make_fsdp_step(Path("ckpt"), first + 1)  # saved without the hook
PY
exit "${STANDIN_EXIT}"
'''


def _bundle(tmp_path: Path, on_failure: str | None = None) -> Path:
    text = support.spec_toml(
        support.example_spec("gsm8k_custom_reward.toml"), resources={"trainer_gpus_per_node": 1},
        rollout={"tensor_parallel": 1},  # one GPU: verl's default of 2 would not divide it
        trainer={"output_dir": "ckpt", "evidence_callback": True},
        **({"evidence": {"on_failure": on_failure}} if on_failure is not None else {}))
    compiled = compile_bytes(text.encode(), "spec.toml")
    return write_bundle(reseal(compiled, launch_sh=STANDIN.encode()), tmp_path / "bundles").path


def _run(bundle: Path, cwd: Path, first_step: int, exit_code: int, broken: bool = False,
         *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # The launch is a stand-in trainer, not verl's: the training-stack check
    # (which wants a rollout engine this CPU environment lacks) is not the subject.
    # The stand-in is resealed into the bundle: accepted on its digests alone.
    env.update(TUTORRL_EMBEDDED_NUM_GPUS="1", TUTORRL_STACK_CHECK="skip", TUTORRL_TRUST_DIGESTS="1",
               TUTORRL_TEST_HELPERS=str(Path(__file__).parents[1] / "evidence"),
               STANDIN_FIRST_STEP=str(first_step), STANDIN_EXIT=str(exit_code), STANDIN_BROKEN=str(int(broken)))
    return subprocess.run([sys.executable, "-m", "tutorrl", "run", str(bundle), *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _records(bundle: Path, cwd: Path) -> list[dict]:
    shown = support.cli("evidence", str(bundle), "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "data" / "gsm8k").mkdir(parents=True)
    for name in ("train.parquet", "test.parquet"):
        (work / "data" / "gsm8k" / name).write_bytes(b"")
    # The spec's reward module, importable where the job starts (the preflight imports it).
    (work / "my_rewards").mkdir()
    (work / "my_rewards" / "__init__.py").write_text("")
    (work / "my_rewards" / "gsm8k.py").write_text("def score(*args, **kwargs):\n    return 0.0\n")
    return work


def test_callback_and_post_run_scan_record_every_checkpoint(tmp_path):
    work = _work(tmp_path)
    bundle = _bundle(tmp_path)

    ok = _run(bundle, work, first_step=1, exit_code=0)
    assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
    # The stand-in launch.sh was resealed, not compiled: the run says it was not re-derived.
    assert "accepted on its digests alone" in ok.stderr
    assert f"actor cwd {work}" in ok.stdout
    (run,) = [json.loads(p.read_text()) for p in bundle.glob("runs/*/run.json")]
    records = _records(bundle, work)
    assert [r["predicate"]["checkpoint"]["step"] for r in records] == [1, 2]
    assert [r["predicate"]["run"]["source"] for r in records] == ["callback", "post-run-scan"]
    assert {r["predicate"]["run"]["run_id"] for r in records} == {run["run_id"]}
    assert records[1]["predicate"]["run"]["finished"] is True
    assert support.cli("verify", str(bundle), "--trust-digests", cwd=work).returncode == 0
    # One line per record in the run's stream: step, files, the checks that did not pass.
    said = [line for line in ok.stderr.splitlines() if line.startswith("tutorrl: evidence: ")]
    assert said[0].startswith("tutorrl: evidence: 000001.json: step 1, 10 files, PARTIAL (")
    assert "skipped: " in said[0] and "publication.engines_answered" in said[0]
    assert said[1].startswith("tutorrl: evidence: 000002.json: step 2, 10 files, ")
    assert said[2] == f"tutorrl: evidence: each check's reason: tutorrl evidence {bundle}"

    # --quiet: tutorrl's own lines only; the job's output is in its log, not the stream.
    failed = _run(bundle, work, 3, 3, False, "--quiet")
    assert failed.returncode == 3, failed.stderr[-2000:]
    assert "actor cwd" not in failed.stdout + failed.stderr
    (second,) = [p for p in bundle.glob("runs/*") if p.name != run["run_id"]]
    assert f"actor cwd {work}" in (second / "job.log").read_text()
    assert "tutorrl: evidence: 000003.json: step 3, " in failed.stderr and "FAILED (exit code 3)" in failed.stderr
    records = _records(bundle, work)
    # Earlier checkpoints are not recorded twice; the failed run's are, marked unfinished.
    assert [r["predicate"]["checkpoint"]["step"] for r in records] == [1, 2, 3, 4]
    assert [r["predicate"]["run"]["source"] for r in records[2:]] == ["callback", "post-run-scan"]
    assert records[3]["predicate"]["run"]["finished"] is False
    verified = support.cli("verify", str(bundle), "--trust-digests", cwd=work)
    assert verified.returncode == 0, verified.stderr


def test_failed_evidence_has_its_own_exit_status(tmp_path):
    work = _work(tmp_path)
    bundle = _bundle(tmp_path)
    # Default (record): the job succeeds, the run says which record failed and exits 4.
    trained = _run(bundle, work, first_step=1, exit_code=0, broken=True)
    assert trained.returncode == 4, trained.stdout[-2000:] + trained.stderr[-2000:]
    assert "000001.json (step 1, callback) failed: checkpoint.dataloader_state" in trained.stderr
    assert "the job succeeded but its evidence failed (exit 4)" in trained.stderr
    (run,) = [json.loads(p.read_text()) for p in bundle.glob("runs/*/run.json")]
    assert run["status"] == "succeeded" and run["exit_code"] == 0
    assert [r["predicate"]["verdict"]["status"] for r in _records(bundle, work)] == ["fail", "partial"]
    # The record keeps the verdict, so `status` says it for any run (a detached one too).
    assert run["evidence_exit_code"] == 4 and "000001.json" in run["evidence_problems"][0]
    status = support.cli("status", run["run_id"], cwd=work)
    assert "evidence:  failed (`tutorrl run` exits 4): 000001.json (step 1, callback)" in status.stdout

    # stop: the callback raises into the trainer, the job fails, the run exits 5.
    stopping, work = _bundle(tmp_path / "stop", on_failure="stop"), _work(tmp_path / "stop")
    assert "export TUTORRL_EVIDENCE_ON_FAILURE=stop" in (stopping / "bundle.env").read_text()
    stopped = _run(stopping, work, first_step=3, exit_code=0, broken=True)
    assert stopped.returncode == 5, stopped.stdout[-2000:] + stopped.stderr[-2000:]
    assert 'tutorrl evidence: stopping the run (evidence.on_failure = "stop")' in stopped.stdout + stopped.stderr
    assert "000001.json (step 3, callback) failed: checkpoint.dataloader_state" in stopped.stderr
    (run,) = [json.loads(p.read_text()) for p in stopping.glob("runs/*/run.json")]
    assert run["status"] == "failed"
    # The stand-in never reached its second save: only the failing checkpoint is recorded.
    assert [r["predicate"]["checkpoint"]["step"] for r in _records(stopping, work)] == [3]
