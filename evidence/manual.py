"""What `tutorrl evidence` does; kept apart so the parser imports nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec

from tutorrl.errors import EvidenceInputError  # its home; importable from here too
from tutorrl.evidence.bundle import load_bundle
from tutorrl.evidence.checkpoints import find_step_dirs, read_tracker, step_of
from tutorrl.evidence.record import read_records, record_checkpoint
from tutorrl.evidence.schema import Statement


def summary_line(name: str, s: Statement | None) -> str:
    if s is None:
        return f"{name}  MALFORMED (run `tutorrl verify`)"
    p = s.predicate
    counts = {k: sum(c.status == k for c in p.verdict.checks) for k in ("pass", "fail", "skipped")}
    tensors = sum(f.tensor_count for f in p.checkpoint.safetensors)
    served = p.publication.served_digest[:19] if p.publication and p.publication.served_digest else "-"
    finished = {True: "finished", False: "UNFINISHED", None: "in-run"}[p.run.finished]
    fails = [c.id for c in p.verdict.checks if c.status == "fail"]
    line = (
        f"{name}  step {p.checkpoint.step:<6} files {len(p.checkpoint.files.resources):<4} "
        f"root {p.checkpoint.files.root[:19]}  tensors {tensors:<5} served {served}  "
        f"{p.verdict.status.upper()} ({counts['pass']} pass, {counts['fail']} fail, {counts['skipped']} skipped)  "
        f"run {p.run.run_id} [{p.run.source}, {finished}]"
    )
    if fails:
        line += "  failed: " + ", ".join(fails)
    if p.model is not None and p.lineage is not None:
        # A model record (`tutorrl model`): which folder, made from which checkpoint record.
        line += f"  model {p.checkpoint.root}/{p.checkpoint.directory} from {p.lineage.record} ({p.lineage.directory})"
    return line


def recorded_line(name: str, s: Statement) -> str:
    """A record in one line, for `tutorrl run`'s stream: step, files, the checks in short
    (the ids of those that did not pass), and the record it links to if the run resumed."""
    p = s.predicate
    counts = {k: [c.id for c in p.verdict.checks if c.status == k] for k in ("pass", "fail", "skipped")}
    said = [f"{len(counts['pass'])} pass"]
    said += [f"{len(counts[k])} {k}: {', '.join(counts[k])}" for k in ("fail", "skipped") if counts[k]]
    line = (f"evidence: {name}: step {p.checkpoint.step}, {len(p.checkpoint.files.resources)} files, "
            f"{p.verdict.status.upper()} ({'; '.join(said)})")
    lineage = p.lineage
    if lineage is not None and p.model is not None:
        line += f"; a model ({p.checkpoint.directory}/) merged from {lineage.directory}, recorded as {lineage.record}"
    elif lineage is not None:
        check = next((c.status for c in p.verdict.checks if c.id == "lineage.resumed_from"), "?")
        if lineage.record is not None:
            line += (f"; resumed from {lineage.directory}, recorded as {lineage.record} of bundle "
                     f"{(lineage.bundle or '')[:19]} (link {check})")
        else:
            line += f"; resumed from {lineage.directory}, which no record covers"
    return line


def failure_lines(s: Statement | None) -> list[str]:
    """One indented line per check that did not pass, with its reason, for under the
    record's summary line (the reasons --format json carries): the failed first, then
    the skipped, so that PARTIAL says what it is short of."""
    from tutorrl._text import printable

    if s is None:
        return []
    checks = s.predicate.verdict.checks
    return ([f"    {c.id}: {printable(c.detail)}" for c in checks if c.status == "fail"]
            + [f"    skipped {c.id}: {printable(c.detail)}" for c in checks if c.status == "skipped"])


def show(args) -> int:
    # Records are only as good as the bundle they name: a tampered bundle is
    # refused before any of its records is shown.
    bundle = load_bundle(Path(args.bundle)).path
    records = read_records(bundle)
    if args.format == "json":
        out = [msgspec.to_builtins(s) if s else {"file": p.name, "malformed": True} for p, s in records]
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    if not records:
        print(f"{bundle}: no evidence recorded yet", file=sys.stderr)
    for path, s in records:
        print(summary_line(path.name, s) + (_signed_by(path) if s is not None else ""))
        for line in failure_lines(s):
            print(line)
    return 0


def _signed_by(path: Path) -> str:
    """Who says they signed the record (unchecked here: `tutorrl verify --trust` checks)."""
    from tutorrl._read import ReadError
    from tutorrl.evidence.chain import read_record
    from tutorrl.evidence.statement import RecordFormatError, decode_record

    try:
        sigs = decode_record(read_record(path)).signatures
    except (OSError, ReadError, RecordFormatError):
        return ""
    return "  signed by " + ",".join(s.keyid[:16] for s in sigs) if sigs else "  unsigned"


def keygen(args) -> int:
    from tutorrl._files import display_path
    from tutorrl.evidence.sign import ENV_KEY, default_key_path, generate_key

    path = Path(args.key) if args.key else default_key_path()
    signer = generate_key(path)
    pub = display_path(path.with_name(path.name + ".pub"))
    default = args.key is None or Path(args.key).absolute() == default_key_path().absolute()
    print(f"wrote signing key {display_path(path)} (mode 0600; keep it out of bundles and repositories)",
          file=sys.stderr)
    print(f"public key {pub}: keyid {signer.keyid}", file=sys.stderr)
    if not default:
        print(f"new records are signed with it when {ENV_KEY}={display_path(path)} is set where they are written",
              file=sys.stderr)
    else:
        print("new records are signed with it wherever this user records evidence", file=sys.stderr)
    print(f"verify with: tutorrl verify bundles/<id> --trust {pub}", file=sys.stderr)
    print(pub)
    return 0


def anchor(args) -> int:
    from tutorrl.evidence.anchor import anchor_of, spell, write_anchor
    from tutorrl.evidence.verify import check_evidence
    from tutorrl.evidence.statement import canonical

    bundle = load_bundle(Path(args.anchor_bundle))
    # Anchoring a broken chain would vouch for it: the chain must verify first.
    report = check_evidence(bundle.path, bundle.digest)
    if report.problems:
        raise EvidenceInputError(f"{args.anchor_bundle}: the evidence does not verify, so it is not anchored:\n  "
                                 + "\n  ".join(report.problems))
    if report.head is None:
        raise EvidenceInputError(f"{args.anchor_bundle}: no evidence recorded yet; nothing to anchor")
    for warning in report.warnings:
        print(f"warning: evidence: {warning}", file=sys.stderr)
    a = anchor_of(bundle.digest, *report.head)
    if args.out:
        write_anchor(Path(args.out), a, bundle.path)
        print(f"wrote {args.out}: commit or publish it outside the bundle; check with "
              f"`tutorrl verify {args.anchor_bundle} --anchor {args.out}`", file=sys.stderr)
    if args.format == "json":
        print(canonical(a).decode(), end="")
    else:
        print(spell(a))
    return 0


def _pick_step_dir(path: Path) -> Path:
    if not path.is_dir():
        raise EvidenceInputError(f"{path}: not a directory")
    if step_of(path) is not None:
        return path
    steps = find_step_dirs(path)
    if not steps:
        raise EvidenceInputError(f"{path}: neither a global_step_N directory nor a checkpoint root containing one")
    tracker = read_tracker(path)
    by_step = {s.step: s.path for s in steps}
    # The tracker is only a hint; fall back to the newest directory.
    return by_step.get(tracker.step, steps[-1].path) if tracker.step is not None else steps[-1].path


def add(args) -> int:
    from tutorrl.evidence.record import CheckpointError

    for url in args.engine:
        if not url.startswith(("http://", "https://")):
            raise EvidenceInputError(f"--engine {url!r}: expected an http:// or https:// URL")
    if args.workers is not None and args.workers < 1:
        raise EvidenceInputError("--workers must be at least 1")
    base = Path(args.base_model) if args.base_model else None
    if base is not None and not base.is_dir():
        raise EvidenceInputError(f"--base-model {base}: not a directory")
    bundle = load_bundle(Path(args.bundle))
    step_dir = _pick_step_dir(Path(args.add))
    try:
        path = record_checkpoint(bundle, args.run_id, step_dir, source="manual", finished=None,
                                 engines=args.engine, base_model=base, workers=args.workers)
    except CheckpointError as exc:
        raise EvidenceInputError(str(exc)) from None
    s = dict(read_records(bundle.path)).get(path)
    if args.format == "json":
        print(json.dumps(msgspec.to_builtins(s) if s else {"file": path.name, "malformed": True},
                         indent=2, sort_keys=True))
    else:
        print(summary_line(path.name, s))
        for line in failure_lines(s):
            print(line)
    # 1, like diff: recorded fine, but what it checked does not hold.
    return 1 if s is not None and s.predicate.verdict.status == "fail" else 0
