"""Capture what a verl launch script launches, by running it under real bash in a jail.

Reading a launch script's text cannot say what it launches: defaults
(``${X:-d}``), arithmetic, arrays, branches, ``$(...)`` and line continuations
decide the argv. So the script is *run* -- by the real ``bash`` -- with every
command that could have an effect replaced by a stand-in that records its argv:

- ``python``/``python3`` are stand-ins: each call is recorded (argv, working
  folder, exported environment) and nothing runs. A call of
  ``-m verl.trainer.main_ppo`` or of a ``.../main_ppo.py`` file is a *launch*;
  ``python -c ...``, ``python -m pip ...`` are recorded like any command.
- ``PATH`` holds only the sandbox's ``bin/``: the stand-ins and a small
  allow-list of pure text tools that run for real (:data:`REAL_TOOLS`), so that
  ``$(dirname "$0")`` or ``$(echo $X | cut -d, -f1)`` give the script its values.
  ``date`` runs at a fixed instant (2000-01-01 UTC) so the capture is repeatable;
  each such clock read is recorded (kind ``clock``).
  ``bash``/``sh`` run the real bash (with the same stand-ins).
- Every other command (``ray``, ``srun``, ``pip``, ``mkdir``, ``nvidia-smi``,
  ``nproc``, ``sleep``, ``wget``, ``git``, ...) is not found on that ``PATH``; bash's
  ``command_not_found_handle`` records it and reports success, printing nothing.
- ``cd`` never fails (a missing folder is recorded); ``source``/``.`` of a file
  inside the sandbox runs, of anything else is recorded and skipped.
- The script runs in a temporary sandbox: its own ``HOME``, its working folder
  a copy of the verl checkout (or of the script's folder: regular files,
  folders and links only -- a FIFO, socket or device is skipped and named in
  :attr:`Capture.skipped`), an environment with nothing of this machine's
  (``env -i``; ``vars`` adds to it). The jail (:mod:`._jail`: namespaces,
  Landlock, seccomp) lets it read only the sandbox and the system's program
  trees, write only the sandbox, execute only bash, the allow-listed tools and
  the stand-ins, see no other process, reach no network, and ends every
  process it started when it ends; a time limit ends the whole jail.
  :attr:`Capture.confinement` says what this kernel confined and what not.

Variables the script reads but never sets are found with bash's own ``set -u``:
when bash reports ``NAME: unbound variable`` the script is run again with
``NAME=__UNSET_NAME__``, at most ``max_rounds`` times; ``${X:-default}`` still
takes its default (bash decides). ``vars`` gives values up front. Positional
parameters the script reads (``$1``) are given ``__UNSET_ARG1__`` the same way.

Wrappers: a recorded command whose arguments contain a ``python`` command
(``ray job submit ... -- python3 -m verl.trainer.main_ppo ...``,
``srun ... python3 -m ...``, ``env A=1 python3 ...``, ``nohup python3 ...``)
yields that launch, with the wrapper's argv kept in :attr:`Launch.via`.

Several launches, or none, are reported as such; the caller decides what is
an error.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import msgspec

from tutorrl.errors import CaptureError  # its home; importable from here too

#: Pure text tools that run for real inside the jail: what scripts compute
#: their values with. Nothing here starts other programs the jail would allow
#: (awk's ``system()`` and sed's ``e`` need ``/bin/sh``, which may not execute).
REAL_TOOLS: tuple[str, ...] = (
    "awk", "basename", "cat", "cut", "dirname", "expr", "grep", "head", "paste", "readlink",
    "realpath", "sed", "seq", "sort", "tac", "tail", "tr", "uniq", "wc",
)
#: The fixed instant ``date`` reports when not told another: 2000-01-01T00:00:00Z.
FIXED_EPOCH = 946684800
PLACEHOLDER = "__UNSET_{}__"
PPO_MODULE = "verl.trainer.main_ppo"
_SANDBOX_ENV = ("BASH_ENV", "HOME", "PATH", "PWD", "OLDPWD", "SHLVL", "_", "TZ", "LC_ALL")
_UNBOUND_RE = re.compile(r": \$?([^:\n]+): unbound variable$", re.M)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+")
_DENIED_RE = re.compile(r"^.*?: (?:line \d+: )?(/[^:]+): Permission denied$", re.M)
_PYTHON_RE = re.compile(r"^python(?:[0-9]+(?:\.[0-9]+)*)?$")
_COPY_LIMIT_FILES = 5000
_COPY_LIMIT_BYTES = 64 << 20
#: The longest capture asked for: nothing runs in one, so more is a mistake (and
#: nan or inf would be no limit at all).
MAX_TIMEOUT_S = 3600.0
#: What the jail must confine or refuse to run: ``core`` keeps the importer's
#: secrets and the network from the script; ``all`` adds signals, process
#: lifetime and privileges; ``none`` runs with whatever the kernel gives.
REQUIRE = {"core": ("environment", "reads", "writes", "executables", "network", "processes"),
           "all": ("environment", "reads", "writes", "executables", "network", "processes", "signals",
                   "lifetime", "privileges"),
           "none": ()}


class Property(msgspec.Struct, frozen=True):
    confined: bool
    #: The mechanism when confined, else what is missing and what that allows.
    how: str


class Confinement(msgspec.Struct, frozen=True):
    """What the jail confined on this machine (the last round's)."""

    #: environment, reads, writes, executables, network, processes, signals, lifetime, privileges.
    properties: dict[str, Property] = {}
    #: Linux release, Landlock ABI, namespaces entered (or why none), ...
    facts: dict = {}

    @property
    def not_confined(self) -> list[str]:
        return [name for name, p in self.properties.items() if not p.confined]

    def summary(self) -> str:
        """One line: the kernel's features, then what is not confined."""
        f = self.facts
        if not self.properties:
            return "not confined (the jail did not start)"
        ns = f.get("namespaces") or f"no namespaces ({f.get('namespaces_error', '?')})"
        head = f"Linux {f.get('kernel', '?')}, Landlock ABI {f.get('landlock_abi', 0)}, {ns}"
        missing = self.not_confined
        return head + ("; everything confined" if not missing else "; NOT confined: " + ", ".join(missing))


class Invocation(msgspec.Struct, frozen=True):
    """One recorded command: what the script asked to run and did not run."""

    seq: int
    #: ``python`` (the python stand-in), ``command`` (any other command, recorded
    #: by bash's command-not-found handler or a stand-in), ``cd`` (a folder that
    #: does not exist), ``source`` (a file outside the sandbox, skipped),
    #: ``clock`` (``date`` read the clock: it answered the fixed instant).
    kind: Literal["python", "command", "cd", "source", "clock"]
    argv: list[str]
    cwd: str
    #: Exported variables at that moment, less the sandbox's own (PATH, HOME, ...)
    #: and the inputs (``vars`` and placeholders) the script left as given.
    env: dict[str, str]


class PythonCall(msgspec.Struct, frozen=True):
    """A python command line taken apart like the interpreter does."""

    interpreter: str
    options: list[str]
    entry_kind: Literal["module", "script", "code", "stdin", "none"]
    entry: str
    args: list[str]


class Launch(msgspec.Struct, frozen=True):
    """One launch of verl's PPO trainer, or of another entry point verl's wheel ships (:func:`entry_of`)."""

    seq: int
    entry_kind: Literal["module", "script"]
    #: The module (``verl.trainer.main_ppo``) or the script path as passed.
    entry: str
    config_name: str | None
    config_path: str | None
    #: Hydra overrides, exactly as passed, in order.
    overrides: list[str]
    #: Other Hydra flags (``--cfg job``, ``--config-dir D``, ``-m``), exactly as passed.
    hydra_flags: list[str]
    interpreter: str
    interpreter_options: list[str]
    cwd: str
    #: ``cwd`` relative to the sandbox's working folder (the checkout); None if outside it.
    cwd_rel: str | None
    env: dict[str, str]
    #: The wrapper's argv up to the python command (``ray job submit ... --``), or [].
    via: list[str]


class Capture(msgspec.Struct, frozen=True):
    script: str
    launches: list[Launch]
    #: Every other recorded command, in order.
    commands: list[Invocation]
    #: Variables (and positional parameters, as ``1``, ``2``) the script read
    #: but did not set and that ``vars`` did not give, with what stood in.
    unset: dict[str, str]
    #: Names reported unbound that no rerun could give (array elements such as
    #: ``nodes[0]`` filled from a recorded command's empty output, ...). When
    #: there are any, the last round ran without ``set -u``: bash expanded them
    #: to nothing, as it would for a script that does not set ``-u`` itself.
    unresolved: list[str]
    #: Paths the jail refused, as bash reported them: writes outside the sandbox,
    #: executables outside the allow-list (``/usr/bin/python3`` by absolute path).
    denied: list[str]
    vars: dict[str, str]
    exit_code: int | None
    timed_out: bool
    #: More commands were recorded than ``max_commands``: the run was stopped.
    truncated: bool
    rounds: int
    confinement: Confinement
    #: Entries of the copied folder that are not regular files, folders or links
    #: (FIFOs, sockets, devices) or could not be read, with why: not in the sandbox.
    skipped: list[str]
    #: The sandbox folders of the last round (gone after the capture); recorded
    #: paths and argv start with them.
    workdir: str
    home: str
    stdout_tail: str
    stderr_tail: str


# ---------------------------------------------------------------------------
# The python command line


def parse_python(argv: Sequence[str]) -> PythonCall:
    """Take ``python [options] (-m mod | -c code | script | -) args`` apart."""
    options: list[str] = []
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if arg in ("-m", "-c"):
            if i + 1 >= len(argv):
                return PythonCall(argv[0], options, "none", "", [])
            kind = "module" if arg == "-m" else "code"
            return PythonCall(argv[0], options, kind, argv[i + 1], list(argv[i + 2:]))
        if arg.startswith("--"):
            options.append(arg)
            i += 1
            continue
        # Combined short flags: -uB, -Wignore, -X dev, -mmod, -ccode.
        j = 1
        consumed = False
        while j < len(arg):
            ch = arg[j]
            if ch in "mc":
                payload = arg[j + 1:]
                options.append(arg[:j]) if j > 1 else None
                kind = "module" if ch == "m" else "code"
                if payload:
                    return PythonCall(argv[0], options, kind, payload, list(argv[i + 1:]))
                if i + 1 >= len(argv):
                    return PythonCall(argv[0], options, "none", "", [])
                return PythonCall(argv[0], options, kind, argv[i + 1], list(argv[i + 2:]))
            if ch in "WX":
                if j + 1 == len(arg):
                    options.extend([arg, argv[i + 1]] if i + 1 < len(argv) else [arg])
                    i += 2
                    consumed = True
                break
            j += 1
        if not consumed:
            options.append(arg)
            i += 1
    if i >= len(argv):
        return PythonCall(argv[0], options, "none", "", [])
    if argv[i] == "-":
        return PythonCall(argv[0], options, "stdin", "-", list(argv[i + 1:]))
    return PythonCall(argv[0], options, "script", argv[i], list(argv[i + 1:]))


def is_ppo_launch(call: PythonCall) -> bool:
    """``-m verl.trainer.main_ppo`` or a ``.../main_ppo.py`` file (of no other known entry point)."""
    found = entry_of(call.entry_kind, call.entry)
    return found is not None and found.default


def entry_of(kind: str, entry: str):
    """The known entry point (``compiler/release/keymap/entries.toml``) a ``-m MODULE`` or a script file
    starts, else None. A file counts by its path's end (``.../one_step_off_policy/main_ppo.py``); any other
    ``main_ppo.py`` is verl's trainer, as before entry points were known."""
    from tutorrl.compiler.release import find_entry, load_entries

    if kind == "module":
        return next((e for e in load_entries().values() if e.module == entry), None)
    if kind != "script":
        return None
    path = "/" + entry.lstrip("./")
    for e in load_entries().values():
        if not e.default and path.endswith("/" + e.module.replace(".", "/") + ".py"):
            return e
    return find_entry(None) if entry.rsplit("/", 1)[-1] == "main_ppo.py" else None


def is_entry_launch(call: PythonCall) -> bool:
    """A launch of a known entry point (entries.toml): main_ppo, fully_async, one_step_off, and a recipe's
    (DAPO, entropy), whose config the import composes from the recipe checkout it is given (``--recipe``)."""
    return entry_of(call.entry_kind, call.entry) is not None


def python_started(commands: Sequence[Invocation]) -> list[str]:
    """What each recorded python command started, in order, once each: ``python3 -m mod``,
    ``python3 path/x.py``, ``python3 -c <code>`` (the code left out: only where it ran)."""
    out: list[str] = []
    for c in commands:
        start = 0 if c.kind == "python" else _python_in(c.argv) if c.kind == "command" else None
        if start is None:
            continue
        call = parse_python(c.argv[start:])
        interpreter = call.interpreter.rsplit("/", 1)[-1]
        said = {"module": f"{interpreter} -m {call.entry}", "script": f"{interpreter} {call.entry}",
                "code": f"{interpreter} -c <code>", "stdin": f"{interpreter} - (code on stdin)"}.get(call.entry_kind)
        if said and said not in out:
            out.append(said)
    return out


_HYDRA_VALUE_FLAGS = {"--config-name": "name", "-cn": "name", "--config-path": "path", "-cp": "path",
                      "--config-dir": None, "-cd": None, "--cfg": None, "-c": None, "--package": None,
                      "-p": None, "--experimental-rerun": None}
_HYDRA_OPTIONAL_VALUE = {"--info", "-i"}


def split_hydra_args(args: Sequence[str]) -> tuple[str | None, str | None, list[str], list[str]]:
    """(config name, config path, overrides, other flags) as Hydra's argparse reads them."""
    name = path = None
    overrides: list[str] = []
    flags: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and flag in _HYDRA_VALUE_FLAGS:
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            role = _HYDRA_VALUE_FLAGS[flag]
            if role == "name":
                name = value
            elif role == "path":
                path = value
            else:
                flags.extend([arg] if eq else [flag, value])
        elif arg.startswith("-") and flag in _HYDRA_OPTIONAL_VALUE:
            flags.append(arg)
            if not eq and i + 1 < len(args) and not args[i + 1].startswith("-") and "=" not in args[i + 1]:
                flags.append(args[i + 1])
                i += 1
        elif arg.startswith("-"):
            flags.append(arg)
        else:
            overrides.append(arg)
        i += 1
    return name, path, overrides, flags


# ---------------------------------------------------------------------------
# The sandbox


def _q(text: str) -> str:
    return shlex.quote(text)


def _record_function(log: str) -> str:
    # One file per recorded command; names sort by time. Fields are NUL-separated:
    # kind, cwd, argc, argv..., then NAME=value of every exported variable.
    return f"""__tutorrl_record() {{
  {{ local -; set +x; }} 2>/dev/null
  local __k="$1" __n __f
  shift
  __f={_q(log)}/"${{EPOCHREALTIME/./}}.$BASHPID.$RANDOM"
  {{
    printf '%s\\0' "$__k" "$PWD" "$#" "$@"
    for __n in $(compgen -e); do printf '%s\\0' "$__n=${{!__n-}}"; done
  }} > "$__f"
}}
"""


def _prelude(sandbox: str, log: str, nounset: bool = True) -> str:
    return _record_function(log) + f"""command_not_found_handle() {{ __tutorrl_record command "$@"; return 0; }}
cd() {{ {{ local -; set +x; }} 2>/dev/null; builtin cd "$@" 2>/dev/null || __tutorrl_record cd cd "$@"; return 0; }}
__tutorrl_source() {{
  {{ local -; set +x; }} 2>/dev/null
  local __p="${{1-}}"
  case "$__p" in /*) ;; *) __p="$PWD/$__p" ;; esac
  case "$__p" in
    *"/../"*|*"/..") __tutorrl_record source source "$@"; return 0 ;;
    {_q(sandbox)}/*) if [ -f "$__p" ]; then builtin source "$@"; return; fi ;;
  esac
  __tutorrl_record source source "$@"
  return 0
}}
source() {{ __tutorrl_source "$@"; }}
.() {{ __tutorrl_source "$@"; }}
""" + ("set -u\n" if nounset else "")


def _standin(bash: str, log: str, kind: str) -> str:
    return f"""#!{bash} -p
{_record_function(log)}__tutorrl_record {kind} "${{0##*/}}" "$@"
exit 0
"""


def _date_wrapper(bash: str, date: str, log: str) -> str:
    return f"""#!{bash} -p
{_record_function(log)}for __a in "$@"; do
  case "$__a" in
    -s*|--set|--set=*) __tutorrl_record command date "$@"; exit 0 ;;
    -d*|--date|--date=*|-r*|--reference|--reference=*|-f*|--file|--file=*) exec {_q(date)} "$@" ;;
  esac
done
__tutorrl_record clock date "$@"
exec {_q(date)} -d @{FIXED_EPOCH} "$@"
"""


def _bash_wrapper(bash: str) -> str:
    # `sh x.sh` and `bash x.sh` run the real bash, which reads the prelude through BASH_ENV.
    return f"#!{bash} -p\nexec {_q(bash)} \"$@\"\n"


def _which(name: str) -> str | None:
    found = shutil.which(name, path=os.environ.get("PATH", os.defpath) + os.pathsep + "/usr/bin:/bin")
    return os.path.realpath(found) if found else None


def _loaders() -> list[str]:
    out = []
    for pattern_dir in ("/lib64", "/lib", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib64"):
        try:
            names = os.listdir(pattern_dir)
        except OSError:
            continue
        out.extend(os.path.realpath(os.path.join(pattern_dir, n)) for n in names if n.startswith("ld-linux"))
    return sorted(set(out))


def _small_tree(folder: Path) -> bool:
    files = size = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in (".git",)]
        files += len(names)
        for n in names:
            try:
                size += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                pass
        if files > _COPY_LIMIT_FILES or size > _COPY_LIMIT_BYTES:
            return False
    return True


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _copy_file(src: str, dst: str) -> str:
    """Copy one regular file; '' when done, else why not (nothing written then).

    Opened without following a link and without blocking, then checked on the
    open descriptor: a FIFO or device put there after the listing is refused
    instead of read without end.
    """
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"cannot be read: {exc.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return _kind(st.st_mode)
        with open(fd, "rb", closefd=False) as fin, open(dst, "xb") as fout:
            shutil.copyfileobj(fin, fout)
        os.chmod(dst, stat.S_IMODE(st.st_mode) | stat.S_IRUSR)
        os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError as exc:
        return f"cannot be copied: {exc.strerror}"
    finally:
        os.close(fd)
    return ""


def _copy_tree(src: Path, dst: Path, skipped: list[str], rel: str = "") -> None:
    """Regular files, folders and links of ``src`` (not .git); every other entry is named in ``skipped``."""
    os.mkdir(dst)
    try:
        entries = sorted(os.scandir(src), key=lambda e: e.name)
    except OSError as exc:
        skipped.append(f"{rel or '.'}/ (cannot be listed: {exc.strerror})")
        return
    for entry in entries:
        if entry.name == ".git":
            continue
        name = f"{rel}/{entry.name}" if rel else entry.name
        target = os.path.join(dst, entry.name)
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                os.symlink(os.readlink(entry.path), target)
                continue
        except OSError as exc:
            skipped.append(f"{name} (cannot be read: {exc.strerror})")
            continue
        if stat.S_ISDIR(mode):
            _copy_tree(Path(entry.path), Path(target), skipped, name)
        elif stat.S_ISREG(mode):
            why = _copy_file(entry.path, target)
            if why:
                skipped.append(f"{name} ({why})")
        else:
            skipped.append(f"{name} ({_kind(mode)})")


class _Round(msgspec.Struct):
    records: list[tuple[str, str, list[str], dict[str, str]]]
    exit_code: int | None
    timed_out: bool
    truncated: bool
    confinement: Confinement
    skipped: list[str]
    stdout: str
    stderr: str
    workdir: str
    home: str


def _run_round(script: Path, checkout: Path | None, env_vars: Mapping[str, str], args: Sequence[str],
               deadline: float, max_commands: int, require: tuple[str, ...], without: tuple[str, ...],
               nounset: bool = True, meanwhile: Callable[[], object] | None = None) -> _Round:
    bash = _which("bash")
    if bash is None:
        raise CaptureError("capturing a launch script needs bash on PATH")
    tools = {name: _which(name) for name in REAL_TOOLS}
    date = _which("date")
    env_bin = _which("env")
    with tempfile.TemporaryDirectory(prefix="tutorrl-capture-") as tmp:
        # The script may write anywhere in the sandbox; what it must not
        # rewrite (its output, the jail's confinement report) lies beside it.
        outer = os.path.realpath(tmp)
        sandbox = os.path.join(outer, "sandbox")
        os.mkdir(sandbox)
        home, work, bin_dir, log = (os.path.join(sandbox, n) for n in ("home", "work", "bin", "log"))
        for d in (home, bin_dir, log):
            os.mkdir(d)
        # The working folder: a copy of the checkout, or of the script's folder.
        script = script.resolve()
        skipped: list[str] = []
        copy_script = ""
        if checkout is not None:
            _copy_tree(checkout, Path(work), skipped)
            try:
                target = str(script.relative_to(checkout.resolve()))
            except ValueError:
                os.mkdir(os.path.join(sandbox, "script"))
                target = os.path.join(sandbox, "script", script.name)
                copy_script = target
        else:
            if _small_tree(script.parent):
                _copy_tree(script.parent, Path(work), skipped)
            else:
                os.mkdir(work)
                copy_script = os.path.join(work, script.name)
            target = script.name
        if copy_script:
            why = _copy_file(str(script), copy_script)
            if why:
                raise CaptureError(f"{script}: {why}")
        elif not os.path.isfile(os.path.join(work, target)):
            # The script itself was skipped (unreadable, or replaced by a FIFO since it was checked).
            why = next((s[len(target) + 2:-1] for s in skipped if s.startswith(target + " (")), "")
            raise CaptureError(f"{script}: {why or 'not copied into the sandbox'}")
        # PATH: stand-ins and the allow-listed tools, nothing else.
        def write(name: str, text: str) -> None:
            p = os.path.join(bin_dir, name)
            with open(p, "w") as fh:
                fh.write(text)
            os.chmod(p, 0o755)

        for name in ("python", "python3") + tuple(f"python3.{m}" for m in range(6, 16)):
            write(name, _standin(bash, log, "python"))
        for name, real in tools.items():
            if real is not None:
                os.symlink(real, os.path.join(bin_dir, name))
        if date is not None:
            write("date", _date_wrapper(bash, date, log))
        write("bash", _bash_wrapper(bash))
        write("sh", _bash_wrapper(bash))
        prelude = os.path.join(sandbox, "prelude.bash")
        with open(prelude, "w") as fh:
            fh.write(_prelude(sandbox, log, nounset))
        env = {"HOME": home, "PATH": bin_dir, "BASH_ENV": prelude, "TZ": "UTC", "LC_ALL": "C.UTF-8",
               **env_vars}
        executables = sorted({bash, *(t for t in tools.values() if t), *(x for x in (date, env_bin) if x),
                              *_loaders()})
        report = os.path.join(outer, "confinement.json")
        config = {"sandbox": sandbox, "report": report, "executables": executables, "env": env,
                  "require": list(require), "without": list(without)}
        jail = Path(__file__).with_name("_jail.py")
        # -S: the jail needs the standard library only; the environment's .pth files
        # (editable installs' finders, ...) would add ~8 ms before the script starts.
        argv = [sys.executable, "-I", "-S", str(jail), json.dumps(config), "--", bash, target, *args]
        out_path, err_path = os.path.join(outer, "stdout"), os.path.join(outer, "stderr")
        timed_out = truncated = False
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, cwd=work, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    start_new_session=True, env={"PATH": os.defpath})
            exited = _exit_waiter(proc)
            try:
                if meanwhile is not None:
                    # The caller's own work while the jail starts and bash runs: an
                    # exception ends the jail (finally) and reaches the caller.
                    meanwhile()
                while True:
                    if exited(0.05):
                        break
                    if time.monotonic() > deadline:
                        timed_out = True
                    elif len(os.listdir(log)) > max_commands:
                        truncated = True
                    if timed_out or truncated:
                        _stop(proc)
                        break
            finally:
                if proc.poll() is None:
                    _stop(proc)
        code = proc.returncode
        confinement = _read_confinement(report)
        if code == 125 and (confinement.facts.get("refused") or not confinement.properties):
            why = _read(err_path).strip() or "tutorrl capture: the script could not be confined"
            raise CaptureError(f"{why}; the script did not run (what each property needs: docs/import-sandbox.md)")
        records = [_parse_record(os.path.join(log, n)) for n in sorted(os.listdir(log))]
        return _Round([r for r in records if r is not None], None if (timed_out or truncated) else code,
                      timed_out, truncated, confinement, skipped, _read(out_path), _read(err_path), work, home)


