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
  module itself needs TransferQueue, not installed here); the bootstrap reading
  is armed as the callback arms it and made in the manager's first
  `sleep_replicas()`, as `trainer_base.py:386-392` calls it.

LoRA runs drive verl's real `ActorRolloutRefWorker.update_weights` (the
adapter-only branch) on each replica (`_lora_group`).
"""

from __future__ import annotations

import types

import pytest

from evidence_contract_server import ContractServer
from evidence_helpers import make_bundle, make_fsdp_step, model_tensors, write_safetensors
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

    def make(servers, tensors_for, *, config=None, group_cls=None, bootstrap=False):
        import asyncio

        replicas = [Replica(i, s) for i, s in enumerate(servers)]
        for r in replicas:
            asyncio.run(r.launch_servers())
        group = (group_cls or ActorGroup)(replicas, tensors_for)
        manager = CheckpointEngineManager(config=CheckpointEngineConfig(backend="naive"), actor_wg=group,
                                          replicas=replicas)
        trainer = types.SimpleNamespace(
            trainer_mode="sync", checkpoint_manager=manager, global_steps=0,
            config=config if config is not None else types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(
                rollout=types.SimpleNamespace(name="sglang"))))
        if bootstrap:
            # trainer_base.py:386-392: the manager is built and its replicas put to sleep at once.
            manager.sleep_replicas()
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


@pytest.mark.needs_ray
@pytest.mark.needs_verl
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


@pytest.mark.needs_ray
@pytest.mark.needs_verl
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


@pytest.mark.needs_ray
@pytest.mark.needs_verl
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


@pytest.mark.needs_ray
@pytest.mark.needs_verl
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


@pytest.mark.needs_ray
@pytest.mark.needs_verl
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
        # After the control the engine serves the checkpoint again, and (0.5.21+) holds no snapshot.
        assert a.tensors == served(1) and not a.snapshot_held

        trainer, _ = verl_parts([blind], served)
        on_step_end(trainer)
        run_steps(trainer, rec, [1], control=True)
        _, checks = rec.last()
        assert checks["publication.control"].status == "fail" and "blind" in checks["publication.control"].detail


def test_control_setting_reaches_the_bundle(tmp_path):
    import support
    from evidence_helpers import EXAMPLE_SPEC
    from tutorrl.compiler import compile_bytes, write_bundle

    doc = support.example_spec(EXAMPLE_SPEC)
    assert load_bundle(write_bundle(compile_bytes(support.spec_toml(doc).encode(), "a.toml"), tmp_path / "a").path
                       ).publication_control is False
    text = support.spec_toml(doc, evidence={"publication_control": True})
    path = write_bundle(compile_bytes(text.encode(), "b.toml"), tmp_path / "b").path
    assert load_bundle(path).publication_control is True
    assert "publication_control = true" in (path / "spec.toml").read_text()


@pytest.mark.needs_ray
@pytest.mark.needs_verl
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


# -- The bootstrap, LoRA, stop at the push, release-dependent refusals ---------------------------------------------

def verl_config(*, rollout="sglang", lora_rank=0, mode="sync", model=None):
    """The slice of verl 0.9.1's trainer config (`_generated_ppo_trainer.yaml`) publication reads."""
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "trainer": {"use_v1": True, "v1": {"trainer_mode": mode}},
        "actor_rollout_ref": {"rollout": {"name": rollout},
                              "model": {"path": model, "lora_rank": lora_rank, "lora": {"merge": False, "rank": 0}}}})


