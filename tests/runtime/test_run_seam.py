"""The Python API's run with its job-submission seam replaced: no Ray at all.

`tutorrl.run(..., jobs=LocalJobs())` hands the job to a seam that runs the
entrypoint with the real bash on this machine (what the seed launcher's
injectable runner allowed). Everything on tutorrl's side is the real path:
the bundle is verified, the preflight runs, the run record is claimed and
closed, the log lands in job.log, the exit code comes back. The dry run is
real too: launch.sh runs the real verl's Hydra composition (`--cfg job`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest

import tutorrl
from tutorrl.runtime.cluster import Resources
from tutorrl.runtime.options import RAY, Jobs, RunOptions

NOTHING = "${TUTORRL_NOTHING}"


class _Status:
    def __init__(self, value: str):
        self.value = value


class _Info(msgspec.Struct):
    status: str
    driver_exit_code: int | None = None
    error_type: str | None = None
    message: str | None = None


class _LocalClient:
    """Ray's Jobs API answered by one bash process per job, on this machine."""

    def __init__(self, jobs: LocalJobs):
        self.jobs = jobs

    def submit_job(self, *, entrypoint: str, submission_id: str, runtime_env: dict, **_):
        # What a Ray worker makes of env_vars (runtime/envtransport.py): the inserted breaks removed.
        env = {**os.environ, **{k: v.replace(NOTHING, "") for k, v in runtime_env.get("env_vars", {}).items()}}
        proc = subprocess.Popen(["bash", "-c", entrypoint], env=env, cwd=runtime_env.get("working_dir"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
        reader.start()
        self.jobs.submitted.append({"entrypoint": entrypoint, "submission_id": submission_id, "env": env})
        self.jobs.procs[submission_id] = (proc, reader, out)
        return submission_id

    def _state(self, sid: str) -> str:
        proc, reader, _ = self.jobs.procs[sid]
        if proc.poll() is None:
            return "RUNNING"
        reader.join()
        return "SUCCEEDED" if proc.returncode == 0 else "STOPPED" if proc.returncode < 0 else "FAILED"

    def get_job_status(self, sid: str) -> _Status:
        return _Status(self._state(sid))

    def get_job_info(self, sid: str) -> _Info:
        state, proc = self._state(sid), self.jobs.procs[sid][0]
        return _Info(state, driver_exit_code=proc.returncode if state == "FAILED" else None,
                     message=None if state == "SUCCEEDED" else f"exit {proc.returncode}")

    def get_job_logs(self, sid: str) -> str:
        return "".join(self.jobs.procs[sid][2])

    async def tail_job_logs(self, sid: str):
        # No stream: job.log is completed from get_job_logs once the job ends.
        return
        yield  # noqa: B901 - an async generator that yields nothing

    def stop_job(self, sid: str) -> bool:
        self.jobs.procs[sid][0].terminate()
        return True


class LocalJobs:
    def __init__(self, gpus: float = 1.0):
        self.gpus, self.submitted, self.procs, self.asked = gpus, [], {}, []

    def resources(self, url: str, headers: dict[str, str]) -> Resources:
        self.asked.append(url)
        total = {"CPU": 8.0, "GPU": self.gpus, "memory": 64e9}
        return Resources(alive_nodes=1, total=total, per_node=[dict(total)])

    def client(self, url: str, headers: dict[str, str]) -> _LocalClient:
        return _LocalClient(self)


ADDRESS = "http://127.0.0.1:8265"  # loopback: the job shares this filesystem; nothing listens there


@pytest.fixture
def in_workdir(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("TUTORRL_STACK_CHECK", "skip")  # the seam runs no rollout engine; see test_stack.py
    # The "cluster" is this machine: its job Python is this one, which has the CPU verl.
    monkeypatch.setenv("TUTORRL_PYTHON", sys.executable)
    for name in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "TUTORRL_TRUST_DIGESTS"):
        monkeypatch.delenv(name, raising=False)
    return workdir


def test_the_seam_is_a_jobs_and_ray_is_the_default():
    assert isinstance(RAY, Jobs) and isinstance(LocalJobs(), Jobs)
    assert not isinstance(object(), Jobs)


@pytest.mark.slow
@pytest.mark.needs_verl
def test_a_dry_run_through_the_seam_runs_the_real_launch_and_verl(make_bundle, in_workdir):
    bundle = make_bundle()
    jobs = LocalJobs()
    run = tutorrl.run(bundle, address=ADDRESS, dry_run=True, jobs=jobs)

    assert run.exit_code == 0, run.logs()[-3000:]
    assert jobs.asked == [ADDRESS] and len(jobs.submitted) == 1
    submitted = jobs.submitted[0]
    assert submitted["submission_id"] == run.run_id and run.run_id.startswith("tutorrl-")
    from tutorrl.runtime.submit import DRY_RUN_ARGS

    assert "launch.sh" in submitted["entrypoint"] and " ".join(DRY_RUN_ARGS) in submitted["entrypoint"]
    assert submitted["env"]["TUTORRL_RUN_ID"] == run.run_id
    state = run.state()
    assert state.status == "succeeded" and state.dry_run and state.address == ADDRESS
    assert state.message and state.message.startswith("dry run succeeded")
    # The real verl composed the bundle's overrides: its printed config is in the log.
    assert "actor_rollout_ref" in run.logs() or (run.path / "verl-config.yaml").is_file()
    assert run.path.parent.parent == Path(bundle).resolve()
    assert run.evidence() == []  # a dry run writes no checkpoint


def test_a_failing_job_comes_back_as_its_exit_code_and_a_closed_record(make_bundle, in_workdir):
    # Absolute paths: a run that trains on a cluster is refused relative ones (its workers run elsewhere).
    bundle = make_bundle(launch="#!/usr/bin/env bash\necho 'about to fail'\nexit 7\n",
                         train=str(in_workdir / "data/train.parquet"), val=str(in_workdir / "data/val.parquet"),
                         output_dir=str(in_workdir / "out"))
    run = tutorrl.run(RunOptions(bundle=str(bundle), address=ADDRESS, trust_digests=True), jobs=LocalJobs())
    assert run.exit_code == 7
    state = run.state()
    assert state.status == "failed" and state.exit_code == 7
    assert "about to fail" in run.logs()
    assert run.stop().already  # already ended: nothing to stop, and it says so


def test_refused_input_raises_before_any_job(make_bundle, in_workdir):
    from tutorrl.errors import RefusedError

    jobs = LocalJobs(gpus=0.0)  # the spec asks one trainer GPU
    with pytest.raises(RefusedError) as refused:
        tutorrl.run(make_bundle(train=str(in_workdir / "data/train.parquet"), val=str(in_workdir / "data/val.parquet"),
                                output_dir=str(in_workdir / "out")), address=ADDRESS, jobs=jobs)
    assert "GPU" in refused.value.render()
    assert jobs.submitted == []
    with pytest.raises(TypeError):
        tutorrl.run(RunOptions(bundle="x"), dry_run=True)


# A stand-in trainer for `--retries`: its first submission dies the way a lost trainer does, the
# retry (Ray submission id ending -r1) reports its step as verl's console logger does and ends 0.
FLAKY_LAUNCH = """#!/usr/bin/env bash
echo "args: $*"
case "$TUTORRL_RUN_ID" in
  *-r1) echo "step:1 - critic/score/mean:0.5"; exit 0 ;;
  *) echo "ray.exceptions.ActorDiedError: The actor died unexpectedly"; exit 1 ;;
esac
"""


def _paths(workdir):
    return dict(train=str(workdir / "data/train.parquet"), val=str(workdir / "data/val.parquet"),
                output_dir=str(workdir / "out"))


def test_retries_on_a_cluster_resubmit_a_lost_job_and_one_record_lists_the_attempts(make_bundle, in_workdir):
    jobs = LocalJobs()
    run = tutorrl.run(RunOptions(bundle=str(make_bundle(launch=FLAKY_LAUNCH, **_paths(in_workdir))),
                                 address=ADDRESS, trust_digests=True, retries=2), jobs=jobs)
    assert run.exit_code == 0, run.logs()[-3000:]
    first, second = [s["submission_id"] for s in jobs.submitted]
    assert (first, second) == (run.run_id, run.run_id + "-r1")
    # No checkpoint to resume: the retry says so to verl, whose "auto" would take what is in the folder.
    assert "trainer.resume_mode=" not in jobs.submitted[0]["entrypoint"]
    assert ' trainer.resume_mode="disable"\nstep:1' in run.logs()
    state = run.state()
    assert state.status == "succeeded" and state.submission_id == second and state.retries == 2
    assert [(a.status, a.exit_code, a.resumed_step, a.trained) for a in state.attempts] == [
        ("failed", 1, None, []), ("succeeded", 0, None, [1])]
    log = run.logs()
    assert log.index("ActorDiedError") < log.index(f"tutorrl: attempt 2 ({second}), from scratch") < log.index("step:1")


def test_a_launch_refusal_is_not_retried_and_retries_run_out(make_bundle, in_workdir, capsys):
    refused = make_bundle(launch="#!/usr/bin/env bash\necho 'tutorrl: wrong verl' >&2\nexit 3\n", **_paths(in_workdir))
    jobs = LocalJobs()
    run = tutorrl.run(RunOptions(bundle=str(refused), address=ADDRESS, trust_digests=True, retries=3), jobs=jobs,
                      progress=True)
    assert run.exit_code == 3 and len(jobs.submitted) == 1
    assert "not retried: launch.sh refused the launch (exit 3)" in capsys.readouterr().err
    always = make_bundle(launch="#!/usr/bin/env bash\necho 'Killed'\nexit 137\n", **_paths(in_workdir))
    jobs = LocalJobs()
    run = tutorrl.run(RunOptions(bundle=str(always), address=ADDRESS, trust_digests=True, retries=1), jobs=jobs,
                      progress=True)
    assert run.exit_code == 137 and len(jobs.submitted) == 2
    assert "attempt 2 failed; no retries left (--retries 1)" in capsys.readouterr().err
    assert [a.status for a in run.state().attempts] == ["failed", "failed"]


def test_the_specs_run_table_asks_for_retries_and_the_flag_wins(make_bundle, in_workdir):
    bundle = make_bundle(launch=FLAKY_LAUNCH, extra="\n[run]\nretries = 1\nretry_backoff_s = 0\n", **_paths(in_workdir))
    assert "[run]\nretries = 1\n" in (bundle / "spec.toml").read_text()  # part of the reviewed, hashed spec
    jobs = LocalJobs()
    run = tutorrl.run(RunOptions(bundle=str(bundle), address=ADDRESS, trust_digests=True), jobs=jobs)
    assert run.exit_code == 0 and len(jobs.submitted) == 2 and run.state().retries == 1
    jobs = LocalJobs()
    run = tutorrl.run(RunOptions(bundle=str(bundle), address=ADDRESS, trust_digests=True, retries=0), jobs=jobs)
    assert run.exit_code == 1 and len(jobs.submitted) == 1 and run.state().retries == 0
