"""The bundle contract: every name a bundle, a run and a job share, in one place.

What tutorrl writes and what other processes read back -- the files of a
bundle, the folders appended to it, the record names, the ``TUTORRL_*``
variables a job is given -- is spelled here once. Nothing is imported, so
the in-run evidence callback (inside verl's trainer), the compile path and
``launch.sh``'s helpers can all load it for free; ``.gitignore`` and the
templates follow it (``tests/cli/test_contract.py`` holds them to it).
"""

# -- The bundle: bundles/<id>/ -------------------------------------------------------------------------------------
BUNDLE_SCHEMA = "tutorrl.bundle/1"
# The id (the folder name) is the digest's first hex digits.
ID_LENGTH = 16
# The files that determine a launch, in the order the manifest lists them.
CONTENT_FILES = ("bundle.env", "launch.sh", "ray-job.json", "spec.toml")
MANIFEST = "manifest.json"
# Appended after compilation, outside the digest: runs/<run-id>/ and evidence/NNNNNN.json.
RUNS_DIR = "runs"
EVIDENCE_DIR = "evidence"
APPENDED_DIRS = (RUNS_DIR, EVIDENCE_DIR)
# ray-job.json's metadata key holding the bundle digest.
DIGEST_FIELD = "tutorrl_bundle"

# -- A run: runs/<run-id>/ -----------------------------------------------------------------------------------------
RUN_RECORD = "run.json"
JOB_LOG = "job.log"
METRICS = "metrics.jsonl"

# -- Evidence: evidence/ -------------------------------------------------------------------------------------------
# Records are NNNNNN.json (at least six digits, from 1; a seventh after 999999); HEAD names the newest.
RECORD_DIGITS = 6
RECORD_PATTERN = r"([0-9]{6,})\.json"  # group 1: the sequence
EVIDENCE_HEAD = "HEAD"

# -- Variables tutorrl gives a job (never set by a spec: the prefix is reserved) ----------------------------------
RESERVED_PREFIX = "TUTORRL_"
RUN_ID_ENV = "TUTORRL_RUN_ID"                   # the Ray submission id of the run
BUNDLE_DIR_ENV = "TUTORRL_BUNDLE_DIR"           # where the in-run callback appends evidence
EVIDENCE_ON_FAILURE_ENV = "TUTORRL_EVIDENCE_ON_FAILURE"  # "stop": the callback stops training
EVIDENCE_KEY_ENV = "TUTORRL_EVIDENCE_KEY"       # the path (never the bytes) of the signing key
SECRETS_FILE_ENV = "TUTORRL_SECRETS_FILE"       # passthrough values for an embedded head's job
NOTHING_ENV = "TUTORRL_NOTHING"                 # unset in every worker: the `$` transport relies on it
PYTHON_ENV = "TUTORRL_PYTHON"                   # the job's Python (launch.sh, preflight, the head)
JOB_VARIABLES = (RUN_ID_ENV, BUNDLE_DIR_ENV, EVIDENCE_ON_FAILURE_ENV, EVIDENCE_KEY_ENV, SECRETS_FILE_ENV,
                 NOTHING_ENV, PYTHON_ENV)

# -- Variables a user sets for tutorrl itself ----------------------------------------------------------------------
TRUST_DIGESTS_ENV = "TUTORRL_TRUST_DIGESTS"     # accept a bundle on its digests alone
STACK_CHECK_ENV = "TUTORRL_STACK_CHECK"         # "skip": no training-stack probe
EMBEDDED_NUM_GPUS_ENV = "TUTORRL_EMBEDDED_NUM_GPUS"  # GPUs the embedded head declares without --num-gpus
STATE_HOME_ENV = "TUTORRL_STATE_HOME"           # the per-user state folder (runs index, record key)
WHEEL_CACHE_ENV = "TUTORRL_WHEEL_CACHE"         # where `tutorrl keys import` keeps wheels
DATA_DIR_ENV = "TUTORRL_DATA_DIR"               # the per-user data folder (verl releases added by `tutorrl keys add`)
DEBUG_ENV = "TUTORRL_DEBUG"                     # "1": show the stack of an error
# Set by a set's `tutorrl run` for the `tutorrl run` of each of its bundles, not by a user.
SET_HEAD_ENV = "TUTORRL_SET_HEAD"               # the folder of the set's embedded head, which the run uses
USER_VARIABLES = (TRUST_DIGESTS_ENV, STACK_CHECK_ENV, EMBEDDED_NUM_GPUS_ENV, STATE_HOME_ENV, WHEEL_CACHE_ENV,
                  DATA_DIR_ENV, DEBUG_ENV, SET_HEAD_ENV)