@pytest.fixture
def armed():
    """publication.arm as the callback calls it when verl builds it; disarmed afterwards."""
    yield lambda config: publication.arm(config, timeout=30)
    publication.disarm()


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_the_first_publication_is_checked_against_the_bootstrap(verl_parts, armed, tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    with ContractServer(served(0)) as a:
        assert armed(verl_config()) is None
        trainer, _ = verl_parts([a], served, config=verl_config(), bootstrap=True)
        # Read before verl's first push: versions and checksums of what the engine loaded.
        assert a.requests == ["checksum"]
        on_step_end(trainer)  # on_init_end's push of step 0: the untrained weights
        run_steps(trainer, rec, [1])
    s, checks = rec.last()
    assert checks["publication.changed_from_bootstrap"].status == "pass", checks["publication.changed_from_bootstrap"]
    assert "before verl's first push" in checks["publication.changed_from_bootstrap"].detail
    assert checks["publication.engines_stable"].detail == "the same 1 engine(s) as before the first push"
    run = s.predicate.publication.in_run
    assert [v.global_steps for v in run.baseline] == [None] and [v.weight_version for v in run.baseline] == ["default"]
    assert [v.global_steps for v in run.after] == [1] and run.pushes == 2  # step 0's push and step 1's

    # A "publication" that leaves the engines serving the model path's weights fails, naming the engine.
    bundle = make_bundle(tmp_path / "bundles2")
    rec = Recorder(bundle, tmp_path / "2")
    with ContractServer(served(0)) as a:
        trainer, _ = verl_parts([a], lambda step: served(0), config=verl_config(), bootstrap=True)
        on_step_end(trainer)
        run_steps(trainer, rec, [1])
    s, checks = rec.last()
    assert checks["publication.changed_from_bootstrap"].status == "fail" and a.url in checks[
        "publication.changed_from_bootstrap"].detail
    assert s.predicate.verdict.status == "fail"


def _model_folder(path, scale):
    """A model path as verl loads it: its safetensors (the engine serves them as bf16)."""
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    write_safetensors(path / "model.safetensors", model_tensors(scale))
    return path


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_the_first_sync_must_deliver_the_model_path_as_the_seeds_compare_does(verl_parts, armed, tmp_path):
    """verl's first sync (on_init_end, global_steps 0) pushes the actor as loaded: the engines must then
    serve the model path's weights, rebuilt as the engine loads them. Recorded with the first publication."""
    cid = publication.FIRST_SYNC
    model = _model_folder(tmp_path / "model", 0)

    def first_record(tensors_for, config, start=0, tag="a"):
        bundle = make_bundle(tmp_path / f"bundles-{tag}")
        rec = Recorder(bundle, tmp_path / tag)
        with ContractServer(served(0)) as a:
            assert armed(config) is None
            trainer, _ = verl_parts([a], tensors_for, config=config, bootstrap=True)
            trainer.global_steps = start
            on_step_end(trainer)  # verl's first sync
            run_steps(trainer, rec, [start + 1])
            run_steps(trainer, rec, [start + 2])
        records = [s for _, s in read_records(bundle)]
        return [{c.id: c for c in s.predicate.verdict.checks} for s in records], records

    (first, second), records = first_record(served, verl_config(model=str(model)))
    assert first[cid].status == "pass", first[cid]
    assert "equal the model path's weights" in first[cid].detail
    assert cid not in second  # checked once, with the first publication

    # A first sync that delivers other weights than the actor was loaded with fails, and so does its record.
    (first, _), records = first_record(lambda step: served(7 if step == 0 else step), verl_config(model=str(model)),
                                      tag="b")
    assert first[cid].status == "fail" and "did not deliver the actor as it was loaded" in first[cid].detail
    assert records[0].predicate.verdict.status == "fail"

    # Nothing local to rebuild from, or a resumed run (the first sync pushes the resumed weights): said, not judged.
    (first, _), _ = first_record(served, verl_config(model="Qwen/Qwen2.5-0.5B-Instruct"), tag="c")
    assert first[cid].status == "skipped" and "not a local folder of safetensors" in first[cid].detail
    (first, _), _ = first_record(served, verl_config(model=str(model)), start=3, tag="d")
    assert first[cid].status == "skipped" and "resumed" in first[cid].detail


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_without_the_bootstrap_the_check_says_why(verl_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    with ContractServer(served(0)) as a:
        trainer, _ = verl_parts([a], served)  # never armed: the watch begins at the first save
        on_step_end(trainer)
        run_steps(trainer, rec, [1])
    _, checks = rec.last()
    assert checks["publication.changed_from_bootstrap"].status == "skipped"
    assert "not armed" in checks["publication.changed_from_bootstrap"].detail


def _lora_group(ray_local):
    """verl's real `ActorRolloutRefWorker.update_weights` (engine_workers.py:733-826) on each replica.

    Real: the branch that decides what is pushed (peft_merge false, base_sync_done:
    base then adapter on the first sync, the adapter alone after). Stand-ins: the
    training engine's `get_per_tensor_param` (a PEFT model's base or adapter
    tensors) and the rollout, which does what verl's SGLang ServerAdapter does
    with them (sglang_rollout.py:338-390): the adapter is sent to the engine as
    `load_lora_adapter_from_tensor` (an HTTP request here), the base loaded into
    its served tensors, then `set_global_steps`. Only the CUDA calls verl makes
    around the branch (empty_cache, synchronize, memory logging) are no-ops:
    there is no GPU.
    """
    import asyncio
    import json
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    import verl.workers.engine_workers as ew

    worker_update = ew.ActorRolloutRefWorker.update_weights.__wrapped__

    class Conf(dict):
        __getattr__ = dict.__getitem__

    class TrainingEngine:
        is_param_offload_enabled = False

        def __init__(self, group):
            self.group = group

        def get_per_tensor_param(self, layered_summon=False, base_sync_done=False):
            peft = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"]}
            if not base_sync_done:  # the frozen base, as the engine loaded it from the model path
                return iter(served(0).items()), peft
            step = self.group.step
            return iter({"model.layers.0.self_attn.q_proj.lora_A.weight": bytes([step % 256]) * 32,
                         "model.layers.0.self_attn.q_proj.lora_B.weight": bytes([(step * 7) % 256]) * 32}.items()), peft

    class Rollout:
        def __init__(self, replica):
            self.replica, self.sleep_level = replica, 2

        async def resume(self, tags):
            return None

        async def update_weights(self, weights, global_steps=None, **kwargs):
            peft_config, base_sync_done = kwargs.get("peft_config"), kwargs.get("base_sync_done", False)
            named = dict(weights)
            if peft_config and base_sync_done:
                body = json.dumps({"lora_name": "verl_policy", "config_dict": peft_config,
                                   "tensors": {n: b.hex() for n, b in named.items()}}).encode()
                req = urllib.request.Request(self.replica.engine.url + "/load_lora_adapter_from_tensor", data=body,
                                             method="POST", headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=30) as resp:
                    assert resp.status == 200
            else:
                self.replica.engine.load(named)
            if global_steps is not None:
                ray_local.get(self.replica.actor.set_global_steps.remote(global_steps))

    class LoraGroup:
        def __init__(self, replicas, tensors_for):
            self.replicas, self.step = replicas, 0
            engine = TrainingEngine(self)
            self.workers = [types.SimpleNamespace(
                config=Conf(rollout=Conf(name="sglang", free_cache_engine=False,
                                         checkpoint_engine=Conf(backend="naive"))),
                rollout=Rollout(r), actor=types.SimpleNamespace(engine=engine), peft_merge=False,
                base_sync_done=False, layered_summon=False) for r in replicas]
            self.pushed: list[list[str]] = []

        def update_weights(self, global_steps=None, mode="naive"):
            self.step = global_steps if global_steps is not None else self.step
            for w in self.workers:
                before = len(w.rollout.replica.engine.paths)
                # In verl this runs in the worker's own Ray process and event loop; here, its own thread.
                with ThreadPoolExecutor(1) as pool:
                    pool.submit(asyncio.run, worker_update(w, global_steps, mode=mode)).result()
                self.pushed.append([p for _, p in w.rollout.replica.engine.paths[before:]])
            return []

    return LoraGroup


@pytest.fixture
def no_cuda(monkeypatch):
    import verl.workers.engine_workers as ew

    monkeypatch.setattr(ew, "get_torch_device", lambda: types.SimpleNamespace(empty_cache=lambda: None,
                                                                            synchronize=lambda: None))
    monkeypatch.setattr(ew, "set_expandable_segments", lambda enabled: None)
    monkeypatch.setattr(ew, "log_gpu_memory_usage", lambda *a, **k: None)


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_lora_publications_prove_the_base_and_say_the_adapter_is_not_verifiable(verl_parts, armed, ray_local, no_cuda,
                                                                                 tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    config = verl_config(lora_rank=8)
    # verl's default rollout.load_format is "dummy": sglang starts on random weights, and verl's first
    # sync is what loads the base.
    dummy = {n: bytes((x + 1) % 256 for x in b) for n, b in served(0).items()}
    assert dummy != served(0)
    with ContractServer(dummy, shape="0.5.13-0.5.20") as a:
        assert armed(config) is None
        trainer, group = verl_parts([a], served, config=config, group_cls=_lora_group(ray_local), bootstrap=True)
        on_step_end(trainer)  # the first sync: base, then adapter
        adapters = [dict(a.adapter)]
        stops = []
        for step in (1, 2, 3):
            trainer.global_steps = step
            assert publication.check_after_push(trainer, step, rec_deliver(rec, step), stop=True, timeout=30) is None
            try:
                on_step_end(trainer)  # under "stop" a failed check would raise here
            except publication.EvidenceStopped as exc:
                stops.append(str(exc))
            adapters.append(dict(a.adapter))
    # verl's own branch pushed base + adapter once, then the adapter alone -- and the adapter did change.
    assert group.pushed[0] == ["/load_lora_adapter_from_tensor"] and group.pushed[1:] == [
        ["/load_lora_adapter_from_tensor"]] * 3
    assert len({tuple(sorted(x.items())) for x in adapters}) == 4
    assert a.tensors == served(0)  # the served base: what sglang loaded and verl pushed first
    assert stops == []
    records = [s for _, s in read_records(bundle)]
    assert len(records) == 3
    for s in records:
        checks = {c.id: c for c in s.predicate.verdict.checks}
        assert s.predicate.verdict.status != "fail", [(c.id, c.detail) for c in checks.values() if c.status == "fail"]
        assert checks["publication.base_unchanged"].status == "pass", checks["publication.base_unchanged"].detail
        assert "verl's first sync (global_steps=0)" in checks["publication.base_unchanged"].detail
        assert checks["publication.adapter"].status == "skipped"
        assert checks["publication.adapter"].detail.startswith("adapter not verifiable")
        assert "load_lora_adapter_from_tensor" in checks["publication.adapter"].detail
        assert "publication.changed_from_bootstrap" not in checks
    last = {c.id: c for c in records[-1].predicate.verdict.checks}
    assert last["publication.changed_since_previous"].status == "skipped"
    assert "adapter not verifiable" in last["publication.changed_since_previous"].detail
    assert last["publication.version_step"].status == "pass"


def rec_deliver(rec, step):
    step_dir = make_fsdp_step(rec.root, step, scale=step)

    def deliver(observed):
        record_checkpoint(load_bundle(rec.bundle), "r", step_dir, source="callback", finished=None,
                          progress=False, observed=observed)

    return deliver


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_lora_base_changed_fails_and_the_control_is_refused(verl_parts, armed, ray_local, no_cuda, tmp_path):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    config = verl_config(lora_rank=8)
    with ContractServer(served(0)) as a:
        armed(config)
        trainer, _ = verl_parts([a], served, config=config, group_cls=_lora_group(ray_local), bootstrap=True)
        on_step_end(trainer)
        trainer.global_steps = 1
        assert publication.check_after_push(trainer, 1, rec_deliver(rec, 1), control=True, timeout=30) is None
        on_step_end(trainer)
        # The control never touched the engine: no snapshot, no reset of the base.
        assert "reset_tensors" not in a.requests and "snapshot" not in a.requests and a.tensors == served(0)
        _, checks = rec.last()
        assert checks["publication.control"].status == "skipped"
        assert checks["publication.control"].detail.startswith("refused: LoRA run")
        # Something else rewrote the base behind verl's back: the frozen base is no longer what was loaded.
        a.load(served(5))
        trainer.global_steps = 2
        publication.check_after_push(trainer, 2, rec_deliver(rec, 2), timeout=30)
        on_step_end(trainer)
    _, checks = rec.last()
    assert checks["publication.base_unchanged"].status == "fail"
    assert "differ from the base verl pushed at verl's first sync" in checks["publication.base_unchanged"].detail


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_stop_raises_out_of_the_push_whose_check_failed(verl_parts, tmp_path, monkeypatch):
    from tutorrl.evidence.callback import EvidenceCallback, EvidenceStopped

    bundle = make_bundle(tmp_path / "bundles")
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(bundle))
    monkeypatch.setenv("TUTORRL_EVIDENCE_ON_FAILURE", "stop")
    config = verl_config()
    cb = EvidenceCallback(config=config)  # as verl builds it, before the manager: arms the bootstrap
    try:
        with ContractServer(served(0)) as a:
            trainer, _ = verl_parts([a], lambda step: served(0), config=config, bootstrap=True)
            assert a.requests == ["checksum"]
            on_step_end(trainer)
            trainer.global_steps = 1
            step_dir = make_fsdp_step(tmp_path / "ckpts", 1, scale=1)
            cb.on_save(trainer=trainer, global_step=1, checkpoint_dir=str(step_dir), async_save=False)
            with pytest.raises(EvidenceStopped) as err:
                on_step_end(trainer)  # the push whose publication changed nothing
    finally:
        publication.disarm()
    msg = str(err.value)
    assert msg.startswith('tutorrl evidence: stopping the run (evidence.on_failure = "stop")')
    assert "publication.changed_from_bootstrap" in msg and a.url in msg and "push of step 1" in msg
    # The record saying so was written before the push raised.
    (rec,) = [s for _, s in read_records(bundle)]
    checks = {c.id: c.status for c in rec.predicate.verdict.checks}
    assert rec.predicate.verdict.status == "fail" and checks["publication.changed_from_bootstrap"] == "fail"


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_stop_raises_out_of_the_push_whose_record_finds_the_served_weights_are_not_the_checkpoint(
        verl_parts, tmp_path, monkeypatch):
    """The engine's own checks all pass (it changed, versions moved), but what it serves is not the checkpoint
    saved for that step: only the record can see that, and under "stop" the push waits for it and raises."""
    from tutorrl.evidence.callback import EvidenceCallback, EvidenceStopped

    bundle = make_bundle(tmp_path / "bundles")
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(bundle))
    monkeypatch.setenv("TUTORRL_EVIDENCE_ON_FAILURE", "stop")
    config = verl_config()
    cb = EvidenceCallback(config=config)
    try:
        with ContractServer(served(0)) as a:
            trainer, _ = verl_parts([a], lambda step: served(step + 10), config=config, bootstrap=True)
            on_step_end(trainer)
            trainer.global_steps = 1
            step_dir = make_fsdp_step(tmp_path / "ckpts", 1, scale=1)  # the engine will serve scale 11
            cb.on_save(trainer=trainer, global_step=1, checkpoint_dir=str(step_dir), async_save=False)
            with pytest.raises(EvidenceStopped) as err:
                on_step_end(trainer)
    finally:
        publication.disarm()
    msg = str(err.value)
    assert "publication failed at the push of step 1" in msg and "evidence/000001.json failed" in msg
    assert "publication.matches_checkpoint" in msg
    (rec,) = [s for _, s in read_records(bundle)]
    checks = {c.id: c.status for c in rec.predicate.verdict.checks}
    assert checks["publication.matches_checkpoint"] == "fail" and checks["publication.changed_from_bootstrap"] == "pass"
    # Raised once: the next save finds nothing more to raise.
    cb._raise_if_failed()


@pytest.mark.needs_ray
@pytest.mark.needs_verl
@pytest.mark.parametrize("shape", ["0.5.12", "0.5.13-0.5.20"])
def test_the_control_is_refused_where_compare_keeps_the_snapshot(verl_parts, tmp_path, shape):
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)
    with ContractServer(served(1), shape=shape) as a:
        trainer, _ = verl_parts([a], served)
        on_step_end(trainer)
        run_steps(trainer, rec, [1], control=True)
        assert "snapshot" not in a.requests and not a.snapshot_held
    _, checks = rec.last()
    detail = checks["publication.control"].detail
    assert checks["publication.control"].status == "skipped" and detail.startswith("refused: sglang")
    assert "never frees" in detail and "64 GB for a 32B model" in detail


