"""Which options each export target takes and needs, checked before any bundle is read."""

from __future__ import annotations

import re

import msgspec

from tutorrl.errors import InputError, Problem

TARGETS = ("kuberay", "skypilot", "slurm")


class ExportOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What ``tutorrl export`` is given besides the bundle: the target launcher and its options (each
    field a flag of the same name; one another target owns is refused, not ignored)."""

    to: str
    image: str | None = None
    secret: str | None = None
    accelerator: str | None = None
    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    retries: int | None = None
    managed: bool | None = None
    bucket: str | None = None
    trust_digests: bool = False

# Options that belong to one target; given to another they would be silently ignored.
_OWN = {"image": ("kuberay", "skypilot"), "secret": ("kuberay",), "accelerator": ("skypilot",),
        "partition": ("slurm",), "time_limit": ("slurm",), "account": ("slurm",), "cpus_per_task": ("slurm",),
        "mem": ("slurm",), "retries": ("slurm", "skypilot"),
        "managed": ("skypilot",), "bucket": ("skypilot",)}
_REQUIRED = {"kuberay": ("image",), "skypilot": ("accelerator",), "slurm": ()}
_FLAG = {"time_limit": "--time", "cpus_per_task": "--cpus-per-task"}
# A Kubernetes Secret name (DNS-1123 subdomain); the others must fit one line of their format.
_SECRET = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@+-]*")
# sbatch's --mem: a whole number with an optional unit (K, M, G, T; M when none).
_MEM = re.compile(r"[1-9][0-9]*[KMGT]?")


def flag(name: str) -> str:
    return _FLAG.get(name, f"--{name}")


def check_options(args: ExportOptions) -> None:
    problems = []
    if args.to not in TARGETS:
        raise InputError([Problem(f"--to {args.to!r}: one of {', '.join(TARGETS)}")])
    for name, targets in _OWN.items():
        if getattr(args, name, None) is not None and args.to not in targets:
            problems.append(Problem(f"{flag(name)} is for --to {' or '.join(targets)}, not --to {args.to}"))
    for name in _REQUIRED[args.to]:
        if not getattr(args, name, None):
            problems.append(Problem(f"--to {args.to} needs {flag(name)}", hint=_HINTS[name]))
    if args.secret is not None and (len(args.secret) > 253 or not _SECRET.fullmatch(args.secret)):
        problems.append(Problem(f"--secret {args.secret!r} is not a Kubernetes Secret name "
                                "(lower-case letters, digits, '-' and '.')"))
    if args.cpus_per_task is not None and args.cpus_per_task < 1:
        problems.append(Problem(f"--cpus-per-task {args.cpus_per_task}: at least 1"))
    if args.retries is not None and not 0 <= args.retries <= 100:
        problems.append(Problem(f"--retries {args.retries}: 0 to 100"))
    if args.mem is not None and not _MEM.fullmatch(args.mem):
        problems.append(Problem(f"--mem {args.mem!r} is not a Slurm memory size",
                                hint="a whole number with an optional unit K, M, G or T, e.g. 200G"))
    if args.bucket is not None and not re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,62}", args.bucket):
        problems.append(Problem(f"--bucket {args.bucket!r}: a bucket name (lower-case letters, digits, '.', '_', '-')"))
    for name in ("image", "accelerator", "partition", "account", "time_limit"):
        value = getattr(args, name, None)
        if value is not None and not _WORD.fullmatch(value):
            problems.append(Problem(f"{flag(name)} {value!r}: letters, digits and _.:/@+- only"))
    if problems:
        raise InputError(problems)


_HINTS = {
    "image": "a container image with the bundle's verl release, and tutorrl for the evidence callback",
    "accelerator": "the GPU type SkyPilot should ask for, e.g. H100",
}
