"""tutorrl: compile RL post-training specs into verl launch bundles and run them on Ray.

The public surface is the ``tutorrl`` command (``tutorrl.cli``). Library users
should reach for :mod:`tutorrl.compiler` (compile and verify bundles),
:mod:`tutorrl.runtime` (run them) and :mod:`tutorrl.evidence` (checkpoint
records); everything else is internal.
"""

__version__ = "0.1.0"

# In a source checkout tutorrl's sub-packages are the folders beside this one
# (pyproject's package-dir maps compiler/ to tutorrl.compiler, ...); installed,
# they are inside it. Run from a checkout's root, `python -m tutorrl` finds this
# folder first whatever is installed, so without this it found no
# tutorrl.compiler at all: look beside, where they are not inside.
import os as _os

_here = _os.path.dirname(__file__)
if not _os.path.isdir(_os.path.join(_here, "compiler")):
    __path__.append(_os.path.dirname(_here))  # noqa: F821 (a package's __path__)
del _os, _here
