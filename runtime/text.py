"""The text and JSON ``tutorrl status``, ``runs`` and a set's ``run`` print of what the API returned
(runtime/reports.py): nothing here reads, writes or asks Ray; each function turns a value into text."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from tutorrl.runtime import metrics, tracker

if TYPE_CHECKING:
    from tutorrl.runtime.records import Attempt, RunRecord
    from tutorrl.runtime.reports import RunRow, RunState, SetRecord, SetRow, StatusReport


def _json(doc: Any) -> str:
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n" for row in rows)


# -- one run (`tutorrl status RUN`) ------------------------------------------------------------------------

def run_doc(state: RunState) -> dict[str, Any]:
    """The run's JSON object: its record in full, then what was checked (key order is the record's, then these)."""
    out: dict[str, Any] = msgspec.to_builtins(state.record)
    out["path"] = state.path
    out["log"] = state.log
    out["dashboard"] = state.dashboard
    out["owner_alive"] = state.owner_alive
    out["verified"] = state.verified
    out["step"] = state.progress.step
    out["total_steps"] = state.progress.total
    out["progress"] = msgspec.to_builtins(state.progress)
    return out


def attempt_lines(attempts: list[Attempt], retries: int | None) -> list[str]:
    """A retried run's submissions (`--retries`), one line each: its status and exit, the step it resumed
    from (or from scratch), the last step it reached."""
    if retries is None:
        return []
    lines = [f"  attempts:  {len(attempts)} of at most {retries + 1}"]
    for n, a in enumerate(attempts, 1):
        start = "from scratch" if a.resumed_step is None else f"resumed from step {a.resumed_step}"
        lines.append(f"    {n}. {a.submission_id}: {a.status or 'running'}"
                     + ("" if a.exit_code is None else f" (exit {a.exit_code})")
                     + f", {start}" + ("" if a.reached_step is None else f", reached step {a.reached_step}"))
        lines += [f"       not resumed from {skipped}" for skipped in a.skipped or []]
    return lines


def run_text(state: RunState) -> str:
    from tutorrl.runtime.lifecycle import UNVERIFIED

    r, p = state.record, state.progress
    where = "embedded Ray head" if r.address_kind == "embedded" else f"cluster {r.address}"
    lines = [f"{r.run_id}: {r.status}" + (" (dry run)" if r.dry_run else "")
             + ("" if r.exit_code is None else f", exit code {r.exit_code}")]
    if r.message:
        lines.append(f"  {r.message}")
    if r.evidence_problems:
        lines.append(f"  evidence:  failed (`tutorrl run` exits {r.evidence_exit_code}): "
                     + "; ".join(r.evidence_problems))
    if not state.verified:
        lines.append(f"  {UNVERIFIED}")
    lines.append(f"  where:     {where}" + (" (detached)" if r.detached else ""))
    if state.dashboard:
        lines.append(f"  dashboard: {state.dashboard}")
    if p.step is not None:
        lines.append(f"  progress:  {metrics.status_text(p)}")
    if p.rewards:
        values = [v for _, v in p.rewards]
        lines.append(f"  {p.reward_key}: {metrics.sparkline(values)}")
        lines.append(f"             steps {p.rewards[0][0]}-{p.rewards[-1][0]}, min {min(values):.4g}, "
                     f"max {max(values):.4g}, last {values[-1]:.4g}")
    lines += attempt_lines(r.attempts or [], r.retries)
    tracked = tracker.text(r.tracker_id, r.mlflow_run_id)
    if tracked:
        lines.append(f"  tracker:   {tracked}")
    lines.append(f"  started:   {r.started}" + (f"  ended: {r.ended}" if r.ended else ""))
    lines.append(f"  record:    {state.path}")
    return "\n".join(lines) + "\n"


# -- a bundle's runs (`tutorrl runs`) -----------------------------------------------------------------------

def runs_json(rows: list[RunRow]) -> str:
    """Every run record in full (with ``verified``); an unreadable one as its id and ``unreadable``."""
    return _json([{**msgspec.to_builtins(r.record), "verified": r.verified} if r.record is not None
                  else {"run_id": r.run_id, "status": "unreadable"} for r in rows])


def _attempts_cell(r: RunRecord) -> str:
    if r.retries is None:
        return ""
    n = len(r.attempts)
    resumed = [str(a.resumed_step) for a in r.attempts[1:] if a.resumed_step is not None]
    return (f"{n} attempt{'s' if n != 1 else ''} of {r.retries + 1}"
            + (f"; resumed from {', '.join(resumed)}" if resumed else ""))


def runs_table(rows: list[RunRow]) -> str:
    """One line per run; ATTEMPTS and TRACKER only where some run has a value for them (a plain run's
    table is as it was). Empty for no runs."""
    if not rows:
        return ""
    table = [["RUN", "STARTED (UTC)", "WHERE", "STATUS", "EXIT"]]
    retried = any(row.record is not None and row.record.retries is not None for row in rows)
    tracked = any(row.record is not None and tracker.text(row.record.tracker_id, row.record.mlflow_run_id)
                  for row in rows)
    if retried:
        table[0].append("ATTEMPTS")
    if tracked:
        table[0].append("TRACKER")
    for row in rows:
        r = row.record
        if r is None:
            table.append([row.run_id, "?", "?", "unreadable", "?"] + (["?"] if retried else [])
                         + (["?"] if tracked else []))
            continue
        where = r.address_kind if r.address_kind == "embedded" else f"cluster {r.address}"
        status = r.status + (" (dry run)" if r.dry_run else "")
        if not row.verified:
            status += " (not verified: not started by tutorrl here)"
        cells = [r.run_id, r.started, where, status, "" if r.exit_code is None else str(r.exit_code)]
        if retried:
            cells.append(_attempts_cell(r))
        if tracked:
            cells.append(tracker.text(r.tracker_id, r.mlflow_run_id))
        table.append(cells)
    return _table(table)


# -- sets ---------------------------------------------------------------------------------------------------

def set_table(record: SetRecord, rows: list[SetRow]) -> str:
    """A set as one table: a row per bundle, its point, state, step k/N, last reward and run."""
    body = [["POINT", "STATE", "STEP", "LAST REWARD", "RUN"]]
    for r in rows:
        step = "-" if r.step is None else f"{r.step}/{r.total_steps if r.total_steps is not None else '?'}"
        reward = "-" if r.reward is None else f"{r.reward:.4g}"
        body.append([r.point, r.state, step, reward, r.run or "-"])
    head = (f"{record.set_id}: {record.status}, {len(rows)} bundles, at most {record.max_parallel} at a time"
            + ("" if record.address_kind == "embedded" else f", on {record.address}"))
    return head + "\n" + _table(body)


def set_summary(rows: list[SetRow]) -> str:
    """A set's runs in one phrase: "6 bundles: 4 succeeded, 2 running"."""
    counts: dict[str, int] = {}
    for r in rows:
        state = r.state.removesuffix(" (dry run)")
        counts[state] = counts.get(state, 0) + 1
    return f"{len(rows)} bundles: " + ", ".join(f"{n} {state}" for state, n in counts.items())


