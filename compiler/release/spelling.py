"""How a setting's value is written for a release: one home per spelling.

* ``plain``: the value as it is.
* ``pkg``: ``pkg://<module>`` (verl 0.7.1+ imports the module itself).
* ``module-file``: the file of an installed module (verl before 0.7.1 opens a
  path). Only the job's Python knows that path, so ``launch.sh`` computes it
  at start with :func:`launch_program`, built from the very quoting functions
  the compiler uses (:mod:`tutorrl.compiler.release.hydra`), never a copy.
* ``evidence-callback``: ``true`` names tutorrl's checkpoint-evidence class;
  ``false`` emits nothing (verl's default, no callback).
"""

from __future__ import annotations

# The class verl 0.9.1 calls after every checkpoint save (evidence/callback.py).
EVIDENCE_CALLBACK = "tutorrl.evidence.callback.EvidenceCallback"

# Words for `tutorrl migrate` and `diff`.
WORDS = {
    "plain": "the value",
    "pkg": "pkg://<module>",
    "module-file": "the module's file path, found by launch.sh",
    "evidence-callback": "tutorrl's evidence callback class",
}

_SKIP = object()


def spell(value: object, spelling: str) -> object:
    """The value verl receives at compile time (``module-file`` keeps the module name)."""
    if spelling == "pkg":
        return f"pkg://{value}"
    if spelling == "evidence-callback":
        return EVIDENCE_CALLBACK if value else _SKIP
    return value


def skipped(value: object) -> bool:
    return value is _SKIP


def is_runtime(spelling: str) -> bool:
    return spelling == "module-file"


def launch_program(release: str) -> str:
    """Python run by launch.sh: ``argv = [key, module]`` -> prints ``key="<quoted file path>"``."""
    from tutorrl.compiler.release import hydra

    return "\n".join([
        "import importlib.util, re, sys",
        *hydra.launch_prelude(),
        "key, module = sys.argv[1:]",
        "why = 'no such module'",
        "try:",
        "    spec = importlib.util.find_spec(module)",
        "except Exception as exc:",
        "    spec, why = None, '%s: %s' % (type(exc).__name__, exc)",
        "path = spec.origin if spec is not None and spec.has_location else None",
        "if not path:",
        f"    sys.exit('tutorrl: reward module %s is not importable by the job Python (%s): %s; verl {release} "
        "loads the reward function from a file, so the module must be installed where the job runs' "
        "% (module, sys.executable, why))",
        "print('%s=%s' % (key, quote_string(path)))",
        "",
    ])
