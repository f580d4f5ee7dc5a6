"""``tutorrl export``: a bundle as a KubeRay RayJob, a SkyPilot task or a Slurm batch script.

Only argparse is imported here; the exporters load inside the handler.
"""

from __future__ import annotations

import argparse

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

    from tutorrl.export import common
    from tutorrl.export.options import check_options

    check_options(args)
    bundle = common.load(args.bundle, trust_digests=args.trust_digests)
    from tutorrl.cli import printable

    for warning in bundle.warnings:
        print(printable(f"warning: {warning}"), file=sys.stderr)
    if args.to == "kuberay":
        from tutorrl.export import kuberay

        text = kuberay.render(bundle, image=args.image, secret=args.secret or kuberay.DEFAULT_SECRET)
    elif args.to == "skypilot":
        from tutorrl.export import skypilot

        retries = args.retries if args.retries is not None else bundle.retries  # the flag wins, 0 included
        managed = bool(args.managed or retries)
        if managed and not args.bucket:
            from tutorrl.errors import InputError, Problem

            why = "--managed" if args.managed else "--retries" if args.retries else "the spec's [run] retries"
            raise InputError([Problem(f"{why}: a managed SkyPilot job needs --bucket NAME",
                                      hint="the SkyPilot storage bucket that holds its checkpoints and evidence")])
        if args.bucket and not managed:
            from tutorrl.errors import InputError, Problem

            raise InputError([Problem("--bucket is for a managed job: add --managed or --retries N")])
        problem = skypilot.managed_problem(bundle) if managed else None
        if problem:
            from tutorrl.errors import InputError, Problem

            raise InputError([Problem(f"{args.bundle}: cannot export as a managed job: {problem}")])
        text = skypilot.render(bundle, accelerator=args.accelerator, image=args.image,
                               bucket=args.bucket if managed else None, retries=args.retries)
    else:
        from tutorrl.export import slurm

        text = slurm.render(bundle, partition=args.partition, time_limit=args.time_limit,
                            cpus_per_task=args.cpus_per_task, mem=args.mem, account=args.account,
                            retries=args.retries)
    common.write_output(text, args.output)
    if args.output not in (None, "-"):
        from tutorrl._files import display_path

        print(f"{bundle.experiment}: bundle {bundle.id} as a {args.to} job; wrote {display_path(args.output)}",
              file=sys.stderr)
    return 0
