"""Running a bundle as a Ray job: preflight, the embedded head or a cluster, run records, stop.

``tutorrl run`` (:mod:`~tutorrl.runtime.run`) checks the bundle and the job's
stack, starts or reaches a head, submits the job with the bundle's env names
filled from the user's environment, follows it, and appends the run's
record (``runs/<id>/``) and its evidence to the bundle.
"""

# The package's face (tutorrl/_face.py): the names other packages may import,
# each loaded on first use; the TYPE_CHECKING imports are for editors.
from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.runtime.envtransport import encode_env
    from tutorrl.runtime.lifecycle import reconcile
    from tutorrl.runtime.observe import Stopped, stop_run
    from tutorrl.runtime.options import Jobs, RunOptions
    from tutorrl.runtime.preflight import gpu_layout, needed_gpus
    from tutorrl.runtime.progress import Progress
    from tutorrl.runtime.records import LOG_FILE, RunRecord
    from tutorrl.runtime.reports import RunRow, SetRun, StatusReport
    from tutorrl.runtime.retry import no_resume_keys, resume_targets
    from tutorrl.runtime.run import RunSession, exit_code_of
    from tutorrl.runtime.stack_derive import derive_stack, wheel_requirements
    from tutorrl.runtime.submit import passthrough_names
    from tutorrl.runtime.verbs import ModelMade, list_runs, make_model_folder, run_bundles, run_log, run_status, stop_ref

_EXPORTS = {
    "envtransport": ("encode_env",),
    "lifecycle": ("reconcile",),
    "observe": ("Stopped", "stop_run"),
    "options": ("Jobs", "RunOptions"),
    "preflight": ("gpu_layout", "needed_gpus"),
    "progress": ("Progress",),
    "records": ("LOG_FILE", "RunRecord"),
    "reports": ("RunRow", "SetRun", "StatusReport"),
    "retry": ("no_resume_keys", "resume_targets"),
    "run": ("RunSession", "exit_code_of"),
    "stack_derive": ("derive_stack", "wheel_requirements"),
    "submit": ("passthrough_names",),
    "verbs": ("ModelMade", "list_runs", "make_model_folder", "run_bundles", "run_log", "run_status", "stop_ref"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "Jobs",
    "LOG_FILE",
    "ModelMade",
    "Progress",
    "RunOptions",
    "RunRecord",
    "RunRow",
    "RunSession",
    "SetRun",
    "StatusReport",
    "Stopped",
    "derive_stack",
    "encode_env",
    "exit_code_of",
    "gpu_layout",
    "list_runs",
    "make_model_folder",
    "needed_gpus",
    "no_resume_keys",
    "passthrough_names",
    "reconcile",
    "resume_targets",
    "run_bundles",
    "run_log",
    "run_status",
    "stop_ref",
    "stop_run",
    "wheel_requirements",
]