def _exit_waiter(proc: subprocess.Popen) -> Callable[[float], bool]:
    """``waited(seconds)``: whether ``proc`` has exited, waiting at most ``seconds``.

    Woken the moment it exits through a pidfd (Linux): ``Popen.wait(timeout)``
    polls, sleeping up to 50 ms between looks, which added ~20 ms to each
    capture round of a script that runs in 40 ms (issue 26).
    """
    import select

    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+: poll as Popen does
        fd = None

    def waited(seconds: float) -> bool:
        if fd is not None and proc.returncode is None:
            select.select([fd], [], [], seconds)
            return proc.poll() is not None
        try:
            proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    if fd is not None:
        import weakref

        weakref.finalize(waited, os.close, fd)
    return waited


def _read_confinement(path: str) -> Confinement:
    # Written by the jail's confining process through a descriptor it opened
    # before confining itself and closed before executing the script.
    try:
        data = json.loads(_read(path) or "{}")
        facts = dict(data.get("facts", {}), refused=data.get("refused", []))
        return Confinement(msgspec.convert(data.get("properties", {}), dict[str, Property]), facts)
    except (ValueError, msgspec.ValidationError, AttributeError, TypeError):
        return Confinement()


def _stop(proc: subprocess.Popen) -> None:
    # The jail kills its whole tree on SIGTERM (it is a subreaper); the group
    # kill is the backstop.
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=3)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read(path: str, limit: int = 1 << 20) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _parse_record(path: str) -> tuple[str, str, list[str], dict[str, str]] | None:
    try:
        with open(path, "rb") as fh:
            fields = fh.read().decode("utf-8", "surrogateescape").split("\0")
    except OSError:
        return None
    if len(fields) < 4 or not fields[2].isdigit():
        return None
    kind, cwd, argc = fields[0], fields[1], int(fields[2])
    argv = fields[3:3 + argc]
    env = {}
    for item in fields[3 + argc:]:
        name, eq, value = item.partition("=")
        if eq and name not in _SANDBOX_ENV:
            env[name] = value
    return kind, cwd, argv, env


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _rel(path: str, root: str) -> str | None:
    if path == root:
        return "."
    if path.startswith(root + "/"):
        return path[len(root) + 1:]
    return None


