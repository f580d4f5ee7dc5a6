"""The callback as verl 0.9.1 itself loads and calls it.

Hashing runs on the callback's worker thread. To show that `on_save` returns
before a checkpoint is hashed, a gate (a threading.Event) is put in front of
the real `Snapshot.hash`: while it is closed, the worker cannot finish; the
tests then open it and wait. No test sleeps or times anything.
"""

import threading

import pytest

from evidence_helpers import digest_of, make_bundle, make_fsdp_step
from tutorrl.evidence import callback as callback_module
from tutorrl.evidence.callback import EvidenceStopped
from tutorrl.evidence.record import Snapshot, read_records
from tutorrl.evidence.verify import verify_evidence

FQN = "tutorrl.evidence.callback.EvidenceCallback"


class Trainer:
    """What the callback reads from verl's trainer: the step count that makes a save the last."""

    def __init__(self, total_training_steps: int = 1000):
        self.total_training_steps = total_training_steps


@pytest.fixture(scope="module")
def build():
    import omegaconf

    from verl.trainer.ppo.checkpoint_callback import CheckpointCallback, build_checkpoint_callback

    def make():
        cfg = omegaconf.OmegaConf.create({"trainer": {"checkpoint_callback_class": FQN}})
        cb = build_checkpoint_callback(cfg)
        assert isinstance(cb, CheckpointCallback) and type(cb).__name__ == "EvidenceCallback"
        return cb

    return make


@pytest.fixture
def run(tmp_path, monkeypatch):
    bundle = make_bundle(tmp_path / "bundles")
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(bundle))
    monkeypatch.setenv("TUTORRL_RUN_ID", "run-7")
    monkeypatch.delenv("TUTORRL_EVIDENCE_ON_FAILURE", raising=False)
    monkeypatch.chdir(tmp_path)
    return bundle


@pytest.fixture
def gate(monkeypatch):
    """Closed: the worker waits before hashing. Records what happened, in order."""
    opened, events = threading.Event(), []
    real = Snapshot.hash

    def gated(self, **kwargs):
        assert opened.wait(60), "the test never opened the gate"
        out = real(self, **kwargs)
        events.append(f"hashed {self.step}")
        return out

    monkeypatch.setattr(Snapshot, "hash", gated)
    opened.events = events
    return opened


def _steps(bundle):
    return [s.predicate.checkpoint.step for _, s in read_records(bundle)]


def _checks(record):
    return {c.id: c for c in record.predicate.verdict.checks}


@pytest.mark.needs_verl
@pytest.mark.slow
def test_verl_loads_and_calls_it(build, run, tmp_path):
    cb = build()
    step = make_fsdp_step(tmp_path / "ckpts", 10)
    # verl passes the path as it joined it: relative to the trainer's cwd
    cb.on_save(trainer=Trainer(), global_step=10, checkpoint_dir="ckpts/global_step_10", async_save=False)
    cb.on_save(trainer=Trainer(), global_step=11, checkpoint_dir="ckpts/global_step_11", async_save=True)
    cb.wait()
    (record,) = [s for _, s in read_records(run)]
    assert record.predicate.run.run_id == "run-7" and record.predicate.run.source == "callback"
    # Named from the bundle's folder: moving both together keeps the record true.
    from tutorrl.evidence.paths import recorded_root

    assert not record.predicate.checkpoint.root.startswith("/")
    assert recorded_root(record.predicate.checkpoint.root, run) == step.parent.resolve()
    assert record.predicate.run.finished is None
    pub = _checks(record)["publication.engines_answered"]
    assert pub.status == "skipped" and "on_save" in pub.detail
    assert _checks(record)["files.stable"].status == "pass"
    assert verify_evidence(run, digest_of(run)) == []


@pytest.mark.needs_verl
@pytest.mark.slow
def test_on_save_returns_before_hashing_and_records_keep_save_order(build, run, tmp_path, gate):
    cb = build()
    for step in (1, 2, 3):
        make_fsdp_step(tmp_path / "ckpts", step)
        cb.on_save(trainer=Trainer(), global_step=step, checkpoint_dir=f"ckpts/global_step_{step}")
        gate.events.append(f"returned {step}")
    # Every save returned while nothing could be hashed: one snapshot with the
    # worker, the others waiting in the bounded queue, which is now full.
    assert gate.events == ["returned 1", "returned 2", "returned 3"]
    assert _steps(run) == [] and cb._queue.full()
    gate.set()
    cb.wait()
    assert gate.events[3:] == ["hashed 1", "hashed 2", "hashed 3"]
    assert _steps(run) == [1, 2, 3]
    assert [s.predicate.chain.sequence for _, s in read_records(run)] == [1, 2, 3]
    assert verify_evidence(run, digest_of(run)) == []


@pytest.mark.needs_verl
@pytest.mark.slow
def test_the_last_save_waits_for_every_record(build, run, tmp_path, gate):
    cb = build()
    make_fsdp_step(tmp_path / "ckpts", 1)
    cb.on_save(trainer=Trainer(total_training_steps=2), global_step=1, checkpoint_dir="ckpts/global_step_1")
    assert _steps(run) == []
    gate.set()
    make_fsdp_step(tmp_path / "ckpts", 2)
    cb.on_save(trainer=Trainer(total_training_steps=2), global_step=2, checkpoint_dir="ckpts/global_step_2")
    # verl calls nothing after its last save: that save's on_save waited.
    assert _steps(run) == [1, 2]


