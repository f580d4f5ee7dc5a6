#!/usr/bin/env python3
"""Record the launchers' published schemas that tests/export validates exports against.

    python tools/export_schemas.py kuberay KUBERAY_CHECKOUT   # -> tests/export/schemas/kuberay-rayjob-v1.json
    python tools/export_schemas.py skypilot                   # -> tests/export/schemas/skypilot-task.json

KubeRay: the ``openAPIV3Schema`` of the ``v1`` version of the RayJob CRD
(``ray-operator/config/crd/bases/ray.io_rayjobs.yaml``), read from a git
checkout of ray-project/kuberay at the commit named by ``--ref`` (a release
tag). SkyPilot defines its task YAML schema as Python dicts
(``sky/utils/schemas.py``: ``get_task_schema``, and ``get_resources_schema``
for ``resources:``, which the task schema leaves open); the tool imports them
from the ``skypilot`` package installed in the interpreter given by
``--python`` (a throwaway virtualenv: ``pip install skypilot==X``) and records
its version. Both need what is fetched (a checkout, an install) and so run only
where it exists; the tests read only the committed JSON, with its source
(repository, path, commit or version) recorded beside the schema.

Needs PyYAML (the ``test`` extra) for the CRD.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "export" / "schemas"
CRD = "ray-operator/config/crd/bases/ray.io_rayjobs.yaml"

_SKY_PROGRAM = """
import json, sys
from importlib import metadata
from sky.utils import schemas
json.dump({"version": metadata.version("skypilot"), "task": schemas.get_task_schema(),
           "resources": schemas.get_resources_schema()}, sys.stdout, sort_keys=True)
"""


def _write(name: str, document: dict) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(json.dumps(document, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {(OUT / name).relative_to(REPO)}")


def kuberay(checkout: Path, ref: str) -> None:
    import yaml

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(checkout), *args], check=True, capture_output=True,
                              text=True).stdout

    commit = git("rev-parse", f"{ref}^{{commit}}").strip()
    crd = yaml.safe_load(git("show", f"{commit}:{CRD}"))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    _write("kuberay-rayjob-v1.json", {
        "source": {"repository": "ray-project/kuberay", "path": CRD, "ref": ref, "commit": commit,
                   "version": "v1", "group": crd["spec"]["group"]},
        "openAPIV3Schema": version["schema"]["openAPIV3Schema"],
    })


def skypilot(python: str) -> None:
    out = subprocess.run([python, "-c", _SKY_PROGRAM], check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    _write("skypilot-task.json", {
        "source": {"repository": "skypilot-org/skypilot", "path": "sky/utils/schemas.py",
                   "functions": ["get_task_schema", "get_resources_schema"],
                   "package": f"skypilot=={data['version']}"},
        "task": data["task"],
        "resources": data["resources"],
    })


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="which", required=True)
    k = sub.add_parser("kuberay")
    k.add_argument("checkout", type=Path, help="a git checkout (or bare mirror) of ray-project/kuberay")
    k.add_argument("--ref", default="v1.7.0", help="release tag or commit (default: v1.7.0)")
    s = sub.add_parser("skypilot")
    s.add_argument("--python", default=sys.executable, help="an interpreter with skypilot installed")
    args = parser.parse_args()
    if args.which == "kuberay":
        kuberay(args.checkout, args.ref)
    else:
        skypilot(args.python)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
