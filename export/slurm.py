"""A bundle as a Slurm batch script, following verl's Ray-on-Slurm recipe
(``examples/slurm/ray_on_slurm.slurm``): ``ray start --head`` on the first
node, ``ray start --address`` on the others, each a background ``srun`` step,
then the job itself as one more step on the head node (``srun --overlap``).

The bundle is read where it lies, on the file system the nodes share, from the
folder ``sbatch`` was run in (``SLURM_SUBMIT_DIR``), which is also where the
spec's relative paths point, as with ``tutorrl run``. Secrets are names only:
the script refuses to start unless each is set in the environment ``sbatch``
passes on (its default, ``--export=ALL``). As the bundle's real folder is
there, ``TUTORRL_BUNDLE_DIR`` lets verl's checkpoint callback append evidence
during the run.

Departures from the recipe, all for correctness: the node list is read one
name per line (the recipe's ``("$nodes")`` is a one-element array, so its
workers never start); the job waits until every node has joined Ray instead of
sleeping a fixed time; and Ray's token auth is set up by the job itself. Ray
2.60 turns token auth on at ``ray start --head`` whenever ``~/.ray/auth_token``
exists (any earlier local ``ray.init()`` writes it, and ``$HOME`` is shared on
a cluster), after which a probe or driver without the token is refused and the
job hangs. So the script never leaves it to chance: it writes a fresh token in
a folder of its own (``mktemp -d`` in the submit folder, mode 700, on the
shared file system so every node reads it, removed when the job ends) and
exports ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH`` before the first
``ray`` command, so every ``ray start``, the readiness probe and verl's own
``ray.init()`` use that token and nothing in ``~/.ray``.

Slurm's CPUs are Ray's (``--num-cpus`` from ``SLURM_CPUS_PER_TASK``): on a
cluster that confines a job to its cores, a Ray that counted the whole machine
would oversubscribe them. The defaults, 64 CPUs and 200G a node, are verl's
recipe's.

Arguments after the script go to verl (``launch.sh`` hands them on), so
``sbatch THIS_FILE --cfg job`` is a dry run: the bundle checks, Ray's start
and verl's config composition, no training.
"""

from __future__ import annotations

from tutorrl.export.common import Bundle, check_script, header, sh_quote, wait_function
from tutorrl.export.resume import resume_function
from tutorrl.export.yamltext import comment_lines


# verl's own Ray-on-Slurm recipe asks this much of each node.
DEFAULT_CPUS_PER_TASK = 64
DEFAULT_MEM = "200G"


def render(bundle: Bundle, *, partition: str | None = None, time_limit: str | None = None,
           cpus_per_task: int | None = None, mem: str | None = None, account: str | None = None,
           retries: int | None = None) -> str:
    gpus = bundle.uniform_gpus_per_node
    retries = bundle.retries if retries is None else retries
    sbatch = [f"--job-name=tutorrl-{bundle.id}", f"--nodes={bundle.nodes}", "--ntasks-per-node=1",
              f"--gpus-per-node={gpus}", f"--cpus-per-task={cpus_per_task or DEFAULT_CPUS_PER_TASK}",
              f"--mem={mem or DEFAULT_MEM}", f"--output=tutorrl-{bundle.id}-%j.out"]
    if account:
        sbatch.append(f"--account={account}")
    if partition:
        sbatch.append(f"--partition={partition}")
    if time_limit:
        sbatch.append(f"--time={time_limit}")
    if retries:
        # Append: a requeued job starts again with the same --output file, which Slurm truncates by default
        # (JobFileAppend=0), so without it the failed start's output, and why it was requeued, would be lost.
        sbatch += ["--requeue", "--open-mode=append"]
    comments = header(bundle, "slurm") + (
        f"The nodes' Python must hold verl {bundle.verl}; the bundle folder must be on a file system every node"
        " shares.",
        f"Submit from the folder holding {bundle.shown}: sbatch THIS_FILE (a dry run: sbatch THIS_FILE --cfg job)",
    )
    secrets = ""
    if bundle.passthrough:
        names = " ".join(sh_quote(n) for n in bundle.passthrough)  # names (common.load checks), quoted all the same
        secrets = (
            "# Secrets by name only: set in the environment sbatch passes on, never written here.\n"
            "missing=()\n"
            f"for name in {names}; do\n"
            "  [ -n \"${!name:-}\" ] || missing+=(\"$name\")\n"
            "done\n"
            "if [ ${#missing[@]} -gt 0 ]; then\n"
            "  echo \"tutorrl: not set in the submitting environment: ${missing[*]}\" >&2\n"
            "  exit 2\n"
            "fi\n"
        )
    return (
        "#!/usr/bin/env bash\n"
        + "".join(f"#SBATCH {line}\n" for line in sbatch)
        + comment_lines(comments)
        + "set -euo pipefail\n"
        "cd \"${SLURM_SUBMIT_DIR:-.}\"\n"
        f"bundle={sh_quote(bundle.shown)}\n"
        + secrets
        + check_script(bundle)
        + "# Exported before `ray start`: Ray's workers inherit the environment of the node's raylet.\n"
        "source \"$bundle/bundle.env\"\n"
        "TUTORRL_BUNDLE_DIR=\"$(cd \"$bundle\" && pwd)\"  # apart from `export`, so a failing cd stops the job\n"
        "export TUTORRL_BUNDLE_DIR\n"
        "export TUTORRL_RUN_ID=\"slurm-${SLURM_JOB_ID:-unknown}\"\n"
        + AUTH
        + wait_function()
        + "mapfile -t nodes < <(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\n"
        "head_node=${nodes[0]}\n"
        "# The head's address: the head node's own, unless TUTORRL_RAY_HEAD_IP names another (a network of\n"
        "# several; on one machine a loopback address other than 127.0.0.1, which `ray start` would replace\n"
        "# by the machine's routable address).\n"
        "if [ -n \"${TUTORRL_RAY_HEAD_IP:-}\" ]; then\n"
        "  head_ip=$TUTORRL_RAY_HEAD_IP\n"
        "else\n"
        "  head_ip=$(srun --nodes=1 --ntasks=1 -w \"$head_node\" hostname --ip-address)\n"
        "  head_ip=${head_ip%% *}  # the first address where a node has several\n"
        "fi\n"
        "# A node shared with other jobs: TUTORRL_RAY_PORT and TUTORRL_RAY_HEAD_OPTIONS (e.g. --dashboard-port=N)\n"
        "# move the head off Ray's default ports.\n"
        "port=${TUTORRL_RAY_PORT:-6379}\n"
        "srun --nodes=1 --ntasks=1 -w \"$head_node\" \\\n"
        "  ray start --head --disable-usage-stats --node-ip-address=\"$head_ip\" --port=\"$port\" \\\n"
        f"  --num-cpus=\"$SLURM_CPUS_PER_TASK\" --num-gpus={gpus} ${{TUTORRL_RAY_HEAD_OPTIONS:-}} --block &\n"
        "for node in \"${nodes[@]:1}\"; do\n"
        "  srun --nodes=1 --ntasks=1 -w \"$node\" \\\n"
        "    ray start --address=\"$head_ip:$port\" --disable-usage-stats \\\n"
        f"    --num-cpus=\"$SLURM_CPUS_PER_TASK\" --num-gpus={gpus} --block &\n"
        "done\n"
        f"tutorrl_wait_nodes \"$head_ip:$port\" {bundle.nodes}\n"
        + (_launch() if not retries else _launch_requeued(bundle, retries))
    )


