"""launch.sh's check that verl's trainer will load tutorrl's evidence callback.

Importing ``tutorrl.evidence.callback`` pulls in verl's callback base and with
it verl, tensordict, torch and transformers: seconds, in a process launch.sh
would throw away, on every launch. The trainer imports the callback for real
once, seconds later; what can go wrong there is found here without running
verl's code:

- this tutorrl has the callback module (an older tutorrl, or another package
  named tutorrl, has not);
- verl has the base class the callback subclasses, found as a file: importing
  ``verl`` itself imports torch;
- this tutorrl reads the bundle the callback records into, as the callback
  reads it (``load_bundle``: the same schema, a spec it can parse), so a
  mismatched tutorrl fails here rather than at the first save, hours in.

On failure the reason is the last line written (``sys.exit(reason)``);
launch.sh prints it with its own advice and exits 3. Without tutorrl at all
the import of this module fails and Python's own last line says so.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

CALLBACK = "tutorrl.evidence.callback"
# verl.trainer.ppo.checkpoint_callback, relative to the verl package folder.
VERL_BASE = ("trainer", "ppo", "checkpoint_callback.py")


def problem(bundle_dir: str | Path) -> str | None:
    """Why the trainer's Python (this one) could not run the callback for ``bundle_dir``; None when it can."""
    import tutorrl

    if importlib.util.find_spec(CALLBACK) is None:
        return f"the tutorrl at {os.path.dirname(tutorrl.__file__)} has no {CALLBACK}"
    # A top-level find_spec locates the package without executing it.
    verl = importlib.util.find_spec("verl")
    if verl is None or not verl.submodule_search_locations:
        return "verl is not importable"
    base = os.path.join(verl.submodule_search_locations[0], *VERL_BASE)
    if not os.path.isfile(base):
        return f"verl at {verl.submodule_search_locations[0]} has no verl.trainer.ppo.checkpoint_callback"
    from tutorrl.errors import TutorrlError
    from tutorrl.evidence.bundle import load_bundle

    try:
        load_bundle(Path(bundle_dir))
    except TutorrlError as exc:
        first = exc.render().splitlines()[0]
        return f"tutorrl {tutorrl.__version__} cannot read the bundle the callback records into: {first}"
    return None


def main(bundle_dir: str) -> None:
    why = problem(bundle_dir)
    if why is not None:
        sys.exit(why)
