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

Two departures from the recipe, both for correctness: the node list is read
one name per line (the recipe's ``("$nodes")`` is a one-element array, so its
workers never start), and the job waits until every node has joined Ray
instead of sleeping a fixed time.
"""

from __future__ import annotations

from tutorrl.export.common import Bundle, check_script, header, sh_quote, wait_function
from tutorrl.export.yamltext import comment_lines


def render(bundle: Bundle, *, partition: str | None = None, time_limit: str | None = None) -> str:
    gpus = bundle.uniform_gpus_per_node
    sbatch = [f"--job-name=tutorrl-{bundle.id}", f"--nodes={bundle.nodes}", "--ntasks-per-node=1",
              f"--gpus-per-node={gpus}", f"--output=tutorrl-{bundle.id}-%j.out"]
    if partition:
        sbatch.append(f"--partition={partition}")
    if time_limit:
        sbatch.append(f"--time={time_limit}")
    comments = header(bundle, "slurm") + (
        f"The nodes' Python must hold verl {bundle.verl}; the bundle folder must be on a file system every node"
        " shares.",
        f"Submit from the folder holding {bundle.shown}: sbatch THIS_FILE",
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
        "export TUTORRL_BUNDLE_DIR=\"$(cd \"$bundle\" && pwd)\"\n"
        "export TUTORRL_RUN_ID=\"slurm-${SLURM_JOB_ID:-unknown}\"\n"
        + wait_function()
        + "mapfile -t nodes < <(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\n"
        "head_node=${nodes[0]}\n"
        "head_ip=$(srun --nodes=1 --ntasks=1 -w \"$head_node\" hostname --ip-address)\n"
        "head_ip=${head_ip%% *}  # the first address where a node has several\n"
        "port=${TUTORRL_RAY_PORT:-6379}\n"
        "cpus=(${SLURM_CPUS_PER_TASK:+--num-cpus=\"$SLURM_CPUS_PER_TASK\"})\n"
        "srun --nodes=1 --ntasks=1 -w \"$head_node\" \\\n"
        f"  ray start --head --node-ip-address=\"$head_ip\" --port=\"$port\" \"${{cpus[@]}}\" --num-gpus={gpus} --block &\n"
        "for node in \"${nodes[@]:1}\"; do\n"
        "  srun --nodes=1 --ntasks=1 -w \"$node\" \\\n"
        f"    ray start --address=\"$head_ip:$port\" \"${{cpus[@]}}\" --num-gpus={gpus} --block &\n"
        "done\n"
        f"tutorrl_wait_nodes \"$head_ip:$port\" {bundle.nodes}\n"
        "RAY_ADDRESS=\"$head_ip:$port\" srun --overlap --nodes=1 --ntasks=1 -w \"$head_node\" \\\n"
        "  bash \"$bundle/launch.sh\"\n"
    )
