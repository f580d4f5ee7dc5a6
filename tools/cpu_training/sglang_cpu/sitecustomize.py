"""sglang's CPU patches for every Python process with this folder on PYTHONPATH (test tooling only).

The patches themselves, with what each does and why, are in ``sglang_cpu_patches.py`` beside this
file: a module of its own so that a process whose ``sitecustomize`` is another one (verl 0.9.1
training with an SGLang rollout, ``tools/cpu_training/verl091_sglang``) can apply them too.
"""

import sglang_cpu_patches  # noqa: F401  (installs its post-import hooks)