def test_a_vllm_run_says_its_served_weights_were_not_checked(tmp_path, monkeypatch):
    from tutorrl.evidence.callback import EvidenceCallback

    bundle = make_bundle(tmp_path / "bundles")
    monkeypatch.setenv("TUTORRL_BUNDLE_DIR", str(bundle))
    cb = EvidenceCallback(config=verl_config(rollout="vllm"))
    trainer = types.SimpleNamespace(trainer_mode="sync", total_training_steps=1, config=verl_config(rollout="vllm"))
    step_dir = make_fsdp_step(tmp_path / "ckpts", 1, scale=1)
    cb.on_save(trainer=trainer, global_step=1, checkpoint_dir=str(step_dir), async_save=False)
    (rec,) = [s for _, s in read_records(bundle)]
    (check,) = [c for c in rec.predicate.verdict.checks if c.id == "publication.engines_answered"]
    assert check.status == "skipped" and check.detail.startswith("served weights not checked: rollout 'vllm'")
    assert "no endpoint that reports what it serves" in check.detail and "--engine" not in check.detail


def test_publication_control_with_lora_is_refused_at_compile_time():
    import support
    from evidence_helpers import EXAMPLE_SPEC
    from tutorrl.compiler import compile_bytes
    from tutorrl.errors import SpecError

    doc = support.spec_doc(support.example_spec(EXAMPLE_SPEC), evidence={"publication_control": True},
                           model={"lora": {"rank": 8, "alpha": 16}})
    with pytest.raises(SpecError) as err:
        compile_bytes(support.spec_toml(doc).encode(), "lora.toml")
    text = str(err.value) + "".join(str(p) for p in getattr(err.value, "problems", []))
    assert "evidence.publication_control" in text and "LoRA" in text
    assert "engine_workers.py:787-805" in text and "/weights_checker" in text
    # rank 0 trains the full model: the control is fine
    compile_bytes(support.spec_toml(doc, model={"lora": {"rank": 0}}).encode(), "full.toml")


