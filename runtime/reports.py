"""What ``tutorrl status``, ``runs`` and a set's ``run`` hand back (through ``tutorrl.api``): typed values,
read and reconciled by observe.py, runset.py and status.py, printed by text.py.

The set's record is here too, as what ``tutorrl status SET`` shows of a set (runset.py writes it).
"""

from __future__ import annotations

import msgspec

from tutorrl.runtime import records
from tutorrl.runtime.metrics import Summary


class RunState(msgspec.Struct, frozen=True, kw_only=True):
    """One run as ``tutorrl status`` shows it: its record, reconciled with Ray, and what was checked."""

    record: records.RunRecord
    #: The run folder, and its job's log in it.
    path: str
    log: str
    #: The Ray dashboard while something serves it (an embedded head dies with its run), else None.
    dashboard: str | None
    #: Whether the tutorrl process that owns the run is alive (None: it ran on another host).
    owner_alive: bool | None
    #: Whether this user's tutorrl wrote the record here (lifecycle.UNVERIFIED when not).
    verified: bool
    #: Step k/N, pace, reward; no ETA once the run has ended.
    progress: Summary


class RunRow(msgspec.Struct, frozen=True, kw_only=True):
    """One run of a bundle as ``tutorrl runs`` lists it."""

    #: The run id (its folder's name).
    run_id: str
    path: str
    #: Its record, reconciled with Ray where it was open; None where its run.json cannot be read.
    record: records.RunRecord | None
    verified: bool


class SetRecord(msgspec.Struct, forbid_unknown_fields=False):
    """``<state>/sets/<set-id>.json``: what a run of several bundles started and where each run is."""

    set_id: str
    started: str
    cwd: str
    bundles: list[str]  # absolute bundle folders, in the order they run
    points: list[str]  # each bundle's point ("actor.lr=1e-06, rollout.n=4"), or its experiment
    max_parallel: int
    address: str  # the shared head's dashboard, or the --address cluster
    address_kind: str  # "embedded" | "cluster"
    dry_run: bool
    runs: dict[str, str] = {}  # bundle -> its run folder, once its run has a record
    exit_codes: dict[str, int] = {}  # bundle -> how its `tutorrl run` ended
    owner: records.Process | None = None
    status: str = "running"  # "running" | "succeeded" | "failed" | "stopped"
    ended: str | None = None
    detached: bool = False  # its owner is a supervisor in a session of its own (`run --detach`)
    trust_digests: bool = False
    num_gpus: int | None = None  # what the embedded head declares (None: what the machine has)
    head: records.Process | None = None  # the set's embedded head, which every run of it uses
    head_dir: str | None = None
    upload: bool | None = None  # --upload / --no-upload, passed to each run (None: each run's default)
    quiet: bool = False  # --quiet: each run's own lines (state, step, evidence), relayed as "[k/N] ..." lines


class SetRow(msgspec.Struct, frozen=True, kw_only=True):
    """One bundle of a set as ``tutorrl status SET`` shows it: its point, its run's state, step k/N, last reward."""

    point: str
    bundle: str
    #: Its run's id, once its run has a record.
    run: str | None
    #: The run's status (" (dry run)" added), or waiting, not started, refused, ended (no record).
    state: str
    step: int | None
    total_steps: int | None
    reward: float | None
    reward_key: str | None
    exit_code: int | None


class SetState(msgspec.Struct, frozen=True, kw_only=True):
    """A set and a row per bundle (``tutorrl status SET``)."""

    record: SetRecord
    rows: list[SetRow]


class SetRun(msgspec.Struct, frozen=True, kw_only=True):
    """What ``tutorrl run`` of several bundles came to: the set (``set_id``, ``status``: running where it was
    detached and goes on) and a row per bundle (its run id, state, exit code)."""

    set_id: str
    status: str
    detached: bool
    state: SetState
    #: What ``tutorrl run`` exits with: 0 when every run succeeded (or the set was detached), 1 when one did
    #: not, 130 when the set was stopped, else its supervisor's code where a detached set did not start.
    exit_code: int


class StatusReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``tutorrl status`` shows. With a run: ``run_state``; with a set id: ``set_state``; with neither
    (the overview): the ``sets`` listed (every open one, the last that ended), the ``ended`` runs of no set
    listed (the last that ended), every ``open`` run of no set, and how many ended sets and runs were left
    out (``hidden_sets``, ``hidden_runs``: none with ``show_all``)."""

    run_state: RunState | None = None
    set_state: SetState | None = None
    sets: list[SetState] = []
    ended: list[RunState] = []
    open: list[RunState] = []
    hidden_sets: int = 0
    hidden_runs: int = 0
