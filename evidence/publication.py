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

So `check_after_push` (called from `on_save`, which gets `trainer=`) wraps the
manager's `update_weights` on the trainer object once; after every push the
wrapper reads every engine's versions, and after the push that serves a saved
checkpoint it reads every engine's checksums and hands them to the recorder.

Which releases can: verl 0.9.1's v1 trainer in `sync` and `colocate_async`
modes with sglang rollout. Not: verl <= 0.9.0 (no `trainer.checkpoint_callback_class`
hook: tutorrl has no code in the trainer process, and the post-run scan comes
after the engines are gone); the legacy trainer (`trainer.use_v1=false`, never
calls `on_save`); `separate_async` (two managers, and the hybrid replicas get a
push only on a mode switch, so "the push that serves the checkpoint" is not one
call); vLLM rollout (no checksum API).
"""

from __future__ import annotations

import hashlib
import sys
import traceback
from collections.abc import Callable
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


def _warn(msg: str) -> None:
    print(f"tutorrl evidence: {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Engine:
    """One rollout replica: sglang's HTTP address and verl's server actor (a Ray handle, or None)."""

    url: str
    actor: object | None


@dataclass(slots=True)
class Observed:
    """What `deliver` gets: the engines' answers after the push, and the checks only the run can make."""

    readings: list  # list[sglang.EngineReading]
    in_run: InRun
    checks: list[Check] = field(default_factory=list)


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
        return None, [], f"rollout {rollout!r}: only sglang serves weight checksums"
    manager = getattr(trainer, "checkpoint_manager", None)
    if manager is None or not callable(getattr(manager, "update_weights", None)):
        return None, [], "the trainer has no checkpoint_manager.update_weights to observe"
    engines, reason = replica_engines(manager)
    return (None, [], reason) if reason else (manager, engines, None)


