"""Reading the rollout engines inside the run, right after the push that serves a checkpoint.

Where and when, in verl 0.9.1 (file:line in the released wheel):

- `trainer/ppo/v1/trainer_base.py:485-487`: each step saves (`_save_checkpoint`,
  which calls our `on_save` at :1027) and only then runs `on_step_end`;
  `trainer_sync.py:35-38` and `trainer_colocate_async.py:37-40` push the step's
  weights there with `self.checkpoint_manager.update_weights(self.global_steps)`.
  So at `on_save` no engine serves the checkpoint yet -- and the engines sleep
  (`on_sample_end`, `trainer_sync.py:40-42`: weights and KV cache released), so
  nothing may ask them for checksums then.
- The push is `CheckpointEngineManager.update_weights` (`checkpoint_engine/base.py:510`,
  backend forced to `naive` in `trainer_base.py:382`); `trainer.checkpoint_manager`
  (`trainer_base.py:383`) holds the rollout replicas (`base.py:420`), each with
  its HTTP `server_address` "host:port" (`workers/rollout/replica.py:247`) and
  its server actor (`replica.py:252`).
- After a push that carries a step, verl's rollout sets the server actor's
  `global_steps` (`workers/rollout/sglang_rollout/sglang_rollout.py:388-390`):
  verl's own version of the served weights. sglang's `weight_version` is never
  set by verl 0.9.1 and stays what the engine started with.

The bootstrap, as miles reads it before its first publication: the trainer
builds the manager and at once puts the replicas to sleep
(`trainer_base.py:386-392`, weights released), and the first push is
`on_init_end`'s (`trainer_sync.py:31-33`). So `arm(config)` (called when verl
builds the callback, `trainer_base.py:122`, before the manager exists) makes
the first `sleep_replicas()` of the manager read every engine -- versions and
checksums of the weights sglang loaded from the model path -- and wrap
`update_weights` there, before verl's first push. `check_after_push` (called
from `on_save`, which gets `trainer=`) then queues the record of the next
push; after every push the wrapper reads every engine's versions, and after
the push that serves a saved checkpoint it reads every engine's checksums and
hands them to the recorder. Where the bootstrap could not be read (no
`arm`, an engine that did not answer) the wrapper is installed at the first
save, and the checks that need the bootstrap are skipped, saying why.

LoRA (`model.lora_rank` or `model.lora.rank` > 0, `model.lora.merge` false,
verl's default): verl's first sync pushes the base and then the adapter;
every later push is the adapter alone (`engine_workers.py:787-805`;
`sglang_rollout.py:338-357`, `load_lora_adapter_from_tensor`). sglang keeps
adapter weights as plain tensor attributes of its LoRA layers and memory pool
(0.5.14 `lora/layers.py`, `lora/mem_pool.py`: no `nn.Parameter`, no
`register_buffer`), while the wrapped layer re-exposes the base `weight`
(`layers.py:40-46`); `/weights_checker` hashes `named_parameters()` and
`named_buffers()`, so it sees the frozen base only. What can be proven is
what verl pushes to those tensors: the base, unchanged since verl's first
sync pushed it (read right after that push: the bootstrap is no reference,
as verl's default rollout.load_format "dummy" starts sglang on random weights).
The adapter is recorded as not verifiable, and the sensitivity control is
refused (its `reset_tensors` would randomise the base, and verl's
adapter-only re-push would never restore it).

`stop` (`[evidence] on_failure = "stop"`): a publication check that fails
at a push raises `EvidenceStopped` out of that push, into verl's
`on_step_end`, once the record saying which check and which engine is
written.

Which releases can: verl 0.9.1's v1 trainer in `sync` and `colocate_async`
modes with sglang rollout. Not: verl <= 0.9.0 (no `trainer.checkpoint_callback_class`
hook: tutorrl has no code in the trainer process, and the post-run scan comes
after the engines are gone); the legacy trainer (`trainer.use_v1=false`, never
calls `on_save`); `separate_async` (two managers, and the hybrid replicas get a
push only on a mode switch, so "the push that serves the checkpoint" is not one
call); vLLM rollout (no checksum API).
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from dataclasses import dataclass, field

import msgspec

from tutorrl.evidence.schema import Check, EngineVersions, InRun, PushControl

SUPPORTED_MODES = ("sync", "colocate_async")
# How long one engine answer or one actor call may take before it is an error:
# a checksum of a large model on one GPU takes seconds.
TIMEOUT = 600.0
_WATCH_ATTR = "_tutorrl_publication_watch"
CONTROL_OFF = ("off: [evidence] publication_control = false (the control perturbs the engines: a snapshot in host "
               "memory, every served tensor reset to random values, and a second push)")
LORA_PUSH = ("verl 0.9.1 pushes only the LoRA adapter after the first sync (engine_workers.py:787-805, "
             "model.lora.merge false; sglang_rollout.py:338-357 load_lora_adapter_from_tensor)")
ADAPTER_UNSEEN = ("sglang's /weights_checker hashes the model's parameters and buffers, and sglang keeps LoRA adapter "
                  "weights as neither (lora/layers.py, lora/mem_pool.py): it sees the frozen base only")
ADAPTER_NOT_VERIFIABLE = f"adapter not verifiable: {LORA_PUSH}, and {ADAPTER_UNSEEN}"
CONTROL_LORA = (f"refused: LoRA run. reset_tensors would randomise the base weights, and the re-push cannot restore "
                f"them: {LORA_PUSH}")
# Set by `arm` (the callback, at verl's construction of it): how the first
# sleep_replicas of a CheckpointEngineManager reads the bootstrap.
_ARMED: dict | None = None
_PATCHED = "_tutorrl_sleep_patched"


class EvidenceStopped(RuntimeError):
    """Raised into verl's trainer to stop the run: evidence failed and the spec says on_failure = "stop"."""


