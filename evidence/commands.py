"""`tutorrl evidence`: list a bundle's records, record a checkpoint by hand,
make a signing key (`keygen`), or print the chain head to keep (`anchor`); and
`tutorrl verify`: a bundle against its manifest and spec, and its evidence.

`verify` lives here, above both the compiler (which re-derives the bundle)
and the evidence chain it judges: in compiler/ it made the two packages
import each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

# Words in the bundle's place that name an action; a folder of that name is `./keygen`.
ACTIONS = ("keygen", "anchor")


def register(sub) -> None:
    register_evidence(sub)
    register_verify(sub)


def register_evidence(sub) -> None:
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
    bundle = p.add_argument("bundle", metavar="BUNDLE|keygen|anchor",
                            help="the bundle directory (bundles/<id>), or the action keygen or anchor")
    bundle.completion_words = ACTIONS  # offered with file names by `tutorrl completion`
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


def register_verify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check a bundle (and its evidence) against its manifest",
                       description="Exit 0 when every file matches the manifest and every evidence record holds.")
    p.add_argument("bundle", help="the bundle folder")
    p.add_argument("--trust", metavar="PUBKEY", action="append", default=[],
                   help="a public key file (the .pub of `tutorrl evidence keygen`; several PEM keys in one file "
                   "are each trusted); every evidence record must then be signed by a trusted key (repeatable)")
    p.add_argument("--anchor", metavar="FILE|N:DIGEST", action="append", default=[],
                   help="an anchor kept outside the bundle (`tutorrl evidence anchor`): the chain must still hold "
                   "that record at that sequence, with HEAD at or past it (repeatable)")
    from tutorrl._formats import add_format_option

    add_format_option(p, help="output format: text or json ({\"ok\", \"bundle\", \"digest\", \"evidence_records\", "
                      "\"problems\", \"warnings\", \"unlinked\"}, also on failure; with --rehash also \"not_on_disk\") (default: text)")
    p.add_argument("--rehash", action="store_true",
                   help="also hash again every recorded checkpoint still on disk and name each file that no longer "
                   "matches its record (progress on stderr)")
    p.add_argument("--jobs", type=_positive, default=None, metavar="N",
                   help="hashing threads for --rehash (default: all usable cores)")
    p.add_argument("--require-checkpoints", action="store_true",
                   help="with --rehash, a recorded checkpoint no longer on disk is a failure too")
    p.add_argument("--require-lineage", action="store_true",
                   help="a resumed run's link that cannot be checked (the bundle it resumed from is gone, or no "
                   "record covered the checkpoint) is a failure, not a note")
    from tutorrl._argparse import add_trust_digests_option

    add_trust_digests_option(p)
    p.set_defaults(handler=_verify)


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _verify(args) -> int:
    import json
    import sys

    from tutorrl import api
    from tutorrl._files import display_path
    from tutorrl._text import printable
    from tutorrl.errors import BundleError, TutorrlError

    if (args.jobs is not None or args.require_checkpoints) and not args.rehash:
        raise TutorrlError("--jobs and --require-checkpoints only apply with --rehash")

    def report(found: api.Verification | None, problems: list[str]) -> None:
        if args.format == "json":
            doc = {"ok": not problems, "bundle": display_path(args.bundle), "digest": found and found.digest,
                   "evidence_records": found and found.records, "problems": problems,
                   "warnings": found.warnings if found else []}
            # Links not checked (the linked bundle gone, or no record to link): failures under --require-lineage.
            doc["unlinked"] = found.unlinked if found else []
            if args.rehash:
                doc["not_on_disk"] = found.not_on_disk if found else []
            print(json.dumps(doc, indent=2))

    try:
        found = api.verify(args.bundle, rehash=args.rehash, jobs=args.jobs, trust=args.trust, anchors=args.anchor,
                           require_checkpoints=args.require_checkpoints, require_lineage=args.require_lineage,
                           trust_digests=args.trust_digests)
    except BundleError as exc:
        report(None, [str(exc)])
        raise
    for warning in found.bundle_warnings:
        # Names the manifest's own `compiler`, which whoever wrote the bundle chose.
        print(printable(f"warning: {warning}"), file=sys.stderr)
    for warning in found.warnings:
        print(printable(f"warning: evidence: {warning}"), file=sys.stderr)
    if args.format != "json":
        for line in found.lineage + ([] if args.require_lineage else found.unlinked):
            print(printable(f"note: lineage: {line}"), file=sys.stderr)
        if args.rehash and not args.require_checkpoints:
            for line in found.not_on_disk:
                print(f"note: {line}", file=sys.stderr)
    report(found, found.problems)
    if found.problems:
        raise BundleError(f"{args.bundle}: evidence verification failed:\n  " + "\n  ".join(found.problems))
    if args.format != "json":
        how = "re-derived from its spec" if not found.bundle_warnings else "digests match"
        said = ""
        if found.records:
            said = f"; {found.records} evidence record(s)" + (", each signed by a trusted key" if args.trust else "") + (
                f", holding {len(args.anchor)} anchor(s)" if args.anchor else "")
        if args.rehash:
            said += (f"; every recorded checkpoint on disk re-hashed and matches ({len(found.not_on_disk)} no longer "
                     "on disk)")
        print(f"ok: {display_path(found.path)} is bundle {found.digest} ({how}){said}")
    return 0
