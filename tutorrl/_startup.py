"""Start-up tuning of the ``tutorrl`` process: what it costs to start, never what a command does.

Every trick that exists only to make a short command a fast interpreter start
lives here, used by :func:`tutorrl.cli.entry` alone -- the one caller whose
process ends right after the command. :func:`tutorrl.cli.main`, which tests and
tools call in a process that goes on, runs without any of it. What each trick
saves is measured by ``benchmarks/bench_compile.py`` (a cold compile against
``python -c pass`` and against the import floor ``import msgspec, tomli``);
the figures are in docs/architecture.md, "Measured", not here.

* :func:`begin`: a short command (:data:`SHORT`) runs without the cyclic
  garbage collector. Its passes during the imports walk every object of
  typing, msgspec and the compiler and free nothing: a short command allocates
  what lives until exit (modules, types, one spec of at most 1 MiB), closes
  everything it writes and makes next to no cyclic garbage. ``import`` loads
  Hydra, OmegaConf and Antlr, whose collections free nothing either; the
  OmegaConf cycles each launch leaves are freed between launches by the
  command itself. Long-lived commands (``run``) keep the collector.
* :func:`begin` also imports msgspec with ``typing_extensions`` held off
  (:func:`load_msgspec_without_typing_extensions`).
* :func:`finish`: a short command exits with everything frozen out of the
  collector's reach and without the interpreter's teardown (:func:`end_now`).
"""

from __future__ import annotations

import sys

# The commands that end their process within a short while of starting it.
SHORT = frozenset({"compile", "import"})


def begin(argv: list[str]) -> bool:
    """Set the process up for the command ``argv`` names; returns whether it is short."""
    short = argv[:1] != [] and argv[0] in SHORT
    if short:
        import gc

        gc.disable()
    load_msgspec_without_typing_extensions()
    return short


def finish(code: int, short: bool) -> None:
    """After a short command: freeze what is left and end the process now (:func:`end_now`);
    after any other, return (the caller exits as usual)."""
    if short:
        import gc

        gc.freeze()
        end_now(code)


def load_msgspec_without_typing_extensions() -> None:
    """Import msgspec with ``typing_extensions`` held off, then let it go.

    Where typing_extensions is installed (every venv with the extras) msgspec
    takes ``get_type_hints``/``Required``/``NotRequired`` from it, and
    typing_extensions imports ``inspect``, a large part of a cold compile. On
    Python 3.11+ typing has all three, and msgspec falls back to them when the
    import fails. Only in the ``tutorrl`` process, which no other msgspec user
    shares; a library import (the callback inside verl's trainer, beside
    vLLM's msgspec structs) leaves msgspec as it finds it. The ``None`` entry
    is removed again, so anything later (ray, hydra) imports typing_extensions
    as usual.
    """
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # an import of it fails at once
    try:
        import msgspec  # noqa: F401
    finally:
        if sys.modules.get("typing_extensions", False) is None:
            del sys.modules["typing_extensions"]


def end_now(code: int) -> None:
    """Exit now, as the interpreter would but for freeing every module and object one by one.

    That teardown is all a short command has left once it has closed what it
    wrote. What an exit owes is done first: the exit handlers
    (``weakref.finalize``'s among them: temporary folders) and the standard
    streams' buffers. A thread still running keeps the usual exit, which waits
    for it (this then returns).
    """
    import os

    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with the fd closed
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: what the interpreter's exit would report as 120
            code = code or 120
    os._exit(code)
