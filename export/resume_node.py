"""Where a requeued export job resumes, asked on the node: ``python -m tutorrl.export.resume_node BUNDLE``.

An exported job (Slurm's ``--requeue``, a SkyPilot managed job's recovery)
starts again with nobody at a terminal, so the choice ``tutorrl run --retries``
makes between attempts is made by the job itself where its Python has
tutorrl: the newest checkpoint in the bundle's output folder whose evidence
record verifies with its files hashed again (evidence/resume_point.py).

Standard output: the chosen step folder in Hydra's override grammar, or
nothing (from scratch). Standard error: each checkpoint passed over and why.
The output folder is the one launch.sh computes: the spec's, its roots taken
from the environment where set (as launch.sh takes them), relative to the
working folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The exit status of a job that cannot read its bundle's evidence (export/common.py's REFUSED).
REFUSED = 3


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tutorrl.export.resume_node BUNDLE", file=sys.stderr)
        return 2
    from tutorrl.compiler.release import render_value
    from tutorrl.evidence import choose_resume_point, load_bundle

    bundle = Path(argv[0])
    try:
        info = load_bundle(bundle)
        roots = {name: os.environ[name] for name in info.root_defaults if os.environ.get(name)}
        choice = choose_resume_point(bundle, Path.cwd(), roots)
    except (OSError, ValueError) as exc:
        print(f"tutorrl: cannot choose where {bundle} resumes: {exc}", file=sys.stderr)
        return REFUSED
    for line in choice.skipped:
        print(f"tutorrl: not resumed from {line}", file=sys.stderr)
    if choice.directory is not None:
        print(f"tutorrl: resuming from {choice.directory} (record {choice.record}: its files hashed again match "
              "it)", file=sys.stderr)
        print(render_value(choice.directory))
    else:
        print("tutorrl: no checkpoint whose evidence verifies; starting from scratch", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
