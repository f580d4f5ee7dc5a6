"""The in-run publication check, driven through verl 0.9.1's own push.

Real: verl's `CheckpointEngineManager` (its `update_weights`, backend `naive`,
and `sleep_replicas`), verl's `RolloutReplica` base class (its
`server_address`/`server_handle` properties and `sleep`), a local Ray head, the
HTTP client, the records and the chain.

Stand-ins, because no GPU or sglang is here:
- each engine is tutorrl's loopback contract server (sglang's documented
  /model_info and /weights_checker, including snapshot/reset_tensors/compare);
- verl's sglang server actor is `ServerActor`, a Ray actor holding
  `global_steps` as verl's `SGLangHttpServer.set_global_steps` does;
- the actor worker group is `ActorGroup`, whose `update_weights` loads the
  step's tensors into each engine and sets `global_steps` as verl's
  `ServerAdapter.update_weights` does after a push;
- the trainer is a namespace with the attributes verl's v1 trainer has, and
  the push is called exactly as `trainer_sync.py:38` calls it (verl's trainer
  module itself needs TransferQueue, not installed here).
"""

from __future__ import annotations

import types

import pytest

from evidence_contract_server import ContractServer
from evidence_helpers import make_bundle, make_fsdp_step, model_tensors
from tutorrl.evidence import publication
from tutorrl.evidence.bundle import load_bundle
from tutorrl.evidence.record import read_records, record_checkpoint
from tutorrl.evidence.tensorhash import fp32_to_bf16_bytes

pytestmark = pytest.mark.slow


def served(scale):
    return {n: fp32_to_bf16_bytes(d) if t == "F32" else d for n, (t, d, _) in model_tensors(scale).items()}


@pytest.fixture(scope="module")
def ray_local():
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def verl_parts(ray_local):
    from verl.checkpoint_engine.base import CheckpointEngineManager
    from verl.workers.config import CheckpointEngineConfig, RolloutConfig
    from verl.workers.rollout.replica import RolloutReplica

    @ray_local.remote
    class ServerActor:
        def __init__(self):
            self.global_steps = None  # as SGLangHttpServer.__init__

        def set_global_steps(self, global_steps):
            self.global_steps = global_steps

        def sleep(self):
            return None

    class Replica(RolloutReplica):
        """verl's replica base; launching is the stand-in part: an address and an actor."""

        def __init__(self, rank, server):
            cfg = RolloutConfig(name="sglang", tensor_model_parallel_size=1, data_parallel_size=1,
                                pipeline_model_parallel_size=1)
            super().__init__(rank, cfg, None, gpus_per_node=1)
            self.engine = server
            self.actor = ServerActor.remote()
            self.servers = [self.actor]

        async def launch_servers(self):
            self._server_address = self.engine.url.removeprefix("http://")
            self._server_handle = self.actor

    class ActorGroup:
        """What verl's actor worker group does on a naive push, seen from the engines."""

        def __init__(self, replicas, tensors_for):
            self.replicas, self.tensors_for, self.skip = replicas, tensors_for, set()
            self.step_offset = 0

        def update_weights(self, global_steps=None, mode="naive"):
            refs = []
            for r in self.replicas:
                if r.replica_rank in self.skip:
                    continue
                if global_steps is not None:
                    r.engine.load(self.tensors_for(global_steps))
                    refs.append(r.actor.set_global_steps.remote(global_steps + self.step_offset))
            return refs

    def make(servers, tensors_for):
        import asyncio

        replicas = [Replica(i, s) for i, s in enumerate(servers)]
        for r in replicas:
            asyncio.run(r.launch_servers())
        group = ActorGroup(replicas, tensors_for)
        manager = CheckpointEngineManager(config=CheckpointEngineConfig(backend="naive"), actor_wg=group,
                                          replicas=replicas)
        trainer = types.SimpleNamespace(
            trainer_mode="sync", checkpoint_manager=manager, global_steps=0,
            config=types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(
                rollout=types.SimpleNamespace(name="sglang"))))
        return trainer, group

    return make


