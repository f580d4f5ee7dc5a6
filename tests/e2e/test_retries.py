"""`tutorrl run --retries` on real training: verl 0.5.0 on this CPU, its TaskRunner killed by the test.

One 4-step run serves the first assertions (each training attempt costs ~30-60 s on two cores):
its first attempt's TaskRunner is killed as soon as it exists (no checkpoint yet: the retry starts
from scratch), its second's right after verl wrote step 2's checkpoint (the retry resumes from it and
trains steps 3 and 4). The kill is SIGKILL to the Ray actor process that runs verl's trainer, found
by its title and by this test's checkpoint folder in its environment -- what a preempted or
OOM-killed trainer looks like to Ray. Nothing waits a fixed time: the test polls for the process
and for verl's tracker file.

The same run logs to W&B (offline) and to MLflow (a file store under the test's folder): one W&B run id
across the attempts, one MLflow run of the tutorrl run with each launch's run nested under it.

A second run (in-process, so the backoff wait is the test's own) corrupts the recorded step-2
checkpoint between the attempts: the retry passes it over, says why, and resumes from step 1.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

import support
from training_helpers import metrics, training_env, tutorrl

pytestmark = [pytest.mark.slow, pytest.mark.needs_train_env("TUTORRL_TRAIN_PYTHON", "TUTORRL_TINY_DIR")]

SHIM = support.REPO / "tools" / "cpu_training" / "shim"
DEADLINE_S = 900
CLUSTER_MARKER = "TUTORRL_TEST_RETRY_CLUSTER"


def shim_path() -> str:
    """The CPU stand-in first, then whatever tutorrl the tests run (a checkout put on PYTHONPATH)."""
    return os.pathsep.join(p for p in (str(SHIM), os.environ.get("PYTHONPATH", "")) if p)


def four_step_spec(folder: Path, *, steps: int = 4, resume: str | None = None, wandb: bool = False) -> Path:
    """specs/tiny_cpu_grpo.toml for 4 steps, leaving trainer.resume_mode to the retry (verl's default); with
    ``wandb``, verl's W&B and MLflow loggers too."""
    text = (support.SPECS / "tiny_cpu_grpo.toml").read_text()
    assert 'resume_mode = "disable"\n' in text and "total_steps = 2\n" in text
    text = text.replace('resume_mode = "disable"\n', f'resume_mode = "{resume}"\n' if resume else "")
    text = text.replace("total_steps = 2\n", f"total_steps = {steps}\n")
    if wandb:
        assert 'loggers = ["console"]' in text
        text = text.replace('loggers = ["console"]', 'loggers = ["console", "wandb", "mlflow"]')
    path = folder / f"tiny_retry_{steps}.toml"
    path.write_text(text)
    return path


def _trainers(ckpt: Path) -> list[int]:
    """The pids of verl's TaskRunner actors that write to ``ckpt`` (this test's, not another's on the machine)."""
    wanted = f"CKPT_ROOT={ckpt}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if b"ray::TaskRunner" not in fh.read():
                    continue
            with open(f"/proc/{name}/environ", "rb") as fh:
                if wanted not in fh.read().split(b"\0"):
                    continue
        except OSError:
            continue
        found.append(int(name))
    return found


def _poll(condition, what: str, stop: threading.Event):
    deadline = time.monotonic() + DEADLINE_S
    while not stop.is_set():
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        stop.wait(0.05)
    return None


def _tracker(step_dir: Path) -> str:
    try:
        return (step_dir / "latest_checkpointed_iteration.txt").read_text().strip()
    except OSError:
        return ""


class Killer(threading.Thread):
    """Kills the trainer of each attempt in turn: ``plan`` is, per attempt, the tracker value to wait for
    before the kill (None: kill as soon as the trainer exists)."""

    def __init__(self, ckpt: Path, step_dir: Path, plan: list[str | None]):
        super().__init__(daemon=True)
        self.ckpt, self.step_dir, self.plan = ckpt, step_dir, plan
        self.stop = threading.Event()
        self.killed: list[int] = []
        self.killed_at: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for tracker in self.plan:
                pid = _poll(lambda: [p for p in _trainers(self.ckpt) if p not in self.killed],
                            "verl's TaskRunner", self.stop)
                if pid is None:
                    return
                if tracker is not None and _poll(lambda want=tracker: _tracker(self.step_dir) == want,
                                                 f"step {tracker}'s checkpoint", self.stop) is None:
                    return
                os.kill(pid[0], signal.SIGKILL)
                self.killed_at.append(time.time())
                self.killed.append(pid[0])
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test
            self.error = exc


def _statement(path: Path) -> dict:
    return json.loads(base64.b64decode(json.loads(path.read_text())["payload"]))


class Retried:
    """The 4-step run with two kills and --retries 2 (module-scoped: it takes a few minutes)."""

    def __init__(self, root: Path):
        python, tiny = training_env("TUTORRL_TRAIN_PYTHON", ".complete", "the CPU training environment")
        self.root, self.ckpt = root, root / "ckpt"
        state = root / "state"
        self.env = {"TINY_ROOT": str(tiny), "CKPT_ROOT": str(self.ckpt), "PYTHONPATH": shim_path(),
                    "TUTORRL_PYTHON": python, "TUTORRL_TRAIN_PYTHON": python, "XDG_STATE_HOME": str(state),
                    "TUTORRL_STATE_HOME": str(state / "tutorrl"),
                    # verl's W&B logger, offline: its run files under WANDB_DIR, nothing sent anywhere.
                    "WANDB_MODE": "offline", "WANDB_DIR": str(root / "wandb"), "WANDB_SILENT": "true",
                    # verl's MLflow logger, on a file store here (MLflow 3 asks for the opt-in to use one).
                    "MLFLOW_TRACKING_URI": (root / "mlruns").as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}
        (root / "wandb").mkdir()
        compiled = tutorrl("compile", str(four_step_spec(root, wandb=True)), "--out", str(root / "bundles"), cwd=root)
        assert compiled.returncode == 0, compiled.stderr
        self.bundle = root / compiled.stdout.strip()
        self.step_dir = self.ckpt / "tiny-cpu-grpo"
        killer = Killer(self.ckpt, self.step_dir, [None, "2"])
        killer.start()
        try:
            self.run = tutorrl("run", str(self.bundle), "--num-gpus", "1", "--retries", "2", cwd=root, env=self.env,
                               timeout=DEADLINE_S * 2)
        finally:
            killer.stop.set()
            killer.join()
        if killer.error is not None:
            raise killer.error
        self.killed, self.killed_at = killer.killed, killer.killed_at
        (self.run_dir,) = (self.bundle / "runs").iterdir()
        self.record = json.loads((self.run_dir / "run.json").read_text())
        log = self.run_dir / "job.log"
        assert log.is_file(), (self.record["message"], self.run.stderr[-3000:])
        self.log = log.read_text(errors="replace")
        self.timings = self._timings()
        print("retry timings (s):", json.dumps(self.timings))

    def _timings(self) -> dict[str, float]:
        """What the resumed attempt cost beyond the steps it trained: from the kill to Ray's end of the
        attempt, tutorrl's work between the attempts (recording, re-hashing, choosing, resubmitting),
        and verl's start to its first resumed step, beside the from-scratch attempt's start."""
        from datetime import datetime

        def at(stamp: str) -> float:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()

        lines = (self.run_dir / "metrics.jsonl").read_text().splitlines()
        points = {p["step"]: p for p in map(json.loads, lines)}
        _, scratch, resumed = self.record["attempts"]
        return {
            "kill_to_attempt_end": round(at(scratch["ended"]) - self.killed_at[1], 2),
            "between_attempts": round(at(resumed["started"]) - at(scratch["ended"]), 2),
            "resumed_start_to_step_3": round(points[3]["time"] - at(resumed["started"]), 2),
            "scratch_start_to_step_1": round(points[1]["time"] - at(scratch["started"]), 2),
            # verl's own measure of a step (the console lines of two steps may arrive in one chunk).
            "one_step": round(points[4]["metrics"]["timing_s/step"], 2),
        }

@pytest.fixture(scope="module")
def retried(tmp_path_factory) -> Retried:
    return Retried(tmp_path_factory.mktemp("retry"))


def test_two_killed_trainers_then_a_run_that_ends_0_having_trained_each_step_once(retried):
    out = retried.run.stdout[-3000:] + retried.run.stderr[-5000:]
    assert len(retried.killed) == 2, out
    assert retried.run.returncode == 0, out
    record = retried.record
    assert record["status"] == "succeeded" and record["exit_code"] == 0 and record["retries"] == 2
    attempts = record["attempts"]
    assert [a["status"] for a in attempts] == ["failed", "failed", "succeeded"], attempts
    assert [a["resumed_step"] for a in attempts] == [None, None, 2]
    assert attempts[2]["resumed_from"] == str(retried.step_dir / "global_step_2")
    assert attempts[2]["resumed_record"] == "000002.json"
    # Killed before any checkpoint: the second attempt trained from step 1; the third only 3 and 4.
    assert attempts[1]["trained"][:2] == [1, 2] and attempts[2]["trained"] == [3, 4], attempts
    assert [a["reached_step"] for a in attempts][1:] == [attempts[1]["trained"][-1], 4]
    trained = [s for a in attempts for s in a["trained"] if s >= 3]
    assert sorted(trained) == [3, 4], attempts  # steps 3 and 4 trained once
    ids = [a["submission_id"] for a in attempts]
    assert ids == [record["run_id"], record["run_id"] + "-r1", record["run_id"] + "-r2"]
    assert record["submission_id"] == ids[-1]
    assert f"Load from checkpoint folder: {retried.step_dir / 'global_step_2'}" in retried.log
    # verl logs a step's metrics after it saves that step's checkpoint, and the kill comes as soon as the
    # step-2 tracker names it: step 2's console line may or may not have been printed first. Steps 1, 3 and
    # 4 always are (1 by the second attempt, 3 and 4 by the third) and no step beyond the run's is.
    logged = set(metrics(retried.log))
    assert {1, 3, 4} <= logged <= {1, 2, 3, 4}, sorted(logged)
    err = retried.run.stderr
    assert "no checkpoint whose evidence verifies: attempt 2 starts from scratch" in err
    assert f"attempt 3 resumes from {retried.step_dir / 'global_step_2'} (record 000002.json" in err


def test_records_1_to_4_chain_across_the_attempts_and_rehash(retried):
    records = sorted((retried.bundle / "evidence").glob("[0-9]*.json"))
    statements = [_statement(p)["predicate"] for p in records]
    assert [s["checkpoint"]["step"] for s in statements] == [1, 2, 3, 4]
    assert {s["run"]["run_id"] for s in statements} == {retried.record["run_id"]}
    lineage = statements[2]["lineage"]
    assert lineage["record"] == "000002.json" and lineage["step"] == 2
    assert lineage["files_root"] == statements[1]["checkpoint"]["files"]["root"]
    assert "lineage" not in statements[0] and "lineage" not in statements[3]
    check = next(c for c in statements[2]["verdict"]["checks"] if c["id"] == "lineage.resumed_from")
    assert check["status"] == "pass"
    ok = tutorrl("verify", str(retried.bundle), "--rehash", cwd=retried.root, env=retried.env)
    assert ok.returncode == 0, ok.stderr
    assert "link checked" in ok.stderr


def test_runs_lists_the_attempts(retried):
    listed = tutorrl("runs", str(retried.bundle), cwd=retried.root, env=retried.env)
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(retried.record["run_id"])]
    assert "3 attempts" in row and "resumed from 2" in row