def _warn(msg: str) -> None:
    print(f"tutorrl evidence: {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Engine:
    """One rollout replica: sglang's HTTP address and verl's server actor (a Ray handle, or None)."""

    url: str
    actor: object | None
    # The device verl started sglang on (rollout.engine_kwargs.sglang.device; unset: "cuda", sglang's
    # default on a GPU node). Said by the config, not asked: under verl 0.9.1 sglang's /server_info
    # fails (verl's server actor stores sglang's port arguments where that route expects scheduler info).
    device: str = "cuda"


@dataclass(slots=True)
class Observed:
    """What `deliver` gets: the engines' answers after the push, and the checks only the run can make."""

    readings: list  # list[sglang.EngineReading]
    in_run: InRun
    checks: list[Check] = field(default_factory=list)
    # "check id (detail)" of every check that failed at this push (these and the
    # engine-level ones of sglang.judge): under "stop", what stops the run.
    failed: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Bootstrap:
    """The engines as verl's replicas start, before the first push: sglang serves the model path's weights."""

    versions: list[EngineVersions]
    maps: dict | None  # sglang.served_maps of the checksum reading; None when an engine did not answer
    shape: str | None
    error: str | None = None


def read_bootstrap(engines: list[Engine], timeout: float = TIMEOUT) -> Bootstrap:
    from tutorrl.evidence.sglang import read_engine, served_maps

    versions = [read_versions(e, timeout) for e in engines]
    readings = [read_engine(e.url, timeout=timeout, device=e.device) for e in engines]
    bad = [f"{r.observation.url}: {r.observation.error}" for r in readings if r.observation.error]
    if bad:
        return Bootstrap(versions, None, None, "; ".join(bad)[:2000])
    return Bootstrap(versions, served_maps(readings), readings[0].observation.response_shape if readings else None)


def _path(obj, *names):
    for name in names:
        if obj is None:
            return None
        try:
            obj = obj[name] if isinstance(obj, dict) else getattr(obj, name)
        except (AttributeError, KeyError, TypeError):
            try:
                obj = obj.get(name)  # OmegaConf DictConfig
            except Exception:
                return None
    return obj


def engine_device(config) -> str:
    """The device verl starts its sglang servers on: engine_kwargs' `device`, else sglang's GPU default."""
    device = _path(config, "actor_rollout_ref", "rollout", "engine_kwargs", "sglang", "device")
    return device if isinstance(device, str) and device else "cuda"


def lora_adapter_only(config) -> bool:
    """Whether verl pushes only a LoRA adapter after the first sync (FSDP `lora_rank`, Megatron `lora.rank`)."""
    model = _path(config, "actor_rollout_ref", "model")
    ranks = [_path(model, "lora_rank"), _path(model, "lora", "rank")]
    if not any(type(r) is int and r > 0 for r in ranks):
        return False
    return _path(model, "lora", "merge") is not True


def _served_global_steps(server) -> int | None:
    # Runs inside verl's rollout server actor (via __ray_call__, as verl's own
    # SGLangReplica.launch_servers reads its workers' state).
    return getattr(server, "global_steps", None)


def read_versions(engine: Engine, timeout: float = TIMEOUT) -> EngineVersions:
    from tutorrl.evidence.sglang import EngineError, read_weight_version

    errors = []
    try:
        weight_version = read_weight_version(engine.url, timeout=timeout)
    except EngineError as exc:
        weight_version = None
        errors.append(str(exc))
    steps = None
    if engine.actor is not None:
        try:
            import ray

            value = ray.get(engine.actor.__ray_call__.remote(_served_global_steps), timeout=timeout)
            steps = value if type(value) is int else None
            if value is not None and steps is None:
                errors.append(f"server actor's global_steps is {str(value)[:40]!r}, not an integer")
        except Exception as exc:  # a dead actor, a timeout: the answer is "unknown", the check says so
            errors.append(f"server actor: {type(exc).__name__}: {str(exc)[:200]}")
    else:
        errors.append("no server actor to read verl's global_steps from")
    return EngineVersions(url=engine.url, weight_version=weight_version, global_steps=steps,
                          error="; ".join(errors) or None)


NOT_CHECKED = "served weights not checked"


def not_checked(rollout) -> str:
    """Why a run whose rollout is not sglang has no proof of what its engines serve."""
    if rollout == "vllm":
        return (f"{NOT_CHECKED}: rollout 'vllm'. verl 0.9.1 pushes the weights to vLLM over ZMQ/shared memory "
                "(update_weights_from_ipc in its worker extension) and sets only its own global_steps; vLLM has no "
                "endpoint that reports what it serves (no checksum of its weights, unlike sglang's /weights_checker), "
                "so neither the push nor the served weights can be checked; the checkpoint's files are still recorded")
    if rollout == "hf":
        return (f"{NOT_CHECKED}: rollout 'hf' generates with the actor's own module inside the training worker: there "
                "is no separate engine and no push to check")
    return f"{NOT_CHECKED}: rollout {rollout!r}; only sglang (>= 0.5.12) reports checksums of the weights it serves"


def engines_of(trainer) -> tuple[object | None, list[Engine], str | None]:
    """verl's checkpoint manager and its engines, or why this trainer cannot be watched."""
    mode = getattr(trainer, "trainer_mode", None)
    if mode not in SUPPORTED_MODES:
        return None, [], (f"trainer mode {mode!r}: tutorrl reads engines after the push only in "
                          f"{' and '.join(SUPPORTED_MODES)} (verl 0.9.1 v1 trainer)")
    try:
        rollout = trainer.config.actor_rollout_ref.rollout.name
    except AttributeError:
        rollout = None
    if rollout != "sglang":
        return None, [], not_checked(rollout)
    manager = getattr(trainer, "checkpoint_manager", None)
    if manager is None or not callable(getattr(manager, "update_weights", None)):
        return None, [], "the trainer has no checkpoint_manager.update_weights to observe"
    engines, reason = replica_engines(manager, engine_device(trainer.config))
    return (None, [], reason) if reason else (manager, engines, None)


def replica_engines(manager, device: str) -> tuple[list[Engine], str | None]:
    """The manager's replicas as engines, read afresh (verl can add and remove replicas)."""
    engines = []
    for replica in getattr(manager, "replicas", None) or []:
        address = getattr(replica, "server_address", None)
        if not isinstance(address, str) or not address:
            return [], f"rollout replica {getattr(replica, 'replica_rank', '?')} has no server address"
        url = address if "://" in address else f"http://{address}"
        engines.append(Engine(url=url, actor=getattr(replica, "server_handle", None), device=device))
    if not engines:
        return [], "the checkpoint manager has no rollout replicas"
    return engines, None


def _roster_digest(maps: dict) -> str:
    roster = sorted((*key, name) for key, m in maps.items() for name in m)
    return "sha256:" + hashlib.sha256(msgspec.json.encode(roster)).hexdigest()


def _changed(before: dict, after: dict) -> int:
    return sum(before[k][n] != after[k][n] for k in before.keys() & after.keys() for n in before[k].keys() & after[k].keys())


def version_problems(before: list[EngineVersions], after: list[EngineVersions], global_steps: int | None) -> list[str]:
    """What breaks "one version step per push" between two readings of the same engines."""
    out = []
    if [v.url for v in before] != [v.url for v in after]:
        return [f"engines changed: {[v.url for v in before]} -> {[v.url for v in after]}"]
    for b, a in zip(before, after):
        if a.error:
            out.append(f"{a.url}: {a.error}")
            continue
        if a.weight_version != b.weight_version:
            # verl 0.9.1 never sets sglang's version: something else pushed.
            out.append(f"{a.url}: sglang weight_version moved {b.weight_version!r} -> {a.weight_version!r}")
        if global_steps is None:  # verl's re-publication without a step (validation) sets no version
            if a.global_steps != b.global_steps:
                out.append(f"{a.url}: global_steps moved {b.global_steps} -> {a.global_steps} on a push without a step")
        elif a.global_steps != global_steps:
            out.append(f"{a.url}: serves global_steps {a.global_steps} after the push of step {global_steps}")
        elif b.global_steps is not None and a.global_steps != b.global_steps + 1:
            out.append(f"{a.url}: global_steps moved {b.global_steps} -> {a.global_steps}, not by one")
    return out


class _Watch:
    """State kept on the trainer's checkpoint manager between pushes."""

    def __init__(self, trainer_mode: str, manager, original: Callable, engines: list[Engine], timeout: float, *,
                 lora: bool = False, bootstrap: Bootstrap | None = None, no_bootstrap: str | None = None,
                 model: str | None = None):
        self.trainer_mode, self.manager, self.original, self.timeout = trainer_mode, manager, original, timeout
        self.device = engines[0].device if engines else "cuda"  # verl starts every replica alike
        self.lora, self.bootstrap = lora, bootstrap
        # The seed's compare right after the first update: verl's first sync pushes the actor as it
        # was loaded, so the engines must then serve the model path's weights (full weights only).
        self.model = model
        self.first_sync: Check | None = None
        # Why the bootstrap checksums are not there, for the checks that need them.
        self.no_bootstrap = no_bootstrap or (bootstrap.error if bootstrap is not None else None)
        self.baseline = bootstrap.versions if bootstrap is not None else [read_versions(e, timeout) for e in engines]
        self.last = self.baseline
        self.since = self.baseline  # versions at the previous publication (or the bootstrap / first save)
        self.pushes = 0
        self.problems: list[str] = []
        self.pending: tuple[int, Callable[[Observed], None], bool] | None = None
        self.previous: tuple[int, dict] | None = None
        self.stop = False
        # LoRA: the base as verl's first sync pushed it, what every
        # publication must still serve. Not the bootstrap: verl's default
        # rollout.load_format is "dummy", so sglang starts on random weights and
        # the first sync is what loads the base.
        self.base_ref: tuple[str, dict] | None = None  # (when it was read, served_maps)
        self.base_ref_why: str | None = None

    def expect(self, global_step: int, deliver: Callable[[Observed], None], control: bool, stop: bool = False) -> None:
        if self.pending is not None:
            step, old_deliver, _ = self.pending
            _warn(f"step {step}: saved again (step {global_step}) before any push; step {step} left to the post-run scan")
        self.pending = (global_step, deliver, control)
        self.stop = stop

    def push(self, *args, **kwargs):
        result = self.original(*args, **kwargs)
        global_steps = kwargs.get("global_steps", args[0] if args else None)
        pending, self.pending = self.pending, None
        failed: list[str] = []
        started = time.perf_counter()
        try:
            failed = self._after(global_steps, pending)
        except Exception:  # never into the trainer: the post-run scan still records the checkpoint
            _warn(f"could not read the engines after the push of step {global_steps}:\n{traceback.format_exc()}")
        else:
            if pending is not None:
                # What the check costs the step (the trainer waits for it): benchmarks/bench_run.py reads it.
                _warn(f"step {pending[0]}: publication checked after the push in {time.perf_counter() - started:.3f} s"
                      f" ({'fail' if failed else 'no failure'})")
        if failed and self.stop and pending is not None:
            # Raised out of verl's push (on_step_end): the run stops at the push whose check failed.
            raise EvidenceStopped(
                "tutorrl evidence: stopping the run (evidence.on_failure = \"stop\"): step "
                f"{pending[0]}: publication failed at the push of step {global_steps}: " + "; ".join(failed))
        return result

    def _after(self, global_steps: int | None, pending) -> list[str]:
        from tutorrl.evidence.sglang import judge, read_engine, served_maps

        engines, reason = replica_engines(self.manager, self.device)
        if reason:
            self.problems.append(reason)
        after = [read_versions(e, self.timeout) for e in engines]
        self.problems += version_problems(self.last, after, global_steps)
        self.pushes += 1
        self.last = after
        if pending is None:
            if not self.lora and self.first_sync is None:
                self.first_sync = first_sync_check([read_engine(e.url, timeout=self.timeout, device=e.device) for e in engines],
                                                   global_steps, self.model)
                if self.first_sync.status == "fail":
                    _warn(f"after verl's first sync: {self.first_sync.id} failed: {self.first_sync.detail[:500]}")
            if self.lora and self.base_ref is None and self.base_ref_why is None:
                # verl's first sync of a LoRA run: the base, then the adapter (engine_workers.py:795-805).
                first = [read_engine(e.url, timeout=self.timeout, device=e.device) for e in engines]
                bad = [f"{r.observation.url}: {r.observation.error}" for r in first if r.observation.error]
                if bad:
                    self.base_ref_why = "the engines did not answer after verl's first sync: " + "; ".join(bad)
                else:
                    self.base_ref = (f"verl's first sync (global_steps={global_steps})", served_maps(first))
            return []
        step, deliver, control = pending
        readings = [read_engine(e.url, timeout=self.timeout, device=e.device) for e in engines]
        if self.lora:
            readings = [dataclasses.replace(r, lora=True) for r in readings]
        answered = not any(r.observation.error for r in readings)
        maps = served_maps(readings)
        checks = [self._engines_check(after), self._version_check(step, global_steps, after)]
        roster = _roster_digest(maps) if maps else None
        changed = None
        checks.append(self._lora_base_check(step, maps, answered) if self.lora else self._bootstrap_check(maps, answered))
        if not self.lora and self.previous is None:
            # Recorded with the first publication this run reads: verl's first sync has no checkpoint
            # of its own to carry a record, so a failure there fails (and, with "stop", stops at) this one.
            checks.append(self.first_sync or Check(id=FIRST_SYNC, status="skipped", detail=(
                "verl's first sync was not watched (the watch began at the first save, after it)")))
        if not answered:
            for cid in ("publication.roster_stable", "publication.changed_since_previous"):
                checks.append(Check(id=cid, status="skipped", detail="an engine did not answer the checksum reading"))
        elif self.previous is None:
            checks.append(Check(id="publication.roster_stable", status="skipped",
                                detail=f"first publication read in this run (step {step}): the roster baseline"))
            checks.append(Check(id="publication.changed_since_previous", status="skipped",
                                detail="first publication read in this run: nothing earlier to differ from"))
        else:
            prev_step, prev_maps = self.previous
            checks.append(_roster_check(prev_step, prev_maps, maps))
            changed = _changed(prev_maps, maps)
            if self.lora:
                checks.append(Check(id="publication.changed_since_previous", status="skipped", detail=(
                    f"LoRA: {changed} served tensor(s) changed since step {prev_step}'s publication; none is expected "
                    f"to: {ADAPTER_NOT_VERIFIABLE}")))
            elif changed:
                checks.append(Check(id="publication.changed_since_previous", status="pass",
                                    detail=f"{changed} served tensor(s) changed since step {prev_step}'s publication"))
            else:
                checks.append(Check(id="publication.changed_since_previous", status="fail",
                                    detail=f"the engines serve exactly what they served for step {prev_step}"))
        if self.lora:
            checks.append(Check(id="publication.adapter", status="skipped", detail=ADAPTER_NOT_VERIFIABLE))
        ctl = None
        if not control:
            checks.append(Check(id="publication.control", status="skipped", detail=CONTROL_OFF))
        elif self.lora:
            checks.append(Check(id="publication.control", status="skipped", detail=CONTROL_LORA))
        elif not answered:
            checks.append(Check(id="publication.control", status="skipped",
                                detail="not run: an engine did not answer the checksum reading"))
        elif refused := _control_refusal(readings):
            checks.append(Check(id="publication.control", status="skipped", detail=refused))
        else:
            ctl, check = self._control(engines, maps, step)
            checks.append(check)
        in_run = InRun(
            trainer=f"v1:{self.trainer_mode}",
            moment=f"after CheckpointEngineManager.update_weights(global_steps={global_steps}) in on_step_end",
            global_step=step, baseline=self.baseline, before=self.since, after=after, pushes=self.pushes,
            roster_digest=roster, previous_step=self.previous[0] if self.previous else None,
            changed_since_previous=changed, control=ctl,
        )
        if answered:
            self.previous = (step, maps)
        self.since, self.pushes, self.problems = after, 0, []
        # The engine-level checks of the record (no checkpoint needed): known now, at the push.
        _, engine_checks = judge(readings, None, None)
        failed = [f"{c.id} ({c.detail[:500]})" for c in engine_checks + checks if c.status == "fail"]
        # What the record itself then finds (under "stop" the recorder writes it before answering):
        # the served shards against the checkpoint's own files.
        recorded = deliver(Observed(readings=readings, in_run=in_run, checks=checks, failed=failed))
        # The record's failures include these: one list, not both.
        return failed or list(recorded or ())

    def _bootstrap_check(self, maps: dict, answered: bool) -> Check:
        """The publication against the engines' bootstrap reading (before verl's first push), as miles checks it."""
        cid = "publication.changed_from_bootstrap"
        if self.bootstrap is None or self.bootstrap.maps is None:
            why = self.no_bootstrap or "the engines were not read before verl's first push"
            return Check(id=cid, status="skipped", detail=f"no bootstrap checksums: {why}"[:2000])
        if not answered:
            return Check(id=cid, status="skipped", detail="an engine did not answer the checksum reading")
        base = self.bootstrap.maps
        if base.keys() != maps.keys() or any(base[k].keys() != maps[k].keys() for k in maps):
            return Check(id=cid, status="fail", detail=(
                "the served ranks or tensor roster differ from the bootstrap reading: "
                f"{_roster_difference(base, maps)}"))
        changed = _changed(base, maps)
        total = sum(len(m) for m in maps.values())
        if changed:
            return Check(id=cid, status="pass", detail=(
                f"{changed} of {total} served tensor(s) differ from the engines' reading before verl's first push"))
        return Check(id=cid, status="fail", detail=(
            f"every one of the {total} served tensor(s) equals the engines' reading before verl's first push (what "
            f"they loaded at start: the model path's weights, or random ones with rollout.load_format = dummy): "
            f"engines {', '.join(sorted({self.bootstrap.versions[k[0]].url for k in maps}))}"))

    def _lora_base_check(self, step: int, maps: dict, answered: bool) -> Check:
        """LoRA: the served base is the one verl's first sync pushed, bit for bit."""
        cid = "publication.base_unchanged"
        if not answered:
            return Check(id=cid, status="skipped", detail="an engine did not answer the checksum reading")
        if self.base_ref is None:
            if self.base_ref_why is None:
                # No reading after the first sync (the watch began at a save): this one is the reference.
                self.base_ref_why = ""
                self.base_ref = (f"step {step}'s publication", maps)
                return Check(id=cid, status="skipped", detail=(
                    f"LoRA: the engines were not read after verl's first sync; step {step}'s served base is the "
                    f"reference for later publications"))
            return Check(id=cid, status="skipped", detail=f"LoRA: no reference base: {self.base_ref_why}"[:2000])
        when, base = self.base_ref
        if base.keys() != maps.keys() or any(base[k].keys() != maps[k].keys() for k in maps):
            return Check(id=cid, status="fail", detail=(
                f"LoRA: the served ranks or tensor roster differ from those after {when}: "
                f"{_roster_difference(base, maps)}"))
        changed = _changed(base, maps)
        total = sum(len(m) for m in maps.values())
        if changed:
            return Check(id=cid, status="fail", detail=(
                f"LoRA: {changed} of {total} served base tensor(s) differ from the base verl pushed at {when}, e.g. "
                f"{_first_changed(base, maps)}; the base is frozen and verl pushes it only once"))
        return Check(id=cid, status="pass", detail=(
            f"LoRA: all {total} served base tensor(s) equal the base verl pushed at {when} (the frozen base; "
            f"verl pushes only the adapter since); the adapter is not verifiable"))

    def _engines_check(self, after: list[EngineVersions]) -> Check:
        base = [v.url for v in self.baseline]
        now = [v.url for v in after]
        when = "before the first push" if self.bootstrap is not None else "at the first save"
        if base != now:
            return Check(id="publication.engines_stable", status="fail",
                         detail=f"{len(base)} engine(s) {when}, {len(now)} now: {base} -> {now}")
        return Check(id="publication.engines_stable", status="pass",
                     detail=f"the same {len(now)} engine(s) as {when}")

    def _version_check(self, step: int, global_steps: int | None, after: list[EngineVersions]) -> Check:
        problems = list(self.problems)
        if global_steps != step:
            problems.insert(0, f"the push after the save of step {step} carried global_steps={global_steps}")
        if problems:
            return Check(id="publication.version_step", status="fail", detail="; ".join(problems[:10]))
        first = self.since[0].global_steps if self.since else None
        return Check(id="publication.version_step", status="pass", detail=(
            f"every engine moved one global_steps per push ({first} -> {step} over {self.pushes} push(es)); "
            f"sglang weight_version unchanged ({after[0].weight_version!r})"))

    def _control(self, engines: list[Engine], served: dict, step: int) -> tuple[PushControl, Check]:
        """Snapshot, reset every served tensor, republish through verl, compare: miles' sensitivity control."""
        from tutorrl.evidence.sglang import EngineError, read_engine, served_maps, weights_checker_action

        snapshot_ok = compare_ok = equal = False
        reset_changed = 0
        republished: list[EngineVersions] = []
        notes = []
        reset_tried = False
        try:
            for e in engines:
                weights_checker_action(e.url, "snapshot", timeout=self.timeout)
            snapshot_ok = True
            reset_tried = True
            for e in engines:
                weights_checker_action(e.url, "reset_tensors", timeout=self.timeout)
            reset = [read_engine(e.url, timeout=self.timeout, device=e.device) for e in engines]
            bad = [r.observation.error for r in reset if r.observation.error]
            if bad:
                raise EngineError("checksum after reset: " + "; ".join(bad))
            reset_changed = _changed(served, served_maps(reset))
        except EngineError as exc:
            notes.append(str(exc))
        finally:
            if reset_tried:
                # verl's own re-publication pair (trainer_base.py:1082-1084): the
                # naive push expects sleeping replicas. It also undoes the reset.
                self.manager.sleep_replicas()
                self.original(global_steps=step)
                republished = [read_versions(e, self.timeout) for e in engines]
        if snapshot_ok and reset_tried:
            try:
                # Only on releases whose compare frees the snapshot (see _control_refusal).
                for e in engines:
                    weights_checker_action(e.url, "compare", timeout=self.timeout)
                compare_ok = True
            except EngineError as exc:
                notes.append(str(exc))
            again = [read_engine(e.url, timeout=self.timeout, device=e.device) for e in engines]
            equal = not any(r.observation.error for r in again) and served_maps(again) == served
            if not equal:
                notes.append("the checksums after the republication differ from those first read")
        wrong = [v for v in republished if v.global_steps != step]
        if wrong:
            notes.append(f"after the republication global_steps is {[v.global_steps for v in wrong]}, not {step}")
        ok = snapshot_ok and reset_changed > 0 and compare_ok and equal and not wrong
        if snapshot_ok and reset_changed == 0 and not notes:
            notes.append("reset_tensors changed no checksum: the checker is blind to the served tensors")
        detail = (f"snapshot, reset_tensors ({reset_changed} checksum(s) changed), republished step {step}, "
                  f"compare succeeded (and freed the snapshot), checksums equal to the first reading") if ok else "; ".join(notes)
        ctl = PushControl(snapshot_ok=snapshot_ok, reset_changed=reset_changed, republished_versions=republished,
                          compare_ok=compare_ok, republished_equal=equal, detail=detail[:2000])
        return ctl, Check(id="publication.control", status="pass" if ok else "fail", detail=detail[:2000])


FIRST_SYNC = "publication.first_sync_matches_model"


def first_sync_check(readings, global_steps: int | None, model: str | None) -> Check:
    """verl's first sync, checked as the seed's compare after its first update: the engines serve
    the model path's weights, rebuilt from its safetensors as the engine loads them."""
    from tutorrl.evidence.safetensors import SafetensorsError
    from tutorrl.evidence.sglang import _compare, _target_shards, engine_hash, safetensors_sglang_hashes

    bad = [f"{r.observation.url}: {r.observation.error}" for r in readings if r.observation.error]
    if bad:
        return Check(id=FIRST_SYNC, status="skipped",
                     detail=("an engine did not answer after verl's first sync: " + "; ".join(bad))[:2000])
    if global_steps not in (None, 0):
        return Check(id=FIRST_SYNC, status="skipped", detail=(
            f"verl's first sync pushed step {global_steps} (a resumed run): the actor serves the resumed "
            "checkpoint's weights, not the model path's"))
    folder = Path(model) if model else None
    files = sorted(folder.glob("*.safetensors")) if folder is not None and folder.is_dir() else []
    if not files:
        return Check(id=FIRST_SYNC, status="skipped", detail=(
            f"the model path {model!r} is not a local folder of safetensors here: nothing to rebuild the "
            "served weights from"))
    shards = _target_shards(readings)
    if not shards:
        return Check(id=FIRST_SYNC, status="skipped", detail="no target rank answered with checksums")
    try:
        reference = safetensors_sglang_hashes(files)
    except (SafetensorsError, OSError) as exc:
        return Check(id=FIRST_SYNC, status="skipped", detail=f"the model path's safetensors cannot be read: {exc}")
    hashed = engine_hash(readings)
    if isinstance(hashed, str):
        return Check(id=FIRST_SYNC, status="skipped", detail=hashed)
    found, cover = _compare("model path", shards, reference, hashed[0])
    if found.compared == 0:
        return Check(id=FIRST_SYNC, status="skipped", detail=(
            f"no served tensor could be rebuilt from the model path ({reference.layout}); {cover.summary()}"))
    if found.different:
        return Check(id=FIRST_SYNC, status="fail", detail=(
            f"after verl's first sync {found.compared - found.equal} of {found.compared} served shards differ from "
            f"the model path's weights rebuilt as the engine loads them ({reference.layout}), e.g. "
            f"{found.different[0]}: the push did not deliver the actor as it was loaded"))
    return Check(id=FIRST_SYNC, status="pass", detail=(
        f"after verl's first sync all {found.compared} compared served shards equal the model path's weights "
        f"({reference.layout})" + (f"; {cover.summary()}" if cover.not_compared else "")))


def _control_refusal(readings) -> str | None:
    """Why the control may not run on these engines' sglang release (None: it may)."""
    from tutorrl.evidence.sglang import SNAPSHOT_HELD, snapshot_is_freed

    held = sorted({r.observation.response_shape for r in readings if not snapshot_is_freed(r.observation.response_shape)},
                  key=str)
    if held:
        return "refused: " + SNAPSHOT_HELD.format(shape=" and ".join(str(h) for h in held))
    return None


def _roster_difference(before: dict, after: dict) -> str:
    if before.keys() != after.keys():
        return f"ranks {sorted(before.keys() ^ after.keys())[:5]}"
    for k in after:
        if before[k].keys() != after[k].keys():
            return f"engine {k[0]} {k[1]} tp{k[3]}: {sorted(before[k].keys() ^ after[k].keys())[:5]}"
    return "none"


def _first_changed(before: dict, after: dict) -> str:
    for k in sorted(after):
        for n in sorted(after[k]):
            if before.get(k, {}).get(n) != after[k][n]:
                return f"{n} (engine {k[0]} {k[1]} pp{k[2]} tp{k[3]} dp{k[4]})"
    return "none"


def _roster_check(prev_step: int, prev: dict, now: dict) -> Check:
    if prev.keys() != now.keys():
        return Check(id="publication.roster_stable", status="fail",
                     detail=f"ranks changed since step {prev_step}: {sorted(prev.keys() ^ now.keys())[:5]}")
    moved = [k for k in now if prev[k].keys() != now[k].keys()]
    if moved:
        k = moved[0]
        diff = sorted(prev[k].keys() ^ now[k].keys())[:5]
        return Check(id="publication.roster_stable", status="fail",
                     detail=f"tensor roster of engine {k[0]} {k[1]} pp{k[2]} tp{k[3]} dp{k[4]} changed since step {prev_step}: {diff}")
    n = sum(len(m) for m in now.values())
    return Check(id="publication.roster_stable", status="pass",
                 detail=f"the same {len(now)} rank(s) and {n} tensor(s) as at step {prev_step}'s publication")


def _install(manager, watch: _Watch) -> None:
    def update_weights(*args, **kwargs):
        return watch.push(*args, **kwargs)

    setattr(update_weights, _WATCH_ATTR, watch)
    # An instance attribute shadows the class's method for this trainer's
    # manager only; verl's trainers call it synchronously (auto_await).
    manager.update_weights = update_weights


def watch_from_bootstrap(manager, *, trainer_mode: str, lora: bool, timeout: float = TIMEOUT,
                         model: str | None = None, device: str = "cuda") -> str | None:
    """Read every engine of ``manager`` now (before verl's first push) and watch its pushes from here on.

    None when watched; else why not (the watch is then installed at the first save, without a bootstrap).
    """
    if getattr(manager.update_weights, _WATCH_ATTR, None) is not None:
        return None
    engines, reason = replica_engines(manager, device)
    if reason:
        return reason
    try:
        boot = read_bootstrap(engines, timeout)
    except Exception as exc:  # noqa: BLE001 - never into verl's constructor
        return f"could not read the engines before the first push: {type(exc).__name__}: {exc}"
    if boot.error:
        _warn(f"the engines' bootstrap reading failed: {boot.error}")
    _install(manager, _Watch(trainer_mode, manager, manager.update_weights, engines, timeout, lora=lora,
                             bootstrap=boot, model=model))
    return None


def arm(config, *, timeout: float = TIMEOUT) -> str | None:
    """Make the first `sleep_replicas()` of verl's CheckpointEngineManager read the bootstrap.

    Called by the callback when verl builds it (`trainer_base.py:122`), before
    the manager exists: verl's trainer builds the manager and calls
    `sleep_replicas()` at once (`trainer_base.py:386-392`), while the engines
    still serve the model path's weights. Returns why not, or None.
    """
    global _ARMED
    mode = _path(config, "trainer", "v1", "trainer_mode")
    if _path(config, "trainer", "use_v1") is False or mode not in SUPPORTED_MODES:
        return f"trainer mode {mode!r}: no in-run reading"
    rollout = _path(config, "actor_rollout_ref", "rollout", "name")
    if rollout != "sglang":
        return not_checked(rollout)
    try:
        from verl.checkpoint_engine.base import CheckpointEngineManager
    except ImportError as exc:
        return f"verl's CheckpointEngineManager is not importable: {exc}"
    _ARMED = {"trainer_mode": mode, "lora": lora_adapter_only(config), "timeout": timeout,
              "model": _path(config, "actor_rollout_ref", "model", "path"), "device": engine_device(config)}
    if not getattr(CheckpointEngineManager.sleep_replicas, _PATCHED, False):
        original = CheckpointEngineManager.sleep_replicas

        def sleep_replicas(self, *args, **kwargs):
            armed = _ARMED
            if armed is not None and not getattr(self, "_tutorrl_bootstrap_tried", False):
                self._tutorrl_bootstrap_tried = True
                why = watch_from_bootstrap(self, **armed)
                if why:
                    _warn(f"no bootstrap reading before verl's first push: {why}")
            return original(self, *args, **kwargs)

        setattr(sleep_replicas, _PATCHED, True)
        CheckpointEngineManager.sleep_replicas = sleep_replicas
    return None


def disarm() -> None:
    global _ARMED
    _ARMED = None


def check_after_push(trainer, global_step: int, deliver: Callable[[Observed], None], *,
                     control: bool = False, stop: bool = False, timeout: float = TIMEOUT) -> str | None:
    """Arrange for every engine to be read right after verl pushes `global_step`'s weights.

    Called from `on_save(trainer=..., global_step=...)`. Returns None when
    arranged: `deliver(Observed)` is then called once, in the trainer's thread,
    right after that push returns; what it returns (the failures its record
    found, where it waited for the record) counts as failed at this push. No exception reaches the trainer, except,
    with `stop`, `EvidenceStopped` out of the push when a check failed there
    (after `deliver`). Otherwise returns why it cannot be, and `deliver` is
    never called. `control` runs the sensitivity control (it perturbs the engines).
    """
    manager, engines, reason = engines_of(trainer)
    if reason:
        return reason
    watch = getattr(manager.update_weights, _WATCH_ATTR, None)
    if watch is None:
        lora = lora_adapter_only(getattr(trainer, "config", None))
        no_boot = ("the engines were not read before verl's first push (the watch began at the first save: "
                   + ("the bootstrap reading could not be made)" if getattr(manager, "_tutorrl_bootstrap_tried", False)
                      else "tutorrl's callback was not armed when verl built the manager)"))
        try:
            watch = _Watch(trainer.trainer_mode, manager, manager.update_weights, engines, timeout, lora=lora,
                           no_bootstrap=no_boot)
        except Exception as exc:
            return f"could not read the engines' versions at the first save: {type(exc).__name__}: {exc}"
        _install(manager, watch)
    watch.expect(global_step, deliver, control, stop)
    return None