def on_step_end(trainer):
    # verl 0.9.1 trainer_sync.py:35-38 (PPOTrainerSync.on_step_end), minus its timer.
    trainer.checkpoint_manager.update_weights(trainer.global_steps)


class Recorder:
    """The callback's part: record the checkpoint with what was observed."""

    def __init__(self, bundle, tmp_path):
        self.bundle, self.root = bundle, tmp_path / "ckpts"

    def save(self, trainer, step, control=False):
        step_dir = make_fsdp_step(self.root, step, scale=step)

        def deliver(observed):
            record_checkpoint(load_bundle(self.bundle), "r", step_dir, source="callback", finished=None,
                              progress=False, observed=observed)

        return publication.check_after_push(trainer, step, deliver, control=control, timeout=30)

    def last(self):
        _, s = read_records(self.bundle)[-1]
        return s, {c.id: c for c in s.predicate.verdict.checks}


def run_steps(trainer, rec, steps, control=False, before_push=None):
    for step in steps:
        trainer.global_steps = step
        assert rec.save(trainer, step, control=control) is None
        if before_push:
            before_push(step)
        on_step_end(trainer)


def test_each_checkpoint_is_read_after_the_push_that_serves_it(verl_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    with ContractServer(served(1), shape="0.5.12") as a, ContractServer(served(1), shape="0.5.12") as b:
        trainer, _ = verl_parts([a, b], served)
        on_step_end(trainer)  # on_init_end's push of step 0 (trainer_sync.py:31-33)
        counts = []
        run_steps(trainer, rec, [1, 2, 3], before_push=lambda s: counts.append(
            (len(read_records(bundle)), a.requests.count("checksum"))))
        # At each save nothing is recorded yet, and no engine is asked for checksums
        # (they sleep then): one record and one reading per published step, after its push.
        assert counts == [(0, 0), (1, 1), (2, 2)]
        assert len(read_records(bundle)) == 3 and a.requests.count("checksum") == 3
    s, checks = rec.last()
    status = {k: c.status for k, c in checks.items()}
    assert status["publication.matches_checkpoint"] == "pass"
    assert status["publication.version_step"] == "pass", checks["publication.version_step"].detail
    assert status["publication.engines_stable"] == "pass"
    assert status["publication.roster_stable"] == "pass"
    assert status["publication.changed_since_previous"] == "pass"
    assert status["publication.tp_coverage"] == "pass"  # tp_size 1 under 0.5.12: the one rank is all
    assert status["publication.control"] == "skipped" and "publication_control" in checks["publication.control"].detail
    run = s.predicate.publication.in_run
    assert run.global_step == 3 and run.previous_step == 2 and run.pushes == 1
    assert [v.global_steps for v in run.before] == [2, 2] and [v.global_steps for v in run.after] == [3, 3]
    assert [v.global_steps for v in run.baseline] == [0, 0]
    assert run.trainer == "v1:sync" and "update_weights(global_steps=3)" in run.moment
    first = read_records(bundle)[0][1].predicate
    assert {c.id: c.status for c in first.verdict.checks}["publication.roster_stable"] == "skipped"


def test_an_engine_left_behind_fails(verl_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    with ContractServer(served(1)) as a, ContractServer(served(1)) as b:
        trainer, group = verl_parts([a, b], served)
        on_step_end(trainer)
        run_steps(trainer, rec, [1])
        group.skip = {1}  # the push of step 2 never reaches engine 1
        run_steps(trainer, rec, [2])
    s, checks = rec.last()
    status = {k: c.status for k, c in checks.items()}
    assert status["publication.version_step"] == "fail" and b.url in checks["publication.version_step"].detail
    assert status["publication.matches_checkpoint"] == "fail"
    assert status["publication.replicas_agree"] == "fail"
    assert s.predicate.verdict.status == "fail"


def test_versions_must_move_by_exactly_one(verl_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    with ContractServer(served(1)) as a:
        trainer, group = verl_parts([a], served)
        on_step_end(trainer)
        run_steps(trainer, rec, [1])
        group.step_offset = 1  # the engine reports step 3 for the push of step 2
        run_steps(trainer, rec, [2])
    _, checks = rec.last()
    assert checks["publication.version_step"].status == "fail"
    assert "global_steps 3 after the push of step 2" in checks["publication.version_step"].detail


def test_a_changed_roster_and_an_unchanged_publication_fail(verl_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    with ContractServer(served(1)) as a:
        tensors = {0: served(0), 1: served(1), 2: {**served(1), "extra.weight": b"\0" * 8}, 3: {**served(1), "extra.weight": b"\0" * 8}}
        trainer, _ = verl_parts([a], lambda step: tensors[step])
        on_step_end(trainer)
        run_steps(trainer, rec, [1, 2])
        _, checks = rec.last()
        assert checks["publication.roster_stable"].status == "fail" and "extra.weight" in checks["publication.roster_stable"].detail
        run_steps(trainer, rec, [3])  # serves exactly what step 2 served
        _, checks = rec.last()
        assert checks["publication.roster_stable"].status == "pass"
        assert checks["publication.changed_since_previous"].status == "fail"


def test_sensitivity_control(verl_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    with ContractServer(served(1)) as a, ContractServer(served(1), blind_reset=True) as blind:
        trainer, _ = verl_parts([a], served)
        on_step_end(trainer)
        run_steps(trainer, rec, [1], control=True)
        s, checks = rec.last()
        ctl = s.predicate.publication.in_run.control
        assert checks["publication.control"].status == "pass", checks["publication.control"].detail
        assert ctl.snapshot_ok and ctl.compare_ok and ctl.republished_equal and ctl.reset_changed == 3
        assert [v.global_steps for v in ctl.republished_versions] == [1]
        assert a.requests[-5:] == ["snapshot", "reset_tensors", "checksum", "compare", "checksum"]
        # After the control the engine serves the checkpoint again.
        assert a.tensors == served(1)

        trainer, _ = verl_parts([blind], served)
        on_step_end(trainer)
        run_steps(trainer, rec, [1], control=True)
        _, checks = rec.last()
        assert checks["publication.control"].status == "fail" and "blind" in checks["publication.control"].detail


def test_control_setting_reaches_the_bundle(tmp_path):
    import tomllib

    import tomli_w

    from evidence_helpers import EXAMPLE_SPEC
    from tutorrl.compiler import compile_bytes, write_bundle

    doc = tomllib.loads(EXAMPLE_SPEC.read_text(encoding="utf-8"))
    assert load_bundle(write_bundle(compile_bytes(tomli_w.dumps(doc).encode(), "a.toml"), tmp_path / "a").path
                       ).publication_control is False
    doc["evidence"] = {"publication_control": True}
    path = write_bundle(compile_bytes(tomli_w.dumps(doc).encode(), "b.toml"), tmp_path / "b").path
    assert load_bundle(path).publication_control is True
    assert "publication_control = true" in (path / "spec.toml").read_text()


def test_tutorrl_callback_records_after_the_push(verl_parts, tmp_path, monkeypatch):
    from tutorrl.evidence.callback import EvidenceCallback

    bundle = make_bundle(tmp_path / "bundles")
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(bundle))
    cb = EvidenceCallback(config=None)
    with ContractServer(served(4)) as a:
        trainer, _ = verl_parts([a], served)
        trainer.global_steps = 3
        on_step_end(trainer)
        trainer.global_steps = 4
        step_dir = make_fsdp_step(tmp_path / "ckpts", 4, scale=4)
        cb.on_save(trainer=trainer, global_step=4, checkpoint_dir=str(step_dir), async_save=False)
        assert read_records(bundle) == []
        on_step_end(trainer)
    (rec,) = [s for _, s in read_records(bundle)]
    assert rec.predicate.run.source == "callback" and rec.predicate.publication.in_run.global_step == 4
    checks = {c.id: c.status for c in rec.predicate.verdict.checks}
    assert checks["publication.matches_checkpoint"] == "pass" and checks["publication.version_step"] == "pass"
