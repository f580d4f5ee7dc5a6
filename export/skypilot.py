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
from tutorrl.export.yamltext import dumps

RAY_PORT = 6379  # SkyPilot keeps 6380 for its own Ray
AGENT_PORT = 52366  # SkyPilot's system Ray holds Ray's default, 52365, on every node
TEMPLATE = "~/sky_templates/ray/start_cluster"
TOKEN = "RAY_AUTH_TOKEN"  # Ray reads it before any token file


def remote_folder(bundle: Bundle) -> str:
    return f"~/tutorrl-bundles/{bundle.id}"


def run_script(bundle: Bundle) -> str:
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
        "  RAY_ADDRESS=\"$head_ip:$RAY_HEAD_PORT\" exec bash \"$bundle/launch.sh\"\n"
        "fi\n"
    )


def render(bundle: Bundle, *, accelerator: str, image: str | None = None) -> str:
    resources: dict = {"accelerators": f"{accelerator}:{bundle.uniform_gpus_per_node}"}
    if image:
        resources["image_id"] = f"docker:{image}"
    task: dict = {"name": f"tutorrl-{bundle.id}", "num_nodes": bundle.nodes, "resources": resources,
                  "file_mounts": {remote_folder(bundle): bundle.shown}}
    task["secrets"] = {name: None for name in sorted({*bundle.passthrough, TOKEN})}
    task["run"] = run_script(bundle)
    # `--secret NAME` takes the value from the submitting shell (SkyPilot's documented form).
    launch = f"{TOKEN}=\"$(openssl rand -hex 32)\" sky launch" + "".join(
        f" --secret {n}" for n in sorted({*bundle.passthrough, TOKEN}))
    comments = header(bundle, "skypilot") + (
        f"The nodes' Python must hold verl {bundle.verl} (`setup:` or --image); relative paths in the spec"
        " resolve against SkyPilot's working folder on the nodes.",
        f"Launch from the folder holding {sh_quote(bundle.shown)}: {launch} THIS_FILE",
        f"{TOKEN} is the token of the cluster's Ray (started by SkyPilot's {TEMPLATE}); keep it and give the"
        " same one to every later launch or exec on that cluster.",
    )
    return dumps(task, comments)
