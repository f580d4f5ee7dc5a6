"""``tutorrl run`` and ``tutorrl runs``. Only argparse at import time: the
handlers import Ray and the runtime lazily, so ``tutorrl compile`` stays light."""

from __future__ import annotations

import argparse


def _run(args: argparse.Namespace) -> int:
    from tutorrl import api

    if len(args.bundle) > 1 or args.max_parallel is not None or _is_folder_of_bundles(args.bundle[0]):
        if args.retries is not None or args.retry_backoff is not None:
            from tutorrl.errors import RefusedError

            raise RefusedError("--retries applies to the run of one bundle, not to a set")
        done = api.run_set(args.bundle, max_parallel=args.max_parallel, address=args.address, upload=args.upload,
                           dry_run=args.dry_run, num_gpus=args.num_gpus, quiet=args.quiet,
                           no_progress=args.no_progress, trust_digests=args.trust_digests, detach=args.detach)
        if not done.detached:  # a detached set said its id and how to follow it as it went
            from tutorrl.runtime.text import set_table

            _write(set_table(done.state.record, done.state.rows))
        return done.exit_code
    if args.retry_backoff is not None and args.retries is None:
        from tutorrl.errors import RefusedError

        raise RefusedError("--retry-backoff only applies with --retries")
    fields = {name: getattr(args, name) for name in api.RunOptions.__struct_fields__}
    options = api.RunOptions(**{**fields, "bundle": args.bundle[0]})
    # --quiet: tutorrl's lines without verl's (hundreds of lines of config and meters).
    run = api.run(options, progress=not args.no_progress, echo=not args.quiet)
    return run.exit_code or 0


def _write(text: str) -> None:
    import sys

    sys.stdout.write(text)
    sys.stdout.flush()


