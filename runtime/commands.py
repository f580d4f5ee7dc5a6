"""``tutorrl run`` and ``tutorrl runs``. Only argparse at import time: the
handlers import Ray and the runtime lazily, so ``tutorrl compile`` stays light."""

from __future__ import annotations

import argparse


def _run(args: argparse.Namespace) -> int:
    from tutorrl.compiler.verify import require_bundle_folder

    require_bundle_folder(args.bundle)  # a spec given by mistake is named as one, before Ray loads
    from tutorrl.runtime.run import run_command

    return run_command(args)


def _runs(args: argparse.Namespace) -> int:
    from tutorrl.compiler.verify import require_bundle_folder

    require_bundle_folder(args.bundle)
    from tutorrl.runtime.run import runs_command

    args.json = args.format == "json"  # what runs_command reads
    return runs_command(args)


def register(subparsers) -> None:
    run = subparsers.add_parser(
        "run",
        help="run a bundle as a Ray job (embedded Ray head by default)",
        description=(
            "Verify a bundle, check the cluster can run it, submit it as a Ray job, stream its log "
            "to the terminal and to bundles/<id>/runs/<run-id>/job.log, and exit with the job's "
            "exit code (130 when interrupted, 2 when refused). Without --address an embedded "
            "single-machine Ray head is started for the run and stopped after it."
        ),
        epilog=(
            "Environment: RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH, a file) holds the token of an "
            "--address cluster that uses token auth. RAY_ADDRESS and RAY_API_SERVER_ADDRESS are "
            "ignored: only --address selects a cluster. TUTORRL_EMBEDDED_NUM_GPUS overrides the "
            "GPU count the embedded head declares (for testing scheduling paths only)."
        ),
    )
    run.add_argument("bundle", help="bundle directory (bundles/<id>)")
    run.add_argument("--address", metavar="URL",
                     help="dashboard URL of an existing Ray cluster, e.g. http://head:8265")
    upload = run.add_mutually_exclusive_group()
    upload.add_argument("--upload", dest="upload", action="store_true", default=None,
                        help="ship the bundle to the cluster as the job's working_dir "
                             "(default for a non-loopback --address)")
    upload.add_argument("--no-upload", dest="upload", action="store_false",
                        help="run the bundle from its path here: the cluster shares this filesystem "
                             "(default for a loopback --address)")
    run.add_argument("--dry-run", action="store_true",
                     help="run launch.sh with verl's --cfg all: verl composes and validates its config, no training; "
                          "the config goes to runs/<run-id>/verl-config.yaml, a summary to the terminal")
    run.add_argument("--quiet", action="store_true", help="no progress lines (the job's log is still shown)")
    run.set_defaults(handler=_run)

    runs = subparsers.add_parser("runs", help="list the runs of a bundle",
                                 description="List the runs recorded under bundles/<id>/runs/.")
    runs.add_argument("bundle", help="bundle directory (bundles/<id>)")
    from tutorrl._formats import add_format_option

    add_format_option(runs, legacy_json=True, help="output format: text (a table) or json (every run record in full)")
    runs.set_defaults(handler=_runs)
