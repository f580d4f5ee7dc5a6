"""`tutorrl evidence`: list a bundle's records, or record a checkpoint by hand."""

from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser(
        "evidence",
        help="list a bundle's checkpoint evidence, or record a checkpoint (--add)",
        description="Show the checkpoint records appended to a bundle (one line each), or hash and record a "
        "checkpoint directory by hand, optionally asking running sglang engines what they serve.",
    )
    p.add_argument("bundle", help="the bundle directory (bundles/<id>)")
    from tutorrl._formats import add_format_option

    add_format_option(p, legacy_json=True, help="output format: text (one line per record) or json (every record "
                      "in full, as an array; with --add, the new record)")
    p.add_argument("--add", metavar="CKPT_DIR",
                   help="record this checkpoint: a global_step_N directory, or the checkpoint root (its newest step)")
    p.add_argument("--engine", metavar="URL", action="append", default=[],
                   help="an sglang engine serving the checkpoint (repeat for each replica); with --add")
    p.add_argument("--base-model", metavar="DIR",
                   help="the base model's safetensors directory, to show the served weights changed; with --add")
    p.add_argument("--run-id", default="manual", help="run id to record with --add (default: manual)")
    p.add_argument("--workers", type=int, default=None, help="hashing threads (default: all usable cores)")
    p.set_defaults(handler=_handle)


def _handle(args) -> int:
    from tutorrl.evidence.cli_impl import add, show

    if args.add is None:
        if args.engine or args.base_model:
            from tutorrl.errors import TutorrlError

            raise TutorrlError("--engine and --base-model only apply with --add CKPT_DIR")
        return show(args)
    return add(args)
