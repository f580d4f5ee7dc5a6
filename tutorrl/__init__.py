"""tutorrl: compile RL post-training specs into verl launch bundles and run them on Ray.

The public surface is the ``tutorrl`` command (``tutorrl.cli``). Library users
should reach for :mod:`tutorrl.compiler` (compile and verify bundles),
:mod:`tutorrl.runtime` (run them) and :mod:`tutorrl.evidence` (checkpoint
records); everything else is internal.
"""

__version__ = "0.1.0"
