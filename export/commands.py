"""``tutorrl export``: a bundle as a KubeRay RayJob, a SkyPilot task or a Slurm batch script.

Only argparse is imported here; the exporters load inside the handler.
"""

from __future__ import annotations

import argparse

# argparse offers these; export/options.py refuses any other for a Python caller (tests/cli/test_handlers.py keeps them equal).
TARGETS = ("kuberay", "skypilot", "slurm")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="write a bundle as a KubeRay RayJob, a SkyPilot task or a Slurm batch script",
        description=("Verify the bundle (as `tutorrl verify` does), then write it as another launcher's job. "
                     "The job checks the sha256 of every bundle file before it starts; secrets travel by name "
                     "only. The output is the launcher's own format (YAML, or a bash script for Slurm), so there "
                     "is no --format."))
    p.add_argument("bundle", help="the bundle folder")
    p.add_argument("--to", required=True, choices=TARGETS, help="the launcher")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: standard output)")
    p.add_argument("--image", metavar="IMAGE",
                   help="container image with the bundle's verl release (kuberay: required; skypilot: optional)")
    p.add_argument("--secret", metavar="NAME", default=None,
                   help="kuberay: the Kubernetes Secret holding the bundle's passthrough names as keys "
                        "(default: tutorrl-secrets)")
    p.add_argument("--accelerator", metavar="TYPE",
                   help="skypilot: the GPU type, e.g. H100 (required: a bundle says how many GPUs, not which)")
    p.add_argument("--partition", metavar="NAME", help="slurm: #SBATCH --partition (default: the cluster's)")
    p.add_argument("--account", metavar="NAME", help="slurm: #SBATCH --account (default: the user's)")
    p.add_argument("--time", metavar="LIMIT", dest="time_limit", help="slurm: #SBATCH --time")
    p.add_argument("--cpus-per-task", metavar="N", type=int, default=None,
                   help="slurm: CPUs of each node, given to Ray as --num-cpus (default: 64, as verl's recipe)")
    p.add_argument("--mem", metavar="SIZE", help="slurm: memory of each node, e.g. 200G (default: 200G, as verl's recipe)")
    p.add_argument("--retries", metavar="N", type=int, default=None,
                   help="slurm, skypilot --managed: a failed or preempted job restarted up to N times, resuming from "
                        "the newest checkpoint whose evidence verifies (default: the spec's [run] retries)")
    p.add_argument("--managed", action="store_true", default=None,
                   help="skypilot: a managed job (sky jobs launch) that SkyPilot recovers, checkpoints and evidence "
                        "on --bucket (implied by --retries or the spec's [run] retries)")
    p.add_argument("--bucket", metavar="NAME",
                   help="skypilot --managed: the bucket (SkyPilot storage name) mounted for checkpoints and evidence")
    from tutorrl._argparse import add_trust_digests_option

    add_trust_digests_option(p)
    p.set_defaults(handler=_export)


def _export(args) -> int:
    import sys

    from tutorrl import api
    from tutorrl._text import printable

    options = api.ExportOptions(**{name: getattr(args, name) for name in api.ExportOptions.__struct_fields__})
    done = api.export_bundle(args.bundle, options, output=args.output)
    for warning in done.warnings:
        print(printable(f"warning: {warning}"), file=sys.stderr)
    if done.written is None:
        sys.stdout.write(done.text)
    else:
        from tutorrl._files import display_path

        print(f"{done.experiment}: bundle {done.bundle_id} as a {done.target} job; wrote {display_path(done.written)}",
              file=sys.stderr)
    return 0
