"""How to run a bundle: the typed options of ``tutorrl run``, and the seam where its job goes.

:class:`RunOptions` is what the command line's flags mean, for callers that
are not the command line (the Python API, a detached run's supervisor). The
runtime reads only these attribute names, so an argparse ``Namespace`` with
the same names still works for the CLI.

:class:`Jobs` is the one place a run meets Ray: the cluster's resources and a
Jobs API client. :data:`RAY` is Ray's own; a caller (a test, a notebook, a
scheduler integration) may pass another, as the seed launcher let its users
replace its runner. Everything before it (verify, preflight, the run record)
and after it (following the log, closing the record, evidence) stays
tutorrl's, so a replaced seam still exercises the real run path.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import msgspec


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    """One run of one bundle; every field is a ``tutorrl run`` flag of the same name."""

    #: The bundle folder (``bundles/<id>``).
    bundle: str
    #: Dashboard URL of an existing Ray cluster (``http://head:8265``); None starts an embedded head.
    address: str | None = None
    #: Ship the bundle as the job's working_dir. None: yes for a non-loopback address, else no.
    upload: bool | None = None
    #: verl composes and validates its config (``--cfg job``); nothing trains.
    dry_run: bool = False
    #: GPUs the embedded head declares (None: what the machine has). Only without ``address``.
    num_gpus: int | None = None
    #: Submit, hand the run to a supervisor in its own session, and return.
    detach: bool = False
    #: Only tutorrl's own lines on the command line (the job's log is still written to the run folder).
    quiet: bool = False
    #: No progress lines of tutorrl's own (the job's output is still shown); what each run of a set uses.
    no_progress: bool = False
    #: When the job fails or is preempted, submit it again up to this many times, resuming from the newest
    #: checkpoint whose evidence record verifies (runtime/retry.py); None: no retries.
    retries: int | None = None
    #: Seconds before the first resubmission, doubled for each later one (None: none).
    retry_backoff: float | None = None
    #: Accept a bundle this tutorrl cannot re-derive on its digests alone (with a warning).
    trust_digests: bool = False
    #: A set (``tutorrl run B1 B2 ...``, runtime/runset.py) runs at most this many at once; one
    #: bundle's run has no use for it (each run of a set is one RunOptions without it).
    max_parallel: int | None = None


class JobClient(Protocol):
    """What a run asks of a Jobs API (Ray's ``JobSubmissionClient`` answers these)."""

    def submit_job(self, **kwargs: Any) -> str: ...

    def get_job_status(self, submission_id: str) -> Any: ...

    def get_job_info(self, submission_id: str) -> Any: ...

    def get_job_logs(self, submission_id: str) -> str: ...

    def tail_job_logs(self, submission_id: str) -> Any: ...

    def stop_job(self, submission_id: str) -> bool: ...


@runtime_checkable
class Jobs(Protocol):
    """Where a run's job goes, given the dashboard URL and the headers (a token) to reach it."""

    def resources(self, url: str, headers: dict[str, str]) -> Any:
        """The cluster's resources, as :class:`tutorrl.runtime.cluster.Resources`."""

    def client(self, url: str, headers: dict[str, str]) -> JobClient:
        """A Jobs API client for that cluster."""


class _Ray:
    """Ray's own: the dashboard's state API for resources, its Jobs API for the job."""

    def resources(self, url: str, headers: dict[str, str]) -> Any:
        from tutorrl.runtime import cluster

        return cluster.cluster_resources(url, headers)

    def client(self, url: str, headers: dict[str, str]) -> JobClient:
        from tutorrl.runtime import jobs_api

        client: JobClient = jobs_api.client(url, headers)
        return client

    def __repr__(self) -> str:
        return "RAY"


RAY: Jobs = _Ray()