def _python_in(argv: Sequence[str]) -> int | None:
    for i, arg in enumerate(argv[1:], start=1):
        if _PYTHON_RE.match(arg.rsplit("/", 1)[-1]):
            return i
    return None


def check_timeout(timeout: object) -> float:
    """A time limit in seconds that limits: finite, above 0, at most :data:`MAX_TIMEOUT_S`."""
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout)
            or not 0 < timeout <= MAX_TIMEOUT_S):
        raise CaptureError(f"timeout {timeout!r}: give the seconds the script may run, "
                           f"a number above 0 and at most {MAX_TIMEOUT_S:g} (nan or inf would be no limit)")
    return float(timeout)


def capture(script: Path, *, vars: Mapping[str, str] | None = None, timeout: float = 30.0,
            verl_checkout: Path | None = None, args: Sequence[str] = (), max_rounds: int = 32,
            max_commands: int = 5000, require: Literal["core", "all", "none"] = "core", without: Sequence[str] = (),
            is_launch: Callable[[PythonCall], bool] = is_entry_launch,
            meanwhile: Callable[[], object] | None = None) -> Capture:
    """Run ``script`` under real bash in a jail and report what it launches.

    ``vars``: values for variables the script reads from its environment.
    ``timeout``: seconds for the whole capture, all rounds together.
    ``verl_checkout``: the working folder is a copy of it (scripts run from the
    checkout's root, as verl's examples expect); otherwise a copy of the script's
    folder. ``args``: the script's positional arguments.
    ``require``: the confinement properties that must hold, else
    :class:`CaptureError` before the script runs (:data:`REQUIRE`).
    ``without``: kernel features the jail must not use (``namespaces``,
    ``landlock``, ``seccomp``): what a kernel lacking them gets, for tests.
    ``meanwhile``: called once, in this process, while the first round's jail
    starts and the script runs (the import command loads Hydra then: the two
    overlap instead of adding up); what it raises stops the jail and is raised.
    """
    script = Path(script)
    check_timeout(timeout)
    if require not in REQUIRE:
        raise CaptureError(f"require={require!r}: one of {', '.join(REQUIRE)}")
    if set(without) - {"namespaces", "landlock", "seccomp"}:
        raise CaptureError(f"without={list(without)!r}: only namespaces, landlock, seccomp")
    if not script.exists():
        raise CaptureError(f"{script}: no such script")
    if not script.is_file():
        raise CaptureError(f"{script}: not a regular file ({_kind(script.stat().st_mode)})")
    if verl_checkout is not None and not Path(verl_checkout).is_dir():
        raise CaptureError(f"{verl_checkout}: no such folder")
    given = dict(vars or {})
    for name in given:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise CaptureError(f"{name!r} is not a shell variable name")
    deadline = time.monotonic() + timeout
    unset: dict[str, str] = {}
    positional = list(args)
    unresolved: list[str] = []
    rounds = 0
    nounset = True
    while True:
        rounds += 1
        env = {**{k: v for k, v in unset.items() if not k.isdigit()}, **given}
        result = _run_round(script, Path(verl_checkout) if verl_checkout else None, env, positional,
                            deadline, max_commands, REQUIRE[require], tuple(without), nounset,
                            meanwhile if rounds == 1 else None)
        if not nounset:
            break
        new, stuck = [], []
        for name in dict.fromkeys(_UNBOUND_RE.findall(result.stderr)):
            if name in unset or name in given or not _NAME_RE.fullmatch(name):
                stuck.append(name)  # an array element, or set and still reported: no rerun can give it
            else:
                new.append(name)
        unresolved.extend(n for n in stuck if n not in unresolved)
        if result.timed_out or result.truncated:
            break
        if not new or rounds >= max_rounds:
            unresolved.extend(n for n in new if n not in unresolved)
            if unresolved:
                # What no placeholder can give: one last round without set -u, so that
                # bash expands it to nothing as it would for the script's author.
                nounset = False
                continue
            break
        for name in new:
            unset[name] = PLACEHOLDER.format(name if not name.isdigit() else f"ARG{name}")
            if name.isdigit():
                while len(positional) < int(name):
                    positional.append(PLACEHOLDER.format(f"ARG{len(positional) + 1}"))
    return _assemble(script, result, unset, unresolved, given, rounds, is_launch)


