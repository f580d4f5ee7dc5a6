"""What `tutorrl evidence` does; kept apart so the parser imports nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec

from tutorrl.errors import TutorrlError
from tutorrl.evidence.bundle import load_bundle
from tutorrl.evidence.checkpoints import find_step_dirs, read_tracker, step_of
from tutorrl.evidence.record import read_records, record_checkpoint
from tutorrl.evidence.schema import Statement


class EvidenceInputError(TutorrlError):
    pass


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
    return line


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
        print(summary_line(path.name, s))
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
    # 1, like diff: recorded fine, but what it checked does not hold.
    return 1 if s is not None and s.predicate.verdict.status == "fail" else 0
