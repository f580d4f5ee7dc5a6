"""The ``tutorrl`` command: argument parsing and the one place errors are shown.

Each feature module owns its sub-commands through a ``register(subparsers)``
function; it must import nothing heavy at module level, so that ``tutorrl
compile`` stays a fast interpreter start (no ray, torch, hydra or verl).

A module may also offer ``parse_<command>(argv)``: that command's plain
forms parsed without argparse (whose import and parser building were ~2.5 ms
of a cold compile), or ``None`` for anything else -- which argparse then
parses and explains. Its tests hold it to argparse's answers.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tutorrl import __version__

if TYPE_CHECKING:
    import argparse

# Modules that contribute sub-commands, in the order `--help` lists them.
_COMMAND_MODULES = (
    "tutorrl.compiler.commands",
    "tutorrl.runtime.commands",
    "tutorrl.evidence.commands",
    "tutorrl.review.commands",
    "tutorrl.importer.commands",
    "tutorrl.export.commands",
    "tutorrl.completion",
)
# Which module owns each sub-command, so a command builds only its own parser
# (a test keeps this in step with what the modules register).
COMMAND_OWNERS = {
    "compile": "tutorrl.compiler.commands",
    "verify": "tutorrl.evidence.commands",
    "keys": "tutorrl.compiler.commands",
    "migrate": "tutorrl.compiler.commands",
    "run": "tutorrl.runtime.commands",
    "runs": "tutorrl.runtime.commands",
    "status": "tutorrl.runtime.commands",
    "logs": "tutorrl.runtime.commands",
    "stop": "tutorrl.runtime.commands",
    "model": "tutorrl.runtime.commands",
    "evidence": "tutorrl.evidence.commands",
    "diff": "tutorrl.review.commands",
    "check": "tutorrl.review.commands",
    "schema": "tutorrl.review.commands",
    "import": "tutorrl.importer.commands",
    "export": "tutorrl.export.commands",
    "completion": "tutorrl.completion",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only what owns it registers.

    A module may offer ``register_<command>(subparsers)`` to build that one
    command alone (the compile path uses it); otherwise its ``register``
    builds all of its commands.
    """
    from tutorrl._argparse import Parser

    parser = Parser(
        prog="tutorrl",
        description="Compile RL post-training specs into verl launch bundles and run them on Ray.",
    )
    parser.add_argument("--version", action="version", version=f"tutorrl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command == "--version":  # answered before any command is needed
        return parser
    owner = COMMAND_OWNERS.get(command or "")
    for name in (owner,) if owner else _COMMAND_MODULES:
        try:
            # __import__ + sys.modules: importlib.import_module's package costs a cold start.
            __import__(name)
            module = sys.modules[name]
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        register = getattr(module, f"register_{command}", None) if owner else None
        (register or module.register)(sub)
    return parser


# Kept here for the commands that import it from the CLI; it lives in _text (the library uses it too).
from tutorrl._text import printable  # noqa: E402,F401


def _parse_plain(argv: list[str]):
    """The owning module's ``parse_<command>`` answer, or None."""
    owner = COMMAND_OWNERS.get(argv[0]) if argv else None
    if owner is None:
        return None
    __import__(owner)
    parse = getattr(sys.modules[owner], f"parse_{argv[0]}", None)
    return parse(argv[1:]) if parse is not None else None


def _debug() -> bool:
    """TUTORRL_DEBUG=1: a refused input also shows where in tutorrl it was refused (as Hydra's HYDRA_FULL_ERROR)."""
    import os

    from tutorrl.contract import DEBUG_ENV

    return os.environ.get(DEBUG_ENV) == "1"


def main(argv: list[str] | None = None) -> int:
    # Here, not at module level: it imports msgspec, which entry() lets load
    # with the collector paused.
    from tutorrl.errors import EXIT_FAILED, EXIT_INTERRUPTED, TutorrlError

    argv = sys.argv[1:] if argv is None else argv
    args = _parse_plain(argv)
    if args is None:
        args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TutorrlError as exc:
        if _debug():
            import traceback

            traceback.print_exc()
        print(printable(exc.render()), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_FAILED


# Short commands: they allocate for a few tens of milliseconds what lives
# until exit (modules, types, one spec of at most 1 MiB), close everything
# they write, and make next to no cyclic garbage. See entry(). `import` loads
# Hydra, OmegaConf and Antlr (~120 collections that free nothing, ~50 ms of a
# ~250 ms warm import); the ~1.5 MiB of OmegaConf cycles each launch leaves are
# freed between launches by the command itself.
_SHORT = frozenset({"compile", "import"})


def _load_msgspec_without_typing_extensions() -> None:
    """Import msgspec with ``typing_extensions`` held off, then let it go.

    Where typing_extensions is installed (every venv with the extras) msgspec
    takes ``get_type_hints``/``Required``/``NotRequired`` from it, and
    typing_extensions imports ``inspect``: ~9 ms of a ~42 ms cold compile
    (4.7x a bare start instead of 4.0x, issue 26). On Python 3.11+ typing has
    all three, and msgspec falls back to them when the import fails. Only in
    the ``tutorrl`` process, which no other msgspec user shares; a library
    import (the callback inside verl's trainer, beside vLLM's msgspec structs)
    leaves msgspec as it finds it. The ``None`` entry is removed again, so
    anything later (ray, hydra) imports typing_extensions as usual.
    """
    if "msgspec" in sys.modules or "typing_extensions" in sys.modules:
        return
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # an import of it fails at once
    try:
        import msgspec  # noqa: F401
    finally:
        if sys.modules.get("typing_extensions", False) is None:
            del sys.modules["typing_extensions"]


def entry() -> None:
    """The ``tutorrl`` program (console script and ``python -m tutorrl``): :func:`main`, then exit.

    A short command runs without the cyclic garbage collector, and exits with
    everything frozen out of its reach: its ~20 passes during the imports and
    the interpreter's last collection at exit walked every object of typing,
    msgspec and the compiler to free nothing -- ~6 ms of a ~35 ms cold
    compile (benchmarks/bench_compile.py). It then ends without the
    interpreter's teardown (:func:`_end`). Long-lived commands (``run``) keep
    the collector. Only here, where the process ends next -- never in
    :func:`main`, which tests and tools call in a process that goes on.
    """
    import gc

    short = sys.argv[1:2] != [] and sys.argv[1] in _SHORT
    if short:
        gc.disable()
    _load_msgspec_without_typing_extensions()
    code = main()
    if short:
        gc.freeze()
        _end(code)
    sys.exit(code)


def _end(code: int) -> None:
    """Exit now, as the interpreter would but for freeing every module and object one by one.

    That teardown is all a short command has left once it has closed what it
    wrote: ~8 ms of a warm ``tutorrl import`` (Hydra, OmegaConf and Antlr
    loaded), ~1 ms of a compile. What an exit owes is done first: the exit
    handlers (``weakref.finalize``'s among them: temporary folders) and the
    standard streams' buffers. A thread still running keeps the usual exit,
    which waits for it.
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
