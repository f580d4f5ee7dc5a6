"""A bundle as a SkyPilot task (``sky launch``), following verl's SkyPilot recipe.

The bundle folder travels as a ``file_mounts`` entry; every node checks its
sha256 against the export, sources ``bundle.env`` (so the Ray workers it
starts carry the bundle's environment) and starts Ray -- the head on rank 0,
the others joining it -- and rank 0 waits for all of them and runs
``launch.sh``. Secrets are ``secrets:`` names with no value: SkyPilot asks for
them (``--secret NAME`` passes the submitter's value) and never writes them.

SkyPilot's machines are alike, so the reward GPUs are spread over them
(``common.Bundle.uniform_gpus_per_node``); the accelerator type is the user's
(``--accelerator``), as the bundle says how many GPUs, never which.

Ray is started by SkyPilot's own template, ``~/sky_templates/ray/start_cluster``
(on every SkyPilot node), not by a ``ray start`` of the task's: SkyPilot's
system Ray holds the dashboard agent's default port on every node, so a second
head with Ray's defaults has no agent to take jobs, and a second ``ray start
--head`` on a re-run (``sky exec``) exits 1. The template starts the head on
rank 0 and a worker elsewhere (GPUs from ``SKYPILOT_NUM_GPUS_PER_NODE``, which
is the task's accelerator count), skips nodes where the user's Ray already
runs, and is steered by environment variables: the task sets
``RAY_HEAD_PORT`` and ``RAY_DASHBOARD_AGENT_LISTEN_PORT`` (52366, beside
SkyPilot's 52365).

Ray 2.60 turns token auth on at ``ray start --head`` when ``~/.ray/auth_token``
exists, after which a client without the token is refused. So the task never
leaves it to chance: ``RAY_AUTH_MODE=token`` and the token is a SkyPilot
secret, ``RAY_AUTH_TOKEN``, which SkyPilot hands to every node (nodes share no
file system to pass a file on). The token lives as long as the cluster's Ray:
a re-run on the same cluster gives the same one.
"""

from __future__ import annotations

from tutorrl.export.common import Bundle, check_script, header, sh_quote, wait_function
from tutorrl.export.resume import resume_function
from tutorrl.export.yamltext import dumps

import re

_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*")
RAY_PORT = 6379  # SkyPilot keeps 6380 for its own Ray
AGENT_PORT = 52366  # SkyPilot's system Ray holds Ray's default, 52365, on every node
TEMPLATE = "~/sky_templates/ray/start_cluster"
TOKEN = "RAY_AUTH_TOKEN"  # Ray reads it before any token file


def remote_folder(bundle: Bundle) -> str:
    return f"~/tutorrl-bundles/{bundle.id}"


def run_script(bundle: Bundle, store: str | None = None) -> str:
    return (
        "set -euo pipefail\n"
        f"bundle={remote_folder(bundle)}\n"
        + check_script(bundle)
        + "# Exported before Ray starts: Ray's workers inherit the environment of the node's raylet.\n"
        "source \"$bundle/bundle.env\"\n"
        "# Ray's token auth, on for every `ray` command and probe; the token is the task's secret.\n"
        f": \"${{{TOKEN}:?is the Ray token of this cluster: sky launch --secret {TOKEN}}}\"\n"
        "export RAY_AUTH_MODE=token\n"
        "unset RAY_AUTH_TOKEN_PATH\n"
        "# SkyPilot's Ray template: head on rank 0, a worker elsewhere, nothing where Ray already runs.\n"
        f"export RAY_HEAD_PORT=\"${{RAY_HEAD_PORT:-{RAY_PORT}}}\" RAY_DASHBOARD_AGENT_LISTEN_PORT=\"${{RAY_DASHBOARD_AGENT_LISTEN_PORT:-{AGENT_PORT}}}\"\n"
        f"{TEMPLATE}\n"
        + wait_function()
        + "if [ \"$SKYPILOT_NODE_RANK\" = 0 ]; then\n"
        "  head_ip=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\n"
        "  tutorrl_wait_nodes \"$head_ip:$RAY_HEAD_PORT\" \"$SKYPILOT_NUM_NODES\"\n"
        + ("  RAY_ADDRESS=\"$head_ip:$RAY_HEAD_PORT\" exec bash \"$bundle/launch.sh\"\n" if store is None
           else _managed_launch(bundle, store))
        + "fi\n"
    )


# Where the managed form mounts its bucket on every node.
STORE = "/tutorrl-store"


