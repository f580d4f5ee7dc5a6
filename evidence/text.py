"""The text of evidence records: one line each (``tutorrl evidence``, ``tutorrl run``'s stream), and the
checks that did not pass."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