def replica_engines(manager) -> tuple[list[Engine], str | None]:
    """The manager's replicas as engines, read afresh (verl can add and remove replicas)."""
    engines = []
    for replica in getattr(manager, "replicas", None) or []:
        address = getattr(replica, "server_address", None)
        if not isinstance(address, str) or not address:
            return [], f"rollout replica {getattr(replica, 'replica_rank', '?')} has no server address"
        url = address if "://" in address else f"http://{address}"
        engines.append(Engine(url=url, actor=getattr(replica, "server_handle", None)))
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

    def __init__(self, trainer_mode: str, manager, original: Callable, engines: list[Engine], timeout: float):
        self.trainer_mode, self.manager, self.original, self.timeout = trainer_mode, manager, original, timeout
        self.baseline = [read_versions(e, timeout) for e in engines]
        self.last = self.baseline
        self.since = self.baseline  # versions at the previous publication (or the first save)
        self.pushes = 0
        self.problems: list[str] = []
        self.pending: tuple[int, Callable[[Observed], None], bool] | None = None
        self.previous: tuple[int, dict] | None = None

    def expect(self, global_step: int, deliver: Callable[[Observed], None], control: bool) -> None:
        if self.pending is not None:
            step, old_deliver, _ = self.pending
            _warn(f"step {step}: saved again (step {global_step}) before any push; step {step} left to the post-run scan")
        self.pending = (global_step, deliver, control)

    def push(self, *args, **kwargs):
        result = self.original(*args, **kwargs)
        global_steps = kwargs.get("global_steps", args[0] if args else None)
        pending, self.pending = self.pending, None
        try:
            self._after(global_steps, pending)
        except Exception:  # never into the trainer: the post-run scan still records the checkpoint
            _warn(f"could not read the engines after the push of step {global_steps}:\n{traceback.format_exc()}")
        return result

    def _after(self, global_steps: int | None, pending) -> None:
        from tutorrl.evidence.sglang import read_engine, served_maps

        engines, reason = replica_engines(self.manager)
        if reason:
            self.problems.append(reason)
        after = [read_versions(e, self.timeout) for e in engines]
        self.problems += version_problems(self.last, after, global_steps)
        self.pushes += 1
        self.last = after
        if pending is None:
            return
        step, deliver, control = pending
        readings = [read_engine(e.url, timeout=self.timeout) for e in engines]
        maps = served_maps(readings)
        checks = [self._engines_check(after), self._version_check(step, global_steps, after)]
        roster = _roster_digest(maps) if maps else None
        changed = None
        if self.previous is None:
            checks.append(Check(id="publication.roster_stable", status="skipped",
                                detail=f"first publication read in this run (step {step}): the roster baseline"))
            checks.append(Check(id="publication.changed_since_previous", status="skipped",
                                detail="first publication read in this run: nothing earlier to differ from"))
        else:
            prev_step, prev_maps = self.previous
            checks.append(_roster_check(prev_step, prev_maps, maps))
            changed = _changed(prev_maps, maps)
            if changed:
                checks.append(Check(id="publication.changed_since_previous", status="pass",
                                    detail=f"{changed} served tensor(s) changed since step {prev_step}'s publication"))
            else:
                checks.append(Check(id="publication.changed_since_previous", status="fail",
                                    detail=f"the engines serve exactly what they served for step {prev_step}"))
        ctl = None
        if not control:
            checks.append(Check(id="publication.control", status="skipped", detail=CONTROL_OFF))
        elif any(r.observation.error for r in readings):
            checks.append(Check(id="publication.control", status="skipped",
                                detail="not run: an engine did not answer the checksum reading"))
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
        if not any(r.observation.error for r in readings):
            self.previous = (step, maps)
        self.since, self.pushes, self.problems = after, 0, []
        deliver(Observed(readings=readings, in_run=in_run, checks=checks))

    def _engines_check(self, after: list[EngineVersions]) -> Check:
        base = [v.url for v in self.baseline]
        now = [v.url for v in after]
        if base != now:
            return Check(id="publication.engines_stable", status="fail",
                         detail=f"{len(base)} engine(s) at the first save, {len(now)} now: {base} -> {now}")
        return Check(id="publication.engines_stable", status="pass",
                     detail=f"the same {len(now)} engine(s) as at the first save")

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
            reset = [read_engine(e.url, timeout=self.timeout) for e in engines]
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
                for e in engines:
                    weights_checker_action(e.url, "compare", timeout=self.timeout)
                compare_ok = True
            except EngineError as exc:
                notes.append(str(exc))
            again = [read_engine(e.url, timeout=self.timeout) for e in engines]
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
                  f"compare succeeded, checksums equal to the first reading") if ok else "; ".join(notes)
        ctl = PushControl(snapshot_ok=snapshot_ok, reset_changed=reset_changed, republished_versions=republished,
                          compare_ok=compare_ok, republished_equal=equal, detail=detail[:2000])
        return ctl, Check(id="publication.control", status="pass" if ok else "fail", detail=detail[:2000])


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


def check_after_push(trainer, global_step: int, deliver: Callable[[Observed], None], *,
                     control: bool = False, timeout: float = TIMEOUT) -> str | None:
    """Arrange for every engine to be read right after verl pushes `global_step`'s weights.

    Called from `on_save(trainer=..., global_step=...)`. Returns None when
    arranged: `deliver(Observed)` is then called once, in the trainer's thread,
    right after that push returns (no exception ever reaches the trainer).
    Otherwise returns why it cannot be, and `deliver` is never called.
    `control` runs the sensitivity control (it perturbs the engines).
    """
    manager, engines, reason = engines_of(trainer)
    if reason:
        return reason
    watch = getattr(manager.update_weights, _WATCH_ATTR, None)
    if watch is None:
        try:
            watch = _Watch(trainer.trainer_mode, manager, manager.update_weights, engines, timeout)
        except Exception as exc:
            return f"could not read the engines' versions at the first save: {type(exc).__name__}: {exc}"

        def update_weights(*args, **kwargs):
            return watch.push(*args, **kwargs)

        setattr(update_weights, _WATCH_ATTR, watch)
        # An instance attribute shadows the class's method for this trainer's
        # manager only; verl's trainers call it synchronously (auto_await).
        manager.update_weights = update_weights
    watch.expect(global_step, deliver, control)
    return None
