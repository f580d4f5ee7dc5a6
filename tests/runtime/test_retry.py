"""runtime/retry.py: what a retried run decides between attempts, and `tutorrl run --retries`'s refusals.

The retries themselves, on real training whose trainer is killed, are tests/e2e/test_retries.py.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import support

from tutorrl.runtime import retry


def test_the_backoff_doubles_from_its_base_and_is_capped():
    assert [retry.Policy(retries=5, backoff_s=10).delay(k) for k in (1, 2, 3)] == [10, 20, 40]
    assert retry.Policy(retries=20, backoff_s=10).delay(20) == retry.MAX_BACKOFF_S
    assert retry.Policy(retries=1).delay(1) == 0


@pytest.mark.parametrize("code,tail,why", [
    (3, "", "launch.sh refused the launch (exit 3)"),
    (2, "", "launch.sh refused the launch (exit 2)"),
    (1, "hydra.errors.ConfigCompositionException: Could not override 'trainer.nope'.",
     "verl's entry point refused the config (Could not override)"),
    (1, "omegaconf.errors.ConfigAttributeError: Key 'x' is not in struct", "verl's entry point refused the config"),
])
def test_the_launchs_own_errors_are_not_retried(code, tail, why):
    assert retry.user_error(code, tail).startswith(why)


@pytest.mark.parametrize("code,tail", [
    (1, "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."),
    (137, "Killed"),
    (None, ""),
])
def test_a_lost_trainer_is_retried(code, tail):
    assert retry.user_error(code, tail) is None


@pytest.mark.parametrize("release,variant", [("0.5.0", "fsdp"), ("0.9.1", "megatron"), ("0.2.0.post2", "megatron")])
def test_the_resume_overrides_are_spelled_as_the_release_spells_them(release, variant):
    args = retry.resume_overrides(release, variant, "/ck pts/global_step_2")
    assert args == ['trainer.resume_mode="resume_path"', 'trainer.resume_from_path="/ck pts/global_step_2"']
    assert retry.fresh_overrides(release, variant) == ['trainer.resume_mode="disable"']


def test_an_attempt_that_ended_0_is_judged_by_its_steps():
    ok = dict(succeeded=True, resumed_step=2, trained=[3, 4], reached=4, total=4)
    assert retry.shortfall(**ok) is None
    assert retry.shortfall(**{**ok, "trained": []}) == (
        "verl exited 0 but trained none of the remaining steps after resuming from step 2 (of 4)")
    assert retry.shortfall(**{**ok, "trained": [2]}).startswith("verl exited 0 but trained none")
    assert retry.shortfall(**{**ok, "trained": [3], "reached": 3}) == (
        "verl exited 0 but the run's last step is 3 of trainer.total_steps = 4")
    assert retry.shortfall(**{**ok, "succeeded": False, "trained": []}) is None
    assert retry.shortfall(**{**ok, "total": None, "reached": 3, "trained": [3]}) is None


def test_what_retries_cannot_apply_to_is_refused_with_the_reason():
    spec = SimpleNamespace(trainer=SimpleNamespace(resume_mode="disable", resume_from=None))
    assert "sets trainer.resume_mode/resume_from" in retry.refusal(spec, dry_run=False, upload=False, output_dir=True)
    assert retry.refusal(spec, dry_run=True, upload=False, output_dir=True).startswith("--retries: a dry run")
    assert "--no-upload" in retry.refusal(spec, dry_run=False, upload=True, output_dir=True)
    unset = SimpleNamespace(trainer=SimpleNamespace(resume_mode=None, resume_from=None))
    assert "sets no trainer.output_dir" in retry.refusal(unset, dry_run=False, upload=False, output_dir=False)
    assert retry.refusal(unset, dry_run=False, upload=False, output_dir=True) is None


def _tutorrl(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tutorrl", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_run_command_refuses_before_it_claims_a_record(tmp_path):
    compiled = _tutorrl("compile", str(support.SPECS / "tiny_cpu_grpo.toml"), "--out", str(tmp_path / "b"),
                        cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    bundle = tmp_path / compiled.stdout.strip()
    refused = _tutorrl("run", str(bundle), "--retries", "1", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "sets trainer.resume_mode/resume_from" in refused.stderr and "Traceback" not in refused.stderr
    assert not (bundle / "runs").exists()
    alone = _tutorrl("run", str(bundle), "--retry-backoff", "5", cwd=tmp_path)
    assert alone.returncode == 2 and "--retry-backoff only applies with --retries" in alone.stderr
    bad = _tutorrl("run", str(bundle), "--retries", "-1", cwd=tmp_path)
    assert bad.returncode == 2 and "not a number of retries" in bad.stderr
