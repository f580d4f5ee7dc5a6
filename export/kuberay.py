"""A bundle as a KubeRay ``RayJob`` (ray.io/v1) and the ``ConfigMap`` that carries its files.

The files travel in a ConfigMap mounted read-only in every Ray pod (the job's
driver may be scheduled on any of them). Kubernetes projects ConfigMap keys as
symbolic links, which ``tutorrl verify`` rightly refuses, so the job copies
them into a private folder, checks their sha256 against the export, and runs
``launch.sh`` from there. Secrets are never written: each passthrough name is
a ``secretKeyRef`` into one Secret the user creates (``--secret``).

GPUs: one worker group of ``nodes`` pods, each with the trainer's GPUs per
node plus its share of the reward GPUs (a reward plug-in addresses its GPU on
the trainer's machine, e.g. ``cuda:7``, so they cannot be a pod of their own);
the head holds none, so verl's workers never land on it.

Known limits, said in the output as well: the image must hold the bundle's verl
release (``launch.sh`` refuses another) and, for the evidence callback,
tutorrl; relative paths in the spec resolve against the Ray pods' working
folder, so data and models belong on a volume mounted at an absolute path.
"""

from __future__ import annotations

import json

from tutorrl.export.common import BUNDLE_FILES, Bundle, check_script, header
from tutorrl.export.yamltext import dumps_all

MOUNT = "/tutorrl/bundle-files"
START = "tutorrl-start.sh"
DEFAULT_SECRET = "tutorrl-secrets"
GPU = "nvidia.com/gpu"


def _labels(bundle: Bundle) -> dict:
    return {"app.kubernetes.io/managed-by": "tutorrl", "tutorrl.dev/bundle": bundle.id}


def _annotations(bundle: Bundle) -> dict:
    return {"tutorrl.dev/digest": bundle.digest, "tutorrl.dev/experiment": bundle.experiment,
            "tutorrl.dev/verl": bundle.verl}


def start_script(bundle: Bundle) -> str:
    return (
        "#!/usr/bin/env bash\n"
        f"# tutorrl: start of the RayJob for bundle {bundle.digest}.\n"
        "set -euo pipefail\n"
        "# Where the ConfigMap is mounted (TUTORRL_BUNDLE_FILES: for a pod that mounts it elsewhere).\n"
        f"files=\"${{TUTORRL_BUNDLE_FILES:-{MOUNT}}}\"\n"
        f"bundle=\"${{TMPDIR:-/tmp}}/tutorrl-bundles/{bundle.id}\"\n"
        "rm -rf \"$bundle\"\n"
        "mkdir -p \"$bundle\"\n"
        "# ConfigMap keys are links into a hidden folder; the bundle is checked as plain files.\n"
        f"for name in {' '.join(BUNDLE_FILES)}; do\n"
        "  cat \"$files/$name\" > \"$bundle/$name\"\n"
        "done\n"
        + check_script(bundle)
        + "exec bash \"$bundle/launch.sh\"\n"
    )


def _container(name: str, image: str, bundle: Bundle, secret: str, gpus: int) -> dict:
    container = {"name": name, "image": image}
    if bundle.passthrough:
        container["env"] = [{"name": n, "valueFrom": {"secretKeyRef": {"name": secret, "key": n}}}
                            for n in bundle.passthrough]
    if gpus:
        container["resources"] = {"limits": {GPU: gpus}, "requests": {GPU: gpus}}
    container["volumeMounts"] = [{"name": "tutorrl-bundle", "mountPath": MOUNT, "readOnly": True}]
    return container


def _pod(name: str, image: str, bundle: Bundle, secret: str, gpus: int) -> dict:
    return {"metadata": {"labels": _labels(bundle)},
            "spec": {"containers": [_container(name, image, bundle, secret, gpus)],
                     "volumes": [{"name": "tutorrl-bundle",
                                  "configMap": {"name": f"tutorrl-bundle-{bundle.id}"}}]}}


def _group(name: str, replicas: int, image: str, bundle: Bundle, secret: str, gpus: int) -> dict:
    return {"groupName": name, "replicas": replicas, "minReplicas": replicas, "maxReplicas": replicas,
            "rayStartParams": {}, "template": _pod("ray-worker", image, bundle, secret, gpus)}


def render(bundle: Bundle, *, image: str, secret: str = DEFAULT_SECRET) -> str:
    from tutorrl.runtime import encode_env

    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"tutorrl-bundle-{bundle.id}", "labels": _labels(bundle),
                     "annotations": _annotations(bundle)},
        "data": {**{n: bundle.files[n].decode("utf-8") for n in BUNDLE_FILES}, START: start_script(bundle)},
    }
    job = json.loads(bundle.files["ray-job.json"])
    workers = [_group("gpu", bundle.nodes, image, bundle, secret, bundle.uniform_gpus_per_node)]
    spec = {
        # KubeRay pastes the entrypoint into its submitter's shell command line:
        # one plain command, no shell syntax of ours in it.
        "entrypoint": f"bash {MOUNT}/{START}",
        "runtimeEnvYAML": json.dumps({"env_vars": encode_env(bundle.env)}, sort_keys=True),
        "metadata": {str(k): str(v) for k, v in sorted((job.get("metadata") or {}).items())},
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": _pod("ray-head", image, bundle, secret, 0)},
            "workerGroupSpecs": workers,
        },
    }
    if bundle.entrypoint_num_cpus:
        spec["entrypointNumCpus"] = bundle.entrypoint_num_cpus
    if bundle.entrypoint_num_gpus:
        spec["entrypointNumGpus"] = bundle.entrypoint_num_gpus
    ray_job = {"apiVersion": "ray.io/v1", "kind": "RayJob",
               "metadata": {"name": f"tutorrl-{bundle.id}", "labels": _labels(bundle),
                            "annotations": _annotations(bundle)},
               "spec": dict(sorted(spec.items()))}
    comments = header(bundle, "kuberay") + (
        f"The image ({image}) must hold verl {bundle.verl}; relative paths in the spec resolve against the"
        " Ray pods' working folder.",
    )
    if bundle.passthrough:
        comments += (f"Create the Secret first: kubectl create secret generic {secret} "
                     + " ".join(f"--from-literal={n}=..." for n in bundle.passthrough),)
    comments += ("Apply: kubectl apply -f THIS_FILE",)
    return dumps_all([config_map, ray_job], comments)
