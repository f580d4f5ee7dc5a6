"""Run one command confined to a sandbox folder (the launch capture's jail).

Executed as a file by the interpreter (``python -I _jail.py CONFIG -- ARGV``),
never imported by the capture itself: it uses the standard library only, so
it starts fast and independently of the environment.

It

1. caps the size of any file the command writes (``RLIMIT_FSIZE``) and its
   core dumps;
2. confines it with Landlock (Linux >= 5.13, no privileges needed; inherited
   by every descendant and impossible to undo):

   - writing, creating, removing, renaming or truncating anything is allowed
     only beneath the sandbox folder (and writing to ``/dev/null``);
   - executing is allowed only for the files the configuration lists (bash,
     the pure text tools) and beneath the sandbox (the stand-ins);
   - with Landlock ABI >= 4 no TCP connection or bind; with ABI >= 6 no
     signal to a process outside the jail and no abstract unix socket;

3. becomes a child subreaper, starts the command in its own process, and when
   that command ends -- or when the jail is sent SIGTERM (the capture's time
   limit) -- kills every descendant still alive, so nothing a script started
   in the background outlives the capture.

Exit status: the command's; 125 when confinement was required and is not
available (the reason on stderr).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # x86_64 and asm-generic alike
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

_WRITES = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
           | MAKE_BLOCK | MAKE_SYM)
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        abi = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(abi), 0)


def confine(sandbox: str, executables: list[str]) -> str:
    """Apply the Landlock rules to this process; return a description, raise OSError when impossible."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled = EXECUTE | _WRITES | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")

    def allow(path: str, access: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a listed tool this machine lacks
        try:
            if not os.path.isdir(path):
                access &= _FILE_RIGHTS
            rule = _PathBeneath(access & handled, pfd)
            if libc.syscall(_SYS_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}) failed")
        finally:
            os.close(pfd)

    allow(sandbox, handled)
    allow("/dev/null", WRITE_FILE | TRUNCATE)
    for exe in executables:
        allow(exe, EXECUTE)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.syscall(_SYS_RESTRICT_SELF, fd, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(fd)
    return f"landlock-abi-{abi}"


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_descendants() -> None:
    for _ in range(20):  # processes may fork while we kill; a few passes settle it
        pids = _descendants(os.getpid())
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    command = argv[argv.index("--") + 1:]
    limit = int(config.get("max_file_bytes", 64 << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        how = confine(config["sandbox"], config["executables"])
    except OSError as exc:
        if config.get("require", True):
            print(f"tutorrl capture: cannot confine the script: {exc}", file=sys.stderr)
            return 125
        how = "none"
    with open(os.path.join(config["sandbox"], "confinement"), "w") as fh:
        fh.write(how)
    _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    stop = {"now": False}

    def on_term(signum, frame):  # noqa: ARG001
        stop["now"] = True
        _kill_descendants()

    signal.signal(signal.SIGTERM, on_term)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execve(command[0], command, config["env"])
        finally:
            os._exit(127)
    status = 0
    while True:
        try:
            done, st = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            break
        if done == pid:
            status = os.waitstatus_to_exitcode(st)
            break
    _kill_descendants()
    if stop["now"]:
        return 124
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
