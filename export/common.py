"""What every export needs from a bundle, and the check each job runs first.

An export is a pure function of the bundle's bytes (and the user's options),
so the same bundle always exports to the same text: no time, no absolute path
but the one the user typed, files and names in sorted order.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from tutorrl.errors import BundleError

# The files that travel with the job: the bundle's content files and its manifest.
BUNDLE_FILES = ("bundle.env", "launch.sh", "manifest.json", "ray-job.json", "spec.toml")
# The exit status of a job that refuses its bundle (launch.sh's own refusals use 3 as well).
REFUSED = 3


class Bundle(msgspec.Struct, frozen=True):
    """A verified bundle, as the exports see it."""

    shown: str  # the folder as the user named it (normalised), for paths in the output
    id: str
    digest: str
    experiment: str
    project: str
    verl: str
    variant: str
    files: dict[str, bytes]
    env: dict[str, str]  # ray-job.json's runtime_env.env_vars: exact values, no secrets
    passthrough: tuple[str, ...]  # secret names, read from the job's environment
    nodes: int
    gpus_per_node: int
    reward_gpus: int
    entrypoint_num_cpus: float | int
    entrypoint_num_gpus: float | int
    warnings: tuple[str, ...] = ()
    # The rollout's own pool (one_step_off, fully_async: rollout.nnodes x rollout.n_gpus_per_node); 0 where
    # the rollout shares the trainer's GPUs.
    rollout_gpus: int = 0
    # The spec's `[run] retries` (None: not set); an export with retries requeues a failed job that many times.
    retries: int | None = None
    # The spec's trainer.output_dir as written (roots unexpanded); None where unset.
    output_dir: str | None = None

    def sha256(self) -> dict[str, str]:
        import hashlib

        return {name: hashlib.sha256(self.files[name]).hexdigest() for name in BUNDLE_FILES}

    @property
    def uniform_gpus_per_node(self) -> int:
        """GPUs each machine gets: the trainer's share plus the reward GPUs spread
        evenly. Launchers' machines are alike (SkyPilot, Slurm's --gpus-per-node, one
        KubeRay worker group), and a reward plug-in addresses its GPUs on the
        trainer's machine (the chess simulator's ``device = "cuda:7"``). A rollout pool of
        its own is spread the same way: the machines hold every GPU the launch asks for."""
        return self.gpus_per_node + -(-(self.reward_gpus + self.rollout_gpus) // self.nodes)


def load(path: str, *, trust_digests: bool = False) -> Bundle:
    """Verify ``path`` as ``tutorrl verify`` does (digests, then re-derivation; ``trust_digests``
    accepts one that does not re-derive on its digests alone) and read it."""
    from tutorrl.compiler import verify_bundle
    from tutorrl.runtime import gpu_layout, needed_gpus
    from tutorrl.runtime import passthrough_names

    bundle = verify_bundle(path, trust_digests=trust_digests)
    files = {}
    for name in BUNDLE_FILES:
        files[name] = (bundle.path / name).read_bytes()
    import hashlib

    # verify_bundle read the files a moment ago; what travels must be what it checked.
    for name, want in bundle.manifest.files.items():
        if hashlib.sha256(files[name]).hexdigest() != want:
            raise BundleError(f"{path}: {name} changed while it was being exported")
    if msgspec.json.decode(files["manifest.json"]).get("digest") != bundle.digest:
        raise BundleError(f"{path}: manifest.json changed while it was being exported")
    nodes, per_node, reward = gpu_layout(bundle.spec)
    rollout = needed_gpus(bundle.spec) - nodes * per_node - reward
    job, meta = bundle.job, bundle.job.get("metadata") or {}
    _check_names(path, job)
    return Bundle(
        shown=os.path.normpath(str(path)), id=bundle.manifest.id, digest=bundle.digest,
        experiment=bundle.manifest.experiment, project=str(meta.get("tutorrl_project", "")),
        verl=bundle.manifest.verl, variant=bundle.manifest.variant, files=files,
        env=dict(sorted(((job.get("runtime_env") or {}).get("env_vars") or {}).items())),
        passthrough=tuple(sorted(passthrough_names(job))), nodes=nodes, gpus_per_node=per_node,
        reward_gpus=reward, rollout_gpus=rollout, entrypoint_num_cpus=job.get("entrypoint_num_cpus") or 0,
        entrypoint_num_gpus=job.get("entrypoint_num_gpus") or 0, warnings=bundle.warnings,
        retries=bundle.spec.run.retries, output_dir=bundle.spec.trainer.output_dir)


def _check_names(path: str, job: dict) -> None:
    """Refuse a bundle whose ray-job.json names a variable no environment can hold.

    A re-derived bundle cannot (the compiler checks every name); one accepted
    on its digests alone (--trust-digests) can, and its secret names are
    written into the exported job -- a shell loop, YAML keys -- so they must be
    names and nothing else."""
    import re

    from tutorrl.runtime import passthrough_names

    env = (job.get("runtime_env") or {}).get("env_vars") or {}
    for name in [*passthrough_names(job), *env]:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise BundleError(f"{path}: ray-job.json names the environment variable {name!r}, which is not a "
                              "name (letters, digits and '_', not starting with a digit); refusing to export it")
    for name, value in env.items():
        if not isinstance(value, str):
            raise BundleError(f"{path}: ray-job.json gives {name} a {type(value).__name__}, not a string; "
                              "refusing to export it")


def check_script(bundle: Bundle, var: str = "bundle") -> str:
    """Shell lines (bash) that refuse to go on unless the files in the folder
    named by shell variable ``var`` are byte for byte the bundle that was exported, then re-derive
    it with ``tutorrl verify`` where the job's Python has tutorrl.

    The sha256 of every file is fixed here, at export time, so the check needs
    nothing on the cluster but coreutils; a bundle edited there (or a stale
    copy on a shared file system) stops the job before Ray starts anything.
    """
    sums = "".join(f"{h}  {name}\n" for name, h in bundle.sha256().items())
    folder = f'"${var}"'
    return (
        f"# The bundle must be the one exported: the sha256 of each of its files, fixed at export.\n"
        f"if ! (cd {folder} && sha256sum --check --strict --quiet >&2) <<'TUTORRL_SHA256'\n"
        f"{sums}"
        f"TUTORRL_SHA256\n"
        f"then\n"
        f"  echo \"tutorrl: ${var} is not bundle {bundle.digest} (a file differs from the export);"
        f" refusing to run\" >&2\n"
        f"  exit {REFUSED}\n"
        f"fi\n"
        f"# Where the job's Python has tutorrl, re-derive the bundle from its spec as well.\n"
        f"python_bin=\"${{TUTORRL_PYTHON:-python}}\"\n"
        f"if \"$python_bin\" -c 'import tutorrl.compiler' 2>/dev/null; then\n"
        f"  \"$python_bin\" -m tutorrl verify {folder} || exit {REFUSED}\n"
        f"else\n"
        f"  echo \"tutorrl: $python_bin has no tutorrl; bundle {bundle.id} checked by sha256 only\" >&2\n"
        f"fi\n"
    )


def header(bundle: Bundle, target: str) -> tuple[str, ...]:
    """The comment lines every export starts with: what it is and how it stays verifiable."""
    lines = [
        f"tutorrl export --to {target}: bundle {bundle.id} ({bundle.digest})",
        f"experiment {bundle.experiment!s}, verl {bundle.verl} ({bundle.variant}); "
        f"{bundle.nodes} node(s) x {bundle.gpus_per_node} trainer GPU(s) + {bundle.reward_gpus} reward GPU(s)"
        + (f" + {bundle.rollout_gpus} rollout GPU(s)" if bundle.rollout_gpus else ""),
        "The job checks the sha256 of every bundle file before it starts and refuses a changed bundle.",
    ]
    if bundle.passthrough:
        lines.append(f"Secrets, by name only: {', '.join(bundle.passthrough)}")
    return tuple(lines)


def write_output(text: str, output: str | None) -> None:
    """Standard output, or ``output`` written whole or not at all."""
    import sys

    if output is None or output == "-":
        sys.stdout.write(text)
        return
    from tutorrl._files import replace_atomic

    target = Path(output)
    if target.is_dir():
        raise BundleError(f"{output} is a folder; give a file to write the export to")
    try:
        replace_atomic(target, text.encode("utf-8"))
    except OSError as exc:
        from tutorrl.errors import RefusedError

        raise RefusedError(f"{output}: cannot write the export ({exc.strerror})") from None


# How many Ray nodes are alive at an address: 0 when at least the wanted number, else 1.
WAIT_PROGRAM = (
    "import sys, ray; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
    "sys.exit(0 if sum(1 for n in ray.nodes() if n['Alive']) >= int(sys.argv[2]) else 1)"
)
WAIT_TRIES, WAIT_PAUSE_S = 120, 5
NODES_MISSING = 4


def wait_function() -> str:
    """A bash function ``tutorrl_wait_nodes ADDRESS COUNT``: verl sizes its
    resource pools from what Ray has when the trainer starts, so the job must
    not start before every machine's ``ray start`` has joined."""
    return (
        "tutorrl_wait_nodes() {\n"
        f"  for _ in $(seq 1 {WAIT_TRIES}); do\n"
        f"    \"$python_bin\" -c \"{WAIT_PROGRAM}\" \"$1\" \"$2\" 2>/dev/null && return 0\n"
        f"    sleep {WAIT_PAUSE_S}\n"
        "  done\n"
        f"  echo \"tutorrl: fewer than $2 Ray nodes joined $1 in {WAIT_TRIES * WAIT_PAUSE_S} s\" >&2\n"
        f"  exit {NODES_MISSING}\n"
        "}\n"
    )


def sh_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