def test_a_lora_run_on_sglang_is_told_at_compile_time_that_its_adapter_is_not_verifiable():
    import support
    from evidence_helpers import EXAMPLE_SPEC
    from tutorrl.compiler import compile_bytes

    doc = support.spec_doc(support.example_spec(EXAMPLE_SPEC), model={"lora": {"rank": 8, "alpha": 16}},
                           trainer={"evidence_callback": True}, rollout={"engine": "sglang"})
    warned = [w.render() for w in compile_bytes(support.spec_toml(doc).encode(), "lora.toml").warnings]
    assert any("model.lora.rank" in w and "adapter not verifiable" in w for w in warned), warned
    # the full model: every pushed tensor is checked, nothing to say
    full = support.spec_toml(doc, model={"lora": {"rank": 0}})
    warned = [w.render() for w in compile_bytes(full.encode(), "full.toml").warnings]
    assert not any("adapter" in w for w in warned), warned


def test_publication_control_is_warned_about_the_sglang_releases_that_keep_the_snapshot():
    import support
    from evidence_helpers import EXAMPLE_SPEC
    from tutorrl.compiler import compile_bytes

    doc = support.example_spec(EXAMPLE_SPEC)
    assert not [w for w in compile_bytes(support.spec_toml(doc).encode(), "a.toml").warnings
                if w.key == "evidence.publication_control"]
    text = support.spec_toml(doc, evidence={"publication_control": True})
    (warning,) = [w for w in compile_bytes(text.encode(), "b.toml").warnings
                  if w.key == "evidence.publication_control"]
    assert "0.5.21+" in warning.message and "64 GB" in warning.message and "refuses the control" in warning.message


