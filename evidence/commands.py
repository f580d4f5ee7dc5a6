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
    if action == "keygen":
        if args.anchor_bundle is not None:
            raise TutorrlError(f"`tutorrl evidence keygen` takes no bundle (got {args.anchor_bundle!r})")
        return _keygen(args)
    if action == "anchor":
        if args.anchor_bundle is None:
            raise TutorrlError("`tutorrl evidence anchor` needs the bundle: tutorrl evidence anchor bundles/<id>")
        return _anchor(args)
    if args.add is None:
        if args.engine or args.base_model:
            raise TutorrlError("--engine and --base-model only apply with --add CKPT_DIR")
        return _show(args)
    return _add(args)


def _show(args) -> int:
    import json
    import sys

    import msgspec

    from tutorrl import api
    from tutorrl.evidence.text import failure_lines, summary_line

    bundle, entries = api.evidence_records(args.bundle)
    if args.format == "json":
        out = [msgspec.to_builtins(e.statement) if e.statement else {"file": e.name, "malformed": True}
               for e in entries]
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    if not entries:
        print(f"{bundle}: no evidence recorded yet", file=sys.stderr)
    for e in entries:
        print(summary_line(e.name, e.statement) + e.signed_by)
        for line in failure_lines(e.statement):
            print(line)
    return 0


def _keygen(args) -> int:
    import sys

    from tutorrl import api
    from tutorrl._files import display_path
    from tutorrl.contract import EVIDENCE_KEY_ENV

    made = api.keygen(args.key)
    pub = display_path(made.public)
    print(f"wrote signing key {display_path(made.key)} (mode 0600; keep it out of bundles and repositories)",
          file=sys.stderr)
    print(f"public key {pub}: keyid {made.keyid}", file=sys.stderr)
    if not made.default:
        print(f"new records are signed with it when {EVIDENCE_KEY_ENV}={display_path(made.key)} is set where they are "
              "written", file=sys.stderr)
    else:
        print("new records are signed with it wherever this user records evidence", file=sys.stderr)
    print(f"verify with: tutorrl verify bundles/<id> --trust {pub}", file=sys.stderr)
    print(pub)
    return 0


def _anchor(args) -> int:
    import sys

    from tutorrl import api

    done = api.anchor(args.anchor_bundle, out=args.out)
    for warning in done.warnings:
        print(f"warning: evidence: {warning}", file=sys.stderr)
    if done.written:
        print(f"wrote {done.written}: commit or publish it outside the bundle; check with "
              f"`tutorrl verify {args.anchor_bundle} --anchor {done.written}`", file=sys.stderr)
    print(done.json if args.format == "json" else done.text, end="" if args.format == "json" else "\n")
    return 0


def _add(args) -> int:
    import json

    import msgspec

    from tutorrl import api
    from tutorrl.evidence.text import failure_lines, summary_line

    e = api.add_checkpoint(args.bundle, args.add, run_id=args.run_id, engines=args.engine, base_model=args.base_model,
                           workers=args.workers)
    s = e.statement
    if args.format == "json":
        print(json.dumps(msgspec.to_builtins(s) if s else {"file": e.name, "malformed": True}, indent=2, sort_keys=True))
    else:
        print(summary_line(e.name, s))
        for line in failure_lines(s):
            print(line)
    # 1, like diff: recorded fine, but what it checked does not hold.
    return 1 if s is not None and s.predicate.verdict.status == "fail" else 0


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
