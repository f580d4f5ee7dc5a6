"""`tutorrl evidence`: list a bundle's records, record a checkpoint by hand,
make a signing key (`keygen`), or print the chain head to keep (`anchor`)."""

from __future__ import annotations

# Words in the bundle's place that name an action; a folder of that name is `./keygen`.
ACTIONS = ("keygen", "anchor")


def register(sub) -> None:
    p = sub.add_parser(
        "evidence",
        help="list a bundle's checkpoint evidence, record a checkpoint (--add), make a signing key (keygen), "
        "or print the chain head to keep outside the bundle (anchor)",
        description="Show the checkpoint records appended to a bundle (one line each), or hash and record a "
        "checkpoint directory by hand, optionally asking running sglang engines what they serve. "
        "`tutorrl evidence keygen [--key PATH]` makes the Ed25519 key new records are signed with; "
        "`tutorrl evidence anchor BUNDLE [--out FILE]` prints the chain head, to commit or publish outside "
        "the bundle and check later with `tutorrl verify --anchor`.",
    )
    p.add_argument("bundle", metavar="BUNDLE|keygen|anchor",
                   help="the bundle directory (bundles/<id>), or the action keygen or anchor")
    p.add_argument("anchor_bundle", nargs="?", metavar="BUNDLE", help="with anchor: the bundle directory")
    from tutorrl._formats import add_format_option

    add_format_option(p, legacy_json=True, help="output format: text (one line per record) or json (every record "
                      "in full, as an array; with --add, the new record; with anchor, the anchor)")
    p.add_argument("--add", metavar="CKPT_DIR",
                   help="record this checkpoint: a global_step_N directory, or the checkpoint root (its newest step)")
    p.add_argument("--engine", metavar="URL", action="append", default=[],
                   help="an sglang engine serving the checkpoint (repeat for each replica); with --add")
    p.add_argument("--base-model", metavar="DIR",
                   help="the base model's safetensors directory, to show the served weights changed; with --add")
    p.add_argument("--run-id", default="manual", help="run id to record with --add (default: manual)")
    p.add_argument("--workers", type=int, default=None, help="hashing threads (default: all usable cores)")
    p.add_argument("--key", metavar="PATH",
                   help="with keygen: where to write the private key (default: $XDG_CONFIG_HOME/tutorrl/"
                   "evidence-signing-key; the public key goes to PATH.pub)")
    p.add_argument("--out", metavar="FILE",
                   help="with anchor: also write the anchor to FILE (outside the bundle), to commit or publish")
    p.set_defaults(handler=_handle)


def _handle(args) -> int:
    from tutorrl.errors import TutorrlError

    action = args.bundle if args.bundle in ACTIONS else None
    if action is None and args.anchor_bundle is not None:
        raise TutorrlError(f"unexpected argument {args.anchor_bundle!r} (only `tutorrl evidence anchor BUNDLE` "
                           "takes a second one)")
    if action != "keygen" and args.key is not None:
        raise TutorrlError("--key only applies to `tutorrl evidence keygen`")
    if action != "anchor" and args.out is not None:
        raise TutorrlError("--out only applies to `tutorrl evidence anchor BUNDLE`")
    if action is not None and (args.add or args.engine or args.base_model):
        raise TutorrlError(f"--add, --engine and --base-model do not apply to `tutorrl evidence {action}`")
    from tutorrl.evidence import cli_impl

    if action == "keygen":
        if args.anchor_bundle is not None:
            raise TutorrlError(f"`tutorrl evidence keygen` takes no bundle (got {args.anchor_bundle!r})")
        return cli_impl.keygen(args)
    if action == "anchor":
        if args.anchor_bundle is None:
            raise TutorrlError("`tutorrl evidence anchor` needs the bundle: tutorrl evidence anchor bundles/<id>")
        return cli_impl.anchor(args)
    if args.add is None:
        if args.engine or args.base_model:
            raise TutorrlError("--engine and --base-model only apply with --add CKPT_DIR")
        return cli_impl.show(args)
    return cli_impl.add(args)