@pytest.mark.needs_ray
@pytest.mark.needs_verl
def test_sglang_0_5_12_kernel_failure_is_said_not_failed(verl_parts, tmp_path):
    # verl 0.9.1's own pin: a tensor of 2+ dimensions whose last one is not a multiple of 4
    # bytes fails the whole checksum call. Nothing can be read; nothing is shown wrong either.
    bundle = make_bundle(tmp_path / "bundles")
    rec = Recorder(bundle, tmp_path)

    def tensors(step):
        return {**served(step), "model.odd.weight": bytes([step]) * 30}

    with ContractServer(tensors(0), shape="0.5.12", dims={"model.odd.weight": (5, 3)}) as a:
        trainer, _ = verl_parts([a], tensors)
        on_step_end(trainer)
        for step in (1, 2):
            trainer.global_steps = step
            step_dir = make_fsdp_step(rec.root, step, scale=step)
            assert publication.check_after_push(trainer, step, lambda o, d=step_dir: record_checkpoint(
                load_bundle(bundle), "r", d, source="callback", finished=None, progress=False, observed=o),
                stop=True, timeout=30) is None
            on_step_end(trainer)  # no EvidenceStopped: no check failed
    s, checks = rec.last()
    assert checks["publication.engines_answered"].status == "skipped"
    assert "fixed in 0.5.13" in checks["publication.engines_answered"].detail
    assert s.predicate.verdict.status == "partial", [(c.id, c.detail) for c in checks.values() if c.status == "fail"]


def test_evidence_records_are_the_owners_alone(tmp_path):
    import os

    bundle = make_bundle(tmp_path / "bundles")
    step_dir = make_fsdp_step(tmp_path / "ckpts", 1, scale=1)
    path = record_checkpoint(load_bundle(bundle), "r", step_dir, source="manual", finished=None, progress=False)
    assert os.stat(path).st_mode & 0o777 == 0o600
    # HEAD too, and from creation: the chain writes each file 0600 before it links it in.
    assert os.stat(path.parent / "HEAD").st_mode & 0o777 == 0o600
