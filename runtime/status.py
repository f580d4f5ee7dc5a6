"""``tutorrl status``: a run's state, a set's, or every open one's, as one typed report.

What it holds is read and reconciled here (observe.py, runset.py); the text
and JSON the command prints of it are :mod:`tutorrl.runtime.text`'s.
"""

from __future__ import annotations

from pathlib import Path

from tutorrl.runtime.reports import SetState, StatusReport


def status_report(run: str | None = None, show_all: bool = False) -> StatusReport:
    from tutorrl.errors import RefusedError
    from tutorrl.runtime import lifecycle, observe, runset

    if show_all and run:
        raise RefusedError("--all lists every set; it takes no run or set id")
    if run and runset.is_set_ref(run):
        return StatusReport(set_state=runset.set_state(run))
    if run:
        (state,) = observe.described([lifecycle.find_run(run)])
        return StatusReport(run_state=state)
    return _overview(show_all)


def _overview(show_all: bool) -> StatusReport:
    """The open sets and the last that ended (shown_sets), the runs of no set that ended last
    (shown_ended_runs), then each open run that is no set's (a run of a set is a row of that set's
    table: `tutorrl status SET`)."""
    from tutorrl.runtime import observe, runset

    every_set = runset.list_sets()
    listed, hidden = runset.shown_sets(every_set, show_all)
    sets = [SetState(record=r, rows=runset.set_rows(r)) for r in listed]
    # A set's runs are rows of its table, shown or not: never listed again as single runs.
    in_sets = frozenset(Path(p).resolve() for r in every_set for p in r.runs.values())
    runs = observe.open_runs(skip=in_sets)
    ended, hidden_runs = runset.shown_ended_runs(in_sets, show_all)
    return StatusReport(sets=sets, ended=[observe.run_state(p, r) for p, r in ended], open=runs,
                        hidden_sets=hidden, hidden_runs=hidden_runs)