# -- `tutorrl status` ---------------------------------------------------------------------------------------

def status_json(report: StatusReport) -> str:
    if report.run_state is not None:
        return _json(run_doc(report.run_state))
    if report.set_state is not None:
        return _json({**msgspec.to_builtins(report.set_state.record), "rows": report.set_state.rows})
    doc: list[dict[str, Any]] = [
        {"kind": "set", "set_id": r.set_id, "status": r.status, "started": r.started, "ended": r.ended,
         "dry_run": r.dry_run, "address_kind": r.address_kind, "bundles": len(s.rows),
         "summary": set_summary(s.rows), "detached": r.detached} for s in report.sets for r in [s.record]]
    doc += [{"kind": "run", **run_doc(d)} for d in report.ended]
    doc += [{"kind": "run", **run_doc(d)} for d in report.open]
    return _json(doc)


def _ended_table(ended: list[RunState]) -> str:
    """One row per ended run: what it came to, how far it got, and its bundle (`tutorrl status RUN` says more)."""
    from tutorrl._files import display_path

    table = [["RUN", "STATE", "EXIT", "STEP", "ENDED (UTC)", "BUNDLE"]]
    for s in ended:
        r, p = s.record, s.progress
        step = "-" if p.step is None else f"{p.step}/{p.total or '?'}"
        table.append([r.run_id, r.status + (" (dry run)" if r.dry_run else ""),
                      "-" if r.exit_code is None else str(r.exit_code), step, r.ended or "-",
                      display_path(Path(s.path).parent.parent)])
    return _table(table)


def status_text(report: StatusReport) -> str:
    """What ``tutorrl status`` writes to standard output (its notes, :func:`status_notes`, go to standard error)."""
    if report.run_state is not None:
        return run_text(report.run_state)
    if report.set_state is not None:
        return set_table(report.set_state.record, report.set_state.rows)
    out = ""
    if report.sets:
        table = [["SET", "STATE", "RUNS", "STARTED (UTC)"]]
        table += [[r.set_id, r.status + (" (dry run)" if r.dry_run else "") + (" (detached)" if r.detached else ""),
                   set_summary(s.rows), r.started] for s in report.sets for r in [s.record]]
        out += _table(table)
    if report.ended:
        out += ("\n" if report.sets else "") + _ended_table(report.ended)
    out += "".join(("\n" if report.sets or report.ended or n else "") + run_text(d) for n, d in enumerate(report.open))
    return out


def status_notes(report: StatusReport, *, as_json: bool = False) -> str:
    """What ``tutorrl status`` says on standard error: that nothing is open (as text), and what it left out."""
    notes = []
    overview = report.run_state is None and report.set_state is None
    hidden, hidden_runs = report.hidden_sets, report.hidden_runs
    if overview and not as_json and not (report.sets or report.open or report.ended):
        notes.append(("no open sets and no open runs started on this machine" if hidden or hidden_runs else
                      "no sets and no runs started on this machine") + " (tutorrl status <run-id> shows any run)")
    if hidden:
        notes.append(f"{hidden} older {'set' if hidden == 1 else 'sets'} that ended not shown "
                     f"(`tutorrl status --all` lists every set)")
    if hidden_runs:
        notes.append(f"{hidden_runs} older {'run' if hidden_runs == 1 else 'runs'} that ended not shown "
                     f"(`tutorrl status --all` lists every run)")
    return "".join(f"{note}\n" for note in notes)
