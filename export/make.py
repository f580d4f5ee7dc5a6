"""A bundle as another launcher's job: what ``tutorrl export`` does, without the printing.

The options were checked first (export/options.py): a target's required ones are given, never empty."""

from __future__ import annotations

import msgspec

from tutorrl.errors import InputError, Problem
from tutorrl.export import common
from tutorrl.export.options import ExportOptions, check_options


class Exported(msgspec.Struct, frozen=True):
    """A bundle written as a launcher's job: the text, the file it was written to (None: not written), and
    the bundle's id, experiment and warnings (what verifying it found that holds but proves less)."""

    text: str
    written: str | None
    target: str
    bundle_id: str
    experiment: str
    warnings: list[str]


def export(bundle: str, options: ExportOptions, output: str | None = None) -> Exported:
    """The bundle verified (as ``tutorrl verify`` does), then rendered for ``options.to``; written to ``output``
    whole or not at all when given (``-`` or None: not written)."""
    check_options(options)
    loaded = common.load(bundle, trust_digests=options.trust_digests)
    text = _render(bundle, loaded, options)
    written = None
    if output not in (None, "-"):
        common.write_output(text, output)
        written = output
    return Exported(text, written, options.to, loaded.id, loaded.experiment, list(loaded.warnings))


def _render(path: str, bundle: common.Bundle, args: ExportOptions) -> str:
    if args.to == "kuberay":
        from tutorrl.export import kuberay

        return kuberay.render(bundle, image=args.image or "", secret=args.secret or kuberay.DEFAULT_SECRET)
    if args.to == "skypilot":
        from tutorrl.export import skypilot

        retries = args.retries if args.retries is not None else bundle.retries  # the flag wins, 0 included
        managed = bool(args.managed or retries)
        if managed and not args.bucket:
            why = "--managed" if args.managed else "--retries" if args.retries else "the spec's [run] retries"
            raise InputError([Problem(f"{why}: a managed SkyPilot job needs --bucket NAME",
                                      hint="the SkyPilot storage bucket that holds its checkpoints and evidence")])
        if args.bucket and not managed:
            raise InputError([Problem("--bucket is for a managed job: add --managed or --retries N")])
        problem = skypilot.managed_problem(bundle) if managed else None
        if problem:
            raise InputError([Problem(f"{path}: cannot export as a managed job: {problem}")])
        return skypilot.render(bundle, accelerator=args.accelerator or "", image=args.image,
                               bucket=args.bucket if managed else None, retries=args.retries)
    from tutorrl.export import slurm

    return slurm.render(bundle, partition=args.partition, time_limit=args.time_limit,
                        cpus_per_task=args.cpus_per_task, mem=args.mem, account=args.account,
                        retries=args.retries)