def _runs(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from tutorrl import api
    from tutorrl.runtime.text import runs_json, runs_table

    rows = api.runs(args.bundle)
    if args.format == "json":
        _write(runs_json(rows))
    elif not rows:
        print(f"no runs of {Path(args.bundle)}", file=sys.stderr)
    else:
        _write(runs_table(rows))
    return 0


def _model(args: argparse.Namespace) -> int:
    import sys

    from tutorrl import api
    from tutorrl._files import display_path
    from tutorrl._text import printable

    made = api.model(args.bundle, args.out, step=args.step, merge_lora=args.merge_lora, python=args.python,
                     workers=args.workers)
    if made.recorded is not None:
        print(made.recorded, file=sys.stderr)
    where = display_path(made.folder)
    print(printable(f"model: load it: AutoModelForCausalLM.from_pretrained({where!r}) and "
                    f"AutoTokenizer.from_pretrained({where!r}) (transformers)"
                    + (f"; the adapter alone: peft's PeftModel.from_pretrained(model, '{where}/lora_adapter')"
                       if made.adapter else "")), file=sys.stderr, flush=True)
    print(where)
    return 0


def _step(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a step number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a step number (0 or more)")
    return value


def _threads(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def register_model(subparsers) -> None:
    model = subparsers.add_parser(
        "model",
        help="make a loadable Hugging Face model folder from a run's recorded checkpoint (verl's model merger)",
        description=(
            "Run verl's model merger (python -m verl.model_merger merge) on a checkpoint the bundle's evidence "
            "records: the newest step, or --step N. The record must verify and the checkpoint's files must hash "
            "as recorded, else nothing is written (exit 2). The merger runs in the run's training environment "
            "(the job's Python: TUTORRL_PYTHON, as `tutorrl run` uses it, or --python) and must be the run's verl "
            "release; it writes into a temporary folder beside DIR, renamed to DIR once whole. A record of the "
            "merged files (sha256 of each), linked to the checkpoint's record, is appended to the bundle's "
            "evidence: `tutorrl verify --rehash` checks both. Prints DIR."),
        epilog=("LoRA runs: DIR holds the base weights and the adapter in lora_adapter/ (verl's merger layout); "
                "--merge-lora merges the adapter into the weights (peft, in the job's Python)."),
    )
    model.add_argument("bundle", metavar="BUNDLE", help="the bundle whose run wrote the checkpoint (bundles/<id>)")
    model.add_argument("--out", required=True, metavar="DIR", help="the folder to write (must not exist)")
    model.add_argument("--step", type=_step, metavar="N", help="the checkpoint's step (default: the newest recorded)")
    model.add_argument("--merge-lora", action="store_true",
                       help="a LoRA run: also merge the adapter into the weights (refused for a run without LoRA)")
    model.add_argument("--python", metavar="PYTHON",
                       help="the Python of the run's training environment (default: TUTORRL_PYTHON, in this "
                            "environment or the bundle's, else tutorrl's own)")
    model.add_argument("--workers", type=_threads, default=None, metavar="N",
                       help="hashing threads (default: all usable cores)")
    model.set_defaults(handler=_model)


def _is_folder_of_bundles(word: str) -> bool:
    """A sweep's output folder (bundles, and no manifest of its own): run as a set."""
    import os

    from tutorrl.contract import MANIFEST

    if not os.path.isdir(word) or os.path.exists(os.path.join(word, MANIFEST)):
        return False
    try:
        return any(os.path.isfile(os.path.join(word, name, MANIFEST)) for name in os.listdir(word))
    except OSError:
        return False


def _status(args: argparse.Namespace) -> int:
    import sys

    from tutorrl import api
    from tutorrl.runtime.text import status_json, status_notes, status_text

    report = api.status(args.run, show_all=getattr(args, "all", False))
    as_json = args.format == "json"
    _write(status_json(report) if as_json else status_text(report))
    sys.stderr.write(status_notes(report, as_json=as_json))
    return 0


def _logs(args: argparse.Namespace) -> int:
    import sys

    from tutorrl import api

    out = sys.stdout.buffer  # the log's bytes as they are
    for piece in api.logs(args.run, follow=args.follow):
        out.write(piece)
        out.flush()
    return 0


def _stop(args: argparse.Namespace) -> int:
    import sys

    from tutorrl import api

    done = api.stop(args.run)
    if isinstance(done, int):  # a set: its lines were written as it stopped
        return done
    sid, record = done.record.submission_id, done.record
    if done.ended and not done.already:
        print(f"{sid}: {record.status}" + (f" ({record.message})" if record.message else ""), file=sys.stderr)
    else:
        print(f"{sid}: {done.note}", file=sys.stderr)
    return 0 if done.ended else 1


RUN_REF_HELP = ("a run id (tutorrl-<bundle id>-<attempt>: found under ./bundles/ or in the index of runs "
                "started on this machine), a run folder bundles/<id>/runs/<run-id>, or a set id (set-...) "
                "that `tutorrl run` of several bundles printed")


def _whole(low: int, high: int, what: str):
    """An argparse type: a whole number from ``low`` to ``high``, refused naming ``what`` it counts."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not {what} from {low} to {high}")
        return value

    return parse


_gpu_count = _whole(0, 1024, "a GPU count")
_parallel = _whole(1, 256, "a count of runs")
_retries = _whole(0, 100, "a number of retries")


def _backoff(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 <= value <= 600:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds from 0 to 600")
    return value


def register(subparsers) -> None:
    _register_run_commands(subparsers)
    register_model(subparsers)


def _register_run_commands(subparsers) -> None:
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
            "Environment: the token of an --address cluster that uses token auth is read where Ray "
            "reads it: RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH names, else ~/.ray/auth_token. "
            "RAY_ADDRESS and RAY_API_SERVER_ADDRESS are ignored: only --address selects a cluster. TUTORRL_PYTHON names the job's Python (launch.sh "
            "runs verl with it); the embedded head then runs the `ray` beside it, so verl's workers run it too."
        ),
    )
    run.add_argument("bundle", nargs="+", metavar="BUNDLE",
                     help="bundle directory (bundles/<id>); several, or a folder of bundles (a sweep's --out), "
                          "run as a set: see --max-parallel")
    run.add_argument("--max-parallel", type=_parallel, metavar="N",
                     help="a set runs at most N bundles at once, on one embedded head started for the set (or the "
                          "--address cluster); each bundle's run is a `tutorrl run` of its own, its record under the bundle; "
                          "`tutorrl status SET` shows the set as one table (default: 1)")
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
    run.add_argument("--num-gpus", type=_gpu_count, metavar="N",
                     help="GPUs the embedded head declares (default: the GPUs this machine has). More than the "
                          "machine has is for CPU runs: verl 0.4/0.5 refuse a pool with no GPU and then compute "
                          "on the CPU all the same (specs/tiny_cpu_grpo.toml)")
    run.add_argument("--quiet", action="store_true",
                     help="only tutorrl's own lines (state, step, each evidence record); the job's log goes only to "
                          "runs/<run-id>/job.log (`tutorrl logs <run-id>`)")
    run.add_argument("--no-progress", action="store_true",
                     help="no tutorrl progress lines; the job's log is still shown (what each run of a set writes "
                          "to its log)")
    run.add_argument("--retries", type=_retries, metavar="N",
                     help="when the job fails or is preempted (a non-zero exit, a lost node, a killed TaskRunner), "
                          "submit it again up to N times, resuming from the newest checkpoint whose evidence record "
                          "verifies with its files hashed again (one that does not is skipped and said); the run record "
                          "lists every attempt. Not retried: launch.sh's refusals (exit 2, 3) and a config verl's "
                          "Hydra refuses. With retries, a run whose last step is below trainer.total_steps exits non-zero")
    run.add_argument("--retry-backoff", type=_backoff, metavar="SECONDS",
                     help="with --retries: wait this long before the first resubmission, twice as long before each "
                          "next (at most 600 s; default 0)")
    from tutorrl._argparse import add_trust_digests_option

    add_trust_digests_option(run)
    run.add_argument("--detach", action="store_true",
                     help="submit, print the run id and how to follow it, and exit 0; a supervisor in its own "
                          "session follows the job, closes the record and stops the embedded head when the job ends "
                          "(for a set: prints the set id; the supervisor runs the whole set on its head)")
    run.set_defaults(handler=_run)

    runs = subparsers.add_parser("runs", help="list the runs of a bundle",
                                 description="List the runs recorded under bundles/<id>/runs/.")
    runs.add_argument("bundle", help="bundle directory (bundles/<id>)")
    from tutorrl._formats import add_format_option

    add_format_option(runs, legacy_json=True, help="output format: text (a table) or json (every run record in full)")
    runs.set_defaults(handler=_runs)

    status = subparsers.add_parser(
        "status", help="the state of a run (or of every open run), checked against Ray",
        description="Show a run's state, reconciled with the Ray job's real state (a record left open by a "
                    "tutorrl run that died is closed here), its dashboard while it runs, and the training "
                    "step from verl's console log. Without a run id: the sets started on this machine that are "
                    "open or among the last 10 to end (--all: every one), one row each (`tutorrl status SET` "
                    "shows its table), the last 10 runs of no set that ended (--all: every one), one row each, "
                    "then every open run that is no set's.")
    status.add_argument("run", nargs="?", help=RUN_REF_HELP)
    status.add_argument("--all", action="store_true",
                        help="without a run id: list every set and run ever started on this machine, not only "
                             "the open ones and the last 10 that ended")
    add_format_option(status, help="output format: text or json (the run record plus what was checked)")
    status.set_defaults(handler=_status)

    logs = subparsers.add_parser("logs", help="print a run's job log",
                                 description="Print a run's job log (its job.log; from Ray's Jobs API when no "
                                             "tutorrl process is following a job that still runs).")
    logs.add_argument("run", help=RUN_REF_HELP)
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing until the run ends")
    logs.set_defaults(handler=_logs)

    stop = subparsers.add_parser("stop", help="stop a run: its job, then its embedded head",
                                 description="Stop a run (detached or not): the job first, then the embedded "
                                             "head; the record says stopped.")
    stop.add_argument("run", help=RUN_REF_HELP)
    stop.set_defaults(handler=_stop)