@pytest.fixture
def cluster():
    """A Ray head tutorrl did not start (support.RayNodes: `ray start --head` from the training environment,
    loopback, token auth): the retries of `tutorrl run --address` resubmit to it, as on a user's cluster."""
    python, _ = training_env("TUTORRL_TRAIN_PYTHON", ".complete", "the CPU training environment")
    nodes = support.RayNodes(str(Path(python).parent / "ray"), CLUSTER_MARKER, env={
        "PYTHONPATH": str(SHIM), "TUTORRL_PYTHON": python, "GLOO_SOCKET_IFNAME": "lo"})
    try:
        yield nodes.start_head("--num-gpus=1", "--num-cpus=3", "--object-store-memory=300000000")
    finally:
        nodes.stop()
        assert support.procs_with_env(CLUSTER_MARKER, str(nodes.root)) == [], "processes of the test's Ray are left"


def _cluster_jobs(nodes) -> list[dict]:
    """The cluster's jobs, as its Jobs API lists them (``GET /api/jobs/``)."""
    import urllib.request

    from tutorrl.runtime import cluster

    req = urllib.request.Request(f"{nodes.url}/api/jobs/", headers=cluster.auth_headers(nodes.token))
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


@pytest.mark.needs_ray
def test_a_checkpoint_changed_after_its_record_is_passed_over_and_the_retry_resumes_from_the_one_before(
        tmp_path, monkeypatch, capsys, cluster):
    """On an existing cluster (``--address``), in-process, so the backoff is the test's: between the attempts
    (after the first attempt's checkpoints are recorded) it flips a byte of step 2's model shard, as a disk or
    a stray writer might."""
    from tutorrl.runtime.options import RunOptions
    from tutorrl.runtime.progress import Progress
    from tutorrl.runtime.run import RunSession

    _, tiny = training_env("TUTORRL_TRAIN_PYTHON", ".complete", "the CPU training environment")
    ckpt, step_dir = tmp_path / "ckpt", tmp_path / "ckpt" / "tiny-cpu-grpo"
    for name in [n for n in os.environ if n.startswith("RAY_")]:
        monkeypatch.delenv(name)
    for name, value in {"TINY_ROOT": str(tiny), "CKPT_ROOT": str(ckpt), "RAY_AUTH_TOKEN": cluster.token}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    compiled = tutorrl("compile", str(four_step_spec(tmp_path)), "--out", str(tmp_path / "bundles"), cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    bundle = tmp_path / compiled.stdout.strip()
    shard = step_dir / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt"
    waits = []

    def corrupt_then_go_on(seconds: float) -> bool:
        waits.append(seconds)
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0x01
        shard.write_bytes(bytes(data))
        return False  # not interrupted

    killer = Killer(ckpt, step_dir, ["2"])
    killer.start()
    session = RunSession(RunOptions(bundle=str(bundle), address=cluster.url, retries=1), Progress(tty=False))
    session.echo = False
    session.wait = corrupt_then_go_on
    try:
        code = session.run()
    finally:
        killer.stop.set()
        killer.join()
    if killer.error is not None:
        raise killer.error
    err = capsys.readouterr().err
    assert len(killer.killed) == 1, err[-5000:]
    assert code == 0, err[-5000:]
    assert waits == [0.0]  # the backoff is said and waited through the seam, never slept in a test
    assert "retry 1/1 now" in err
    assert ("not resumed from global_step_2: its files, hashed again, are not those record 000002.json gave "
            "(actor/model_world_size_1_rank_0.pt: content changed since it was recorded)") in err
    assert f"attempt 2 resumes from {step_dir / 'global_step_1'} (record 000001.json" in err
    (run_dir,) = (bundle / "runs").iterdir()
    record = json.loads((run_dir / "run.json").read_text())
    first, second = record["attempts"]
    assert first["status"] == "failed" and first["trained"][:2] == [1, 2]
    assert second["resumed_step"] == 1 and second["trained"] == [2, 3, 4]
    assert record["address_kind"] == "cluster"
    ids = [a["submission_id"] for a in record["attempts"]]
    # Both attempts are jobs of the cluster's own Jobs API, which still lists them after the run.
    jobs = {j["submission_id"]: j["status"] for j in _cluster_jobs(cluster) if j.get("submission_id")}
    assert [jobs.get(i) for i in ids] == ["FAILED", "SUCCEEDED"], jobs
    assert second["skipped"] and second["skipped"][0].startswith("global_step_2: its files")
    # The retry wrote step 2 again: its new record links the record of step 1, which it resumed from.
    statements = [_statement(p)["predicate"] for p in sorted((bundle / "evidence").glob("[0-9]*.json"))]
    assert [s["checkpoint"]["step"] for s in statements] == [1, 2, 2, 3, 4]
    assert statements[2]["lineage"]["record"] == "000001.json"
    rehash = tutorrl("verify", str(bundle), "--rehash", cwd=tmp_path)
    # The first step-2 record no longer matches the folder (written again since); every record after it does.
    assert rehash.returncode != 0
    assert "000002.json (step 2): " in rehash.stderr and "do not match" in rehash.stderr
    for name in ("000003.json (step 2)", "000004.json (step 3)", "000005.json (step 4)"):
        assert f"{name}: matches" in rehash.stderr


def test_the_w_and_b_run_is_one_across_the_attempts_and_its_config_names_the_bundle(retried):
    record = retried.record
    tracker_id = record["tracker_id"]
    assert tracker_id.startswith(record["run_id"] + "-")
    runs = sorted((retried.root / "wandb" / "wandb").glob("offline-run-*"))
    # Every attempt that got as far as verl's tracker wrote into the same W&B run (the first was killed early).
    assert len(runs) >= 2, runs
    assert {p.name.split("-", 3)[3] for p in runs} == {tracker_id}  # offline-run-<date>_<time>-<id>
    # The config verl handed wandb.init, as W&B's own log of the call has it: the tutorrl table the launch added.
    # (Its offline transaction log stays empty here: when a Ray job ends its processes are killed, W&B's
    # service among them, before verl 0.5.0's tracker finishes, so an offline run is never flushed.)
    logged = [(p / "logs" / "debug.log").read_text(errors="replace") for p in runs]
    table = (f"'tutorrl': {{'bundle': '{record['bundle']}', 'bundle_id': '{retried.bundle.name}', "
             f"'run_id': '{record['run_id']}', 'experiment': 'tiny-cpu-grpo', 'verl': '0.5.0', 'evidence_head': ")
    assert all(table in text for text in logged)
    assert "'evidence_head': '000002.json@sha256:" in logged[-1]  # the head the resumed attempt started from
    assert f"'tracker_id': '{tracker_id}'" in logged[-1]
    listed = tutorrl("runs", str(retried.bundle), cwd=retried.root, env=retried.env)
    assert f"wandb {tracker_id}" in listed.stdout


def _mlflow_run(root: Path, run_id: str) -> dict:
    """An MLflow run as its file store holds it (read as files, not through MLflow): its tags, params,
    status and each metric's steps."""
    (folder,) = [p for p in (root / "mlruns").glob(f"*/{run_id}") if p.is_dir()]

    def table(kind: str) -> dict[str, str]:
        base = folder / kind
        return {str(p.relative_to(base)): p.read_text() for p in base.rglob("*") if p.is_file()}

    meta = dict(line.split(": ", 1) for line in (folder / "meta.yaml").read_text().splitlines() if ": " in line)
    steps = {key: [int(line.split()[2]) for line in text.splitlines()] for key, text in table("metrics").items()}
    return {"experiment": folder.parent.name, "tags": table("tags"), "params": table("params"),
            "status": meta["status"].strip(), "steps": steps}


FINISHED, FAILED = "3", "4"  # MLflow's RunStatus numbers, as its file store writes them


def test_the_mlflow_run_is_one_for_the_run_with_each_attempts_run_under_it(retried):
    record = retried.record
    parent, runs = record["mlflow_run_id"], record["mlflow_runs"]
    assert parent and len(runs) == 3 and len({parent, *runs}) == 4, record
    top = _mlflow_run(retried.root, parent)
    assert top["tags"]["tutorrl.bundle"] == top["params"]["tutorrl.bundle"] == record["bundle"]
    assert top["params"]["tutorrl.run_id"] == record["run_id"] and top["status"] == FINISHED
    launches = [_mlflow_run(retried.root, r) for r in runs]
    assert {r["tags"]["mlflow.parentRunId"] for r in launches} == {parent}
    assert {r["experiment"] for r in launches} == {top["experiment"]}
    assert [r["status"] for r in launches] == [FAILED, FAILED, FINISHED]
    assert [r["tags"]["tutorrl.attempt"] for r in launches] == ["1", "2", "3"]
    # The resumed launch: verl's own parameters (the composed config, the tutorrl table in it) and its steps.
    resumed = launches[2]
    assert resumed["params"]["tutorrl/bundle"] == record["bundle"]
    assert resumed["params"]["trainer/resume_mode"] == "resume_path"
    assert resumed["params"]["trainer/resume_from_path"] == str(retried.step_dir / "global_step_2")
    assert resumed["tags"]["tutorrl.evidence_head"].startswith("000002.json@sha256:")
    assert resumed["steps"]["timing_s/step"] == [3, 4]
    assert 1 in launches[1]["steps"]["timing_s/step"]  # the from-scratch attempt trained from step 1
    # The run's own MLflow run: each step once, as tutorrl read verl's metrics (the whole curve).
    lines = (retried.run_dir / "metrics.jsonl").read_text().splitlines()
    seen = sorted({json.loads(line)["step"] for line in lines})
    assert top["steps"]["timing_s/step"] == seen and {1, 3, 4} <= set(seen), seen
    listed = tutorrl("runs", str(retried.bundle), cwd=retried.root, env=retried.env)
    assert f"mlflow {parent}" in listed.stdout


def test_a_later_run_resuming_a_recorded_checkpoint_logs_into_the_same_w_and_b_and_mlflow_runs(retried):
    """Another spec (5 steps, resume_mode auto) on the same folder: verl resumes step 4, and the run
    finds the W&B run through step 4's evidence record and the run record it names."""
    compiled = tutorrl("compile", str(four_step_spec(retried.root, steps=5, resume="auto", wandb=True)), "--out",
                       str(retried.root / "bundles"), cwd=retried.root)
    assert compiled.returncode == 0, compiled.stderr
    bundle = retried.root / compiled.stdout.strip()
    run = tutorrl("run", str(bundle), "--num-gpus", "1", cwd=retried.root, env=retried.env)
    assert run.returncode == 0, run.stderr[-3000:]
    (run_dir,) = (bundle / "runs").iterdir()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["resumed_step"] == 4
    assert record["tracker_id"] == retried.record["tracker_id"]
    assert f"tracker: W&B run {record['tracker_id']} of {retried.record['run_id']}" in run.stderr
    # The same MLflow run: a new launch's run under the first run's, which now holds step 5 too.
    assert record["mlflow_run_id"] == retried.record["mlflow_run_id"]
    assert f"tracker: MLflow run {record['mlflow_run_id']} of {retried.record['run_id']}" in run.stderr
    (launch,) = record["mlflow_runs"]
    later = _mlflow_run(retried.root, launch)
    assert later["tags"]["mlflow.parentRunId"] == record["mlflow_run_id"] and later["status"] == FINISHED
    assert later["steps"]["timing_s/step"] == [5] and later["params"]["trainer/resume_mode"] == "auto"
    assert _mlflow_run(retried.root, record["mlflow_run_id"])["steps"]["timing_s/step"][-1] == 5
    newest = max((retried.root / "wandb" / "wandb").glob("offline-run-*"), key=lambda p: p.stat().st_mtime)
    assert newest.name.endswith(record["tracker_id"])
    assert f"'tutorrl': {{'bundle': '{record['bundle']}'" in (newest / "logs" / "debug.log").read_text(errors="replace")

