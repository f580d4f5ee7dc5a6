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
"""

from __future__ import annotations

from tutorrl.export.common import Bundle, check_script, header, sh_quote, wait_function
from tutorrl.export.yamltext import dumps

RAY_PORT = 6379  # SkyPilot keeps 6380 for its own Ray


def remote_folder(bundle: Bundle) -> str:
    return f"~/tutorrl-bundles/{bundle.id}"


def run_script(bundle: Bundle) -> str:
    gpus = bundle.uniform_gpus_per_node
    return (
        "set -euo pipefail\n"
        f"bundle={remote_folder(bundle)}\n"
        + check_script(bundle)
        + "# Exported before `ray start`: Ray's workers inherit the environment of the node's raylet.\n"
        "source \"$bundle/bundle.env\"\n"
        + wait_function()
        + "head_ip=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)\n"
        f"if [ \"$SKYPILOT_NODE_RANK\" = 0 ]; then\n"
        f"  ray start --head --disable-usage-stats --port={RAY_PORT} --num-gpus={gpus}\n"
        f"  tutorrl_wait_nodes \"$head_ip:{RAY_PORT}\" \"$SKYPILOT_NUM_NODES\"\n"
        f"  RAY_ADDRESS=\"$head_ip:{RAY_PORT}\" exec bash \"$bundle/launch.sh\"\n"
        "else\n"
        f"  tutorrl_wait_head() {{ \"$python_bin\" -c 'import sys, socket; socket.create_connection((sys.argv[1], {RAY_PORT}), 5)' \"$head_ip\" 2>/dev/null; }}\n"
        f"  until tutorrl_wait_head; do sleep 5; done\n"
        f"  ray start --address=\"$head_ip:{RAY_PORT}\" --disable-usage-stats --num-gpus={gpus}\n"
        "fi\n"
    )


def render(bundle: Bundle, *, accelerator: str, image: str | None = None) -> str:
    resources: dict = {"accelerators": f"{accelerator}:{bundle.uniform_gpus_per_node}"}
    if image:
        resources["image_id"] = f"docker:{image}"
    task: dict = {"name": f"tutorrl-{bundle.id}", "num_nodes": bundle.nodes, "resources": resources,
                  "file_mounts": {remote_folder(bundle): bundle.shown}}
    if bundle.passthrough:
        task["secrets"] = {name: None for name in bundle.passthrough}
    task["run"] = run_script(bundle)
    launch = "sky launch"
    if bundle.passthrough:
        launch += "".join(f" --secret {n}" for n in bundle.passthrough)
    comments = header(bundle, "skypilot") + (
        f"The nodes' Python must hold verl {bundle.verl} (`setup:` or --image); relative paths in the spec"
        " resolve against SkyPilot's working folder on the nodes.",
        f"Launch from the folder holding {sh_quote(bundle.shown)}: {launch} THIS_FILE",
    )
    return dumps(task, comments)