def _managed_launch(bundle: Bundle, store: str) -> str:
    """Rank 0 of a managed job: the bundle, its evidence and the checkpoints live on the bucket, so a
    recovered job (a new cluster) finds them and resumes from the newest checkpoint whose evidence verifies."""
    out = bundle.output_dir or ""
    copy = f"{store}/bundles/{bundle.id}"
    lines = (
        "# A managed job: the bundle (with its evidence) and the checkpoints on the bucket, which a recovered\n"
        "# job, on a new cluster, finds again. The first start copies the bundle there.\n"
        f"if [ ! -e {copy}/manifest.json ]; then\n"
        f"  mkdir -p {copy}.part && cp -R \"$bundle/.\" {copy}.part/ && mv {copy}.part {copy}\n"
        "fi\n"
        f"bundle={copy}\n"
        + check_script(bundle)
        + f"# trainer.output_dir ({out}) is the bucket's checkpoint folder.\n"
        f"if [ -e {sh_quote(out)} ] && [ ! -L {sh_quote(out)} ]; then\n"
        f"  echo \"tutorrl: {out} exists in the working folder; the checkpoints must go to the bucket\" >&2\n"
        "  exit 3\n"
        "fi\n"
        f"mkdir -p {store}/checkpoints/{bundle.id} \"$(dirname {sh_quote(out)})\"\n"
        f"ln -sfn {store}/checkpoints/{bundle.id} {sh_quote(out)}\n"
        "TUTORRL_BUNDLE_DIR=\"$(cd \"$bundle\" && pwd)\"\n"
        "export TUTORRL_BUNDLE_DIR TUTORRL_RUN_ID=\"skypilot-${SKYPILOT_TASK_ID:-unknown}\"\n"
        "# The starts are counted on the bucket: SkyPilot's recovery (preemption, or an error within\n"
        "# job_recovery.max_restarts_on_errors) starts this script again on a new cluster.\n"
        f"starts=$(( $(cat {store}/starts/{bundle.id} 2>/dev/null || echo 0) + 1 ))\n"
        f"mkdir -p {store}/starts && echo \"$starts\" > {store}/starts/{bundle.id}\n"
        + resume_function(bundle, None, "$((starts - 1))", "recovery")
        + "tutorrl_resume_args\n"
        "RAY_ADDRESS=\"$head_ip:$RAY_HEAD_PORT\" exec bash \"$bundle/launch.sh\" ${resume[@]+\"${resume[@]}\"}\n"
    )
    return lines  # not indented: the sha256 check's here-document ends at a line's start


def managed_problem(bundle: Bundle) -> str | None:
    """Why the bundle cannot run as a managed job, or None: its checkpoints must go to the bucket, which
    a relative trainer.output_dir (in SkyPilot's working folder) lets the job link there."""
    out = bundle.output_dir
    if not out:
        return "its spec sets no trainer.output_dir, so a recovered job would have no checkpoints to resume from"
    if out.startswith("/") or "$" in out or ".." in out.split("/") or not _WORD.fullmatch(out):
        return (f"its trainer.output_dir {out!r} is not a plain relative path (letters, digits, _.-/), which the "
                "job links into the bucket")
    return None


def render(bundle: Bundle, *, accelerator: str, image: str | None = None, bucket: str | None = None,
           retries: int | None = None) -> str:
    """The task; with ``bucket``, the managed-job form (``sky jobs launch``) recovering ``retries`` failures."""
    retries = bundle.retries if retries is None else retries
    resources: dict = {"accelerators": f"{accelerator}:{bundle.uniform_gpus_per_node}"}
    if image:
        resources["image_id"] = f"docker:{image}"
    if bucket is not None:
        resources["job_recovery"] = {"strategy": "EAGER_NEXT_REGION", "max_restarts_on_errors": retries or 0}
    task: dict = {"name": f"tutorrl-{bundle.id}", "num_nodes": bundle.nodes, "resources": resources,
                  "file_mounts": {remote_folder(bundle): bundle.shown}}
    if bucket is not None:
        task["file_mounts"][STORE] = {"name": bucket, "mode": "MOUNT"}
    task["secrets"] = {name: None for name in sorted({*bundle.passthrough, TOKEN})}
    task["run"] = run_script(bundle, STORE if bucket is not None else None)
    # `--secret NAME` takes the value from the submitting shell (SkyPilot's documented form).
    launch = f"{TOKEN}=\"$(openssl rand -hex 32)\" sky {'launch' if bucket is None else 'jobs launch'}" + "".join(
        f" --secret {n}" for n in sorted({*bundle.passthrough, TOKEN}))
    comments = header(bundle, "skypilot") + (
        f"The nodes' Python must hold verl {bundle.verl} (`setup:` or --image); relative paths in the spec"
        " resolve against SkyPilot's working folder on the nodes.",
        f"Launch from the folder holding {sh_quote(bundle.shown)}: {launch} THIS_FILE",
        f"{TOKEN} is the token of the cluster's Ray (started by SkyPilot's {TEMPLATE}); keep it and give the"
        " same one to every later launch or exec on that cluster.",
    ) + (() if bucket is None else (
        f"A managed job: SkyPilot recovers a preempted job, and one that fails up to {retries or 0} time(s);"
        f" the bundle, its evidence and the checkpoints live on bucket {bucket} (mounted at {STORE}), and a"
        " recovered start resumes from the newest checkpoint whose evidence verifies.",))
    return dumps(task, comments)