def _assemble(script: Path, result: _Round, unset: dict[str, str], unresolved: list[str],
              given: dict[str, str], rounds: int, is_launch: Callable[[PythonCall], bool]) -> Capture:
    launches: list[Launch] = []
    commands: list[Invocation] = []
    inputs = {**unset, **given}
    for seq, (kind, cwd, argv, env) in enumerate(result.records):
        if not argv:
            continue
        env = {k: v for k, v in env.items() if inputs.get(k) != v}
        start = 0 if kind == "python" else _python_in(argv) if kind == "command" else None
        if start is not None:
            call = parse_python(argv[start:])
            if is_launch(call):
                name, path, overrides, flags = split_hydra_args(call.args)
                launches.append(Launch(seq, call.entry_kind, call.entry, name, path, overrides, flags,
                                       call.interpreter, call.options, cwd, _rel(cwd, result.workdir), env,
                                       list(argv[:start])))
                continue
        commands.append(Invocation(seq, kind, list(argv), cwd, env))
    denied = sorted(set(_DENIED_RE.findall(result.stderr)))
    return Capture(str(script), launches, commands, unset, unresolved, denied, given, result.exit_code,
                   result.timed_out, result.truncated, rounds, result.confinement, result.skipped, result.workdir,
                   result.home, _tail(result.stdout), _tail(result.stderr))