def _launch() -> str:
    return ("RAY_ADDRESS=\"$head_ip:$port\" srun --overlap --nodes=1 --ntasks=1 -w \"$head_node\" \\\n"
            "  bash \"$bundle/launch.sh\" \"$@\"\n")


def _launch_requeued(bundle: Bundle, retries: int) -> str:
    return (
        resume_function(bundle, retries, "${SLURM_RESTART_COUNT:-0}", "restart")
        + "tutorrl_resume_args\n"
        "status=0\n"
        "# The resume arguments after the job's own: verl's command line is Hydra's argparse, whose overrides are\n"
        "# one run of positionals, so an option such as the dry run's --cfg job must come before them all.\n"
        "RAY_ADDRESS=\"$head_ip:$port\" srun --overlap --nodes=1 --ntasks=1 -w \"$head_node\" \\\n"
        "  bash \"$bundle/launch.sh\" \"$@\" ${resume[@]+\"${resume[@]}\"} || status=$?\n"
        "# A failed job goes back in the queue (#SBATCH --requeue covers a lost node or preemption); launch.sh's\n"
        "# refusals (2, 3) would be refused again.\n"
        "case $status in\n"
        "  0) exit 0 ;;\n"
        "  2|3) echo \"tutorrl: launch.sh refused the job (exit $status); not requeued\" >&2; exit \"$status\" ;;\n"
        "esac\n"
        f"if [ \"${{SLURM_RESTART_COUNT:-0}}\" -lt {retries} ]; then\n"
        f"  echo \"tutorrl: the job failed (exit $status); requeued, restart $((${{SLURM_RESTART_COUNT:-0}} + 1)) of {retries}\" >&2\n"
        "  # Slurm refuses a job submitted with --no-requeue (\"presently disabled\"): the job then says so and ends\n"
        "  # with launch.sh's status (under set -e it would end with scontrol's, having said it was requeued).\n"
        "  scontrol requeue \"$SLURM_JOB_ID\" || echo \"tutorrl: Slurm did not requeue the job; it ends failed\" >&2\n"
        "else\n"
        f"  echo \"tutorrl: the job failed (exit $status) after {retries} restart(s); not requeued\" >&2\n"
        "fi\n"
        "exit \"$status\"\n"
    )


# Ray's token auth, owned by this job (see the module's docstring). The folder
# is mktemp's (mode 700) in the submit folder, which every node shares; a
# RAY_AUTH_TOKEN from the submitting environment would win over the file, so it
# is dropped. The token is 32 random bytes in hex, read from /dev/urandom with
# coreutils, so nothing but the shell runs before Ray's own checks.
AUTH = (
    "# Ray's token auth, set up by this job alone: a fresh token in a folder of its own (never ~/.ray),\n"
    "# which every `ray start`, the readiness probe and verl's ray.init() read.\n"
    "job_dir=$(mktemp -d \"$PWD/.tutorrl-slurm-${SLURM_JOB_ID:-job}.XXXXXX\")\n"
    "trap 'rm -rf \"$job_dir\"' EXIT\n"
    "(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > \"$job_dir/ray-token\")\n"
    "unset RAY_AUTH_TOKEN\n"
    "export RAY_AUTH_MODE=token\n"
    "export RAY_AUTH_TOKEN_PATH=\"$job_dir/ray-token\"\n"
)