@pytest.mark.needs_verl
@pytest.mark.slow
def test_a_checkpoint_deleted_while_waiting_is_hashed_as_saved(build, run, tmp_path, gate):
    import shutil

    cb = build()
    step = make_fsdp_step(tmp_path / "ckpts", 1)
    cb.on_save(trainer=Trainer(), global_step=1, checkpoint_dir="ckpts/global_step_1")
    shutil.rmtree(step)  # verl's max_actor_ckpt_to_keep, after a later save
    gate.set()
    cb.wait()
    (record,) = [s for _, s in read_records(run)]
    stable = _checks(record)["files.stable"]
    assert record.predicate.verdict.status != "fail", record.predicate.verdict.checks
    assert stable.status == "pass" and "since removed or replaced" in stable.detail
    assert len(record.predicate.checkpoint.files.resources) > 0


@pytest.mark.needs_verl
@pytest.mark.slow
def test_fail_open_records_the_failure_and_training_goes_on(build, run, tmp_path, gate, capsys):
    cb = build()
    step = make_fsdp_step(tmp_path / "ckpts", 1)
    cb.on_save(trainer=Trainer(), global_step=1, checkpoint_dir="ckpts/global_step_1")
    with open(step / "actor" / "model_world_size_2_rank_0.pt", "ab") as f:
        f.write(b"written after the save was reported")
    gate.set()
    make_fsdp_step(tmp_path / "ckpts", 2)
    cb.on_save(trainer=Trainer(total_training_steps=2), global_step=2, checkpoint_dir="ckpts/global_step_2")
    first, second = [s for _, s in read_records(run)]
    assert first.predicate.verdict.status == "fail" and second.predicate.verdict.status != "fail"
    stable = _checks(first)["files.stable"]
    assert stable.status == "fail" and "actor/model_world_size_2_rank_0.pt" in stable.detail
    assert cb.failures == [f"step 1: evidence/000001.json failed: files.stable ({stable.detail})"]
    assert "training continues" in capsys.readouterr().err


@pytest.mark.needs_verl
@pytest.mark.slow
def test_fail_closed_stops_verl_with_a_message(build, run, tmp_path, gate, monkeypatch):
    monkeypatch.setenv("TUTORRL_EVIDENCE_ON_FAILURE", "stop")
    cb = build()
    step = make_fsdp_step(tmp_path / "ckpts", 1)
    (step / "actor" / "optim_world_size_2_rank_1.pt").unlink()  # a rank's shard never written
    cb.on_save(trainer=Trainer(), global_step=1, checkpoint_dir="ckpts/global_step_1")
    gate.set()
    make_fsdp_step(tmp_path / "ckpts", 2)
    # Found while hashing beside training: the next save stops the run.
    with pytest.raises(EvidenceStopped) as err:
        cb.on_save(trainer=Trainer(), global_step=2, checkpoint_dir="ckpts/global_step_2")
    message = str(err.value)
    assert 'evidence.on_failure = "stop"' in message and "step 1: evidence/000001.json failed" in message
    assert "layout.actor (FSDP: optim_world_size_2_rank_{1}.pt missing)" in message
    (record,) = [s for _, s in read_records(run)]  # recorded, then stopped
    assert record.predicate.verdict.status == "fail"


@pytest.mark.needs_verl
@pytest.mark.slow
def test_fail_closed_at_the_last_save_and_without_a_bundle(build, run, tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORRL_EVIDENCE_ON_FAILURE", "stop")
    cb = build()
    make_fsdp_step(tmp_path / "ckpts", 1, data_pt=False)
    with pytest.raises(EvidenceStopped, match="checkpoint.dataloader_state"):
        cb.on_save(trainer=Trainer(total_training_steps=1), global_step=1, checkpoint_dir="ckpts/global_step_1")
    with pytest.raises(EvidenceStopped, match="could not take the checkpoint's snapshot"):
        cb.on_save(trainer=Trainer(), global_step=2, checkpoint_dir=str(tmp_path / "nope"))
    monkeypatch.delenv("TUTORRL_BUNDLE_DIR")
    with pytest.raises(EvidenceStopped, match="TUTORRL_BUNDLE_DIR is not set"):
        build()
    monkeypatch.setenv("TUTORRL_EVIDENCE_ON_FAILURE", "sometimes")
    with pytest.raises(EvidenceStopped, match="expected one of record, stop"):
        build()


@pytest.mark.needs_verl
@pytest.mark.slow
def test_never_raises_into_the_trainer_by_default(build, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TUTORRL_EVIDENCE_ON_FAILURE", raising=False)
    monkeypatch.delenv("TUTORRL_BUNDLE_DIR", raising=False)
    build().on_save(trainer=None, global_step=1, checkpoint_dir=str(tmp_path))
    assert "TUTORRL_BUNDLE_DIR is not set" in capsys.readouterr().err
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(tmp_path / "no-bundle"))
    build().on_save(trainer=None, global_step=1, checkpoint_dir=str(tmp_path / "nope"))
    assert "could not take the checkpoint's snapshot" in capsys.readouterr().err
    cb = build()
    make_fsdp_step(tmp_path / "ckpts", 1)
    cb.on_save(trainer=None, global_step=1, checkpoint_dir=str(tmp_path / "ckpts" / "global_step_1"))
    cb.wait()  # the bundle is not there: the worker says so and lives on
    assert "could not record evidence" in capsys.readouterr().err
    assert cb._thread.is_alive() and len(cb.failures) == 1


def test_the_compiler_and_the_callback_name_the_same_variable():
    from tutorrl.contract import EVIDENCE_ON_FAILURE_ENV

    assert EVIDENCE_ON_FAILURE_ENV == callback_module.ENV_ON_FAILURE
