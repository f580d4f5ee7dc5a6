"""The kernel mechanisms that confine the captured script (used by :mod:`._jail` only).

Standard library only, loaded by the jail as a sibling file (the jail runs
under ``python -I``, without tutorrl on its path). Everything here applies to
the calling process, is inherited by every descendant, and cannot be undone;
the jail calls it in the process that then executes the script, never in
itself, so that the jail stays outside what it confines (Landlock denies a
confined process signals and ptrace to a process outside its domain).

- :func:`drop_privileges`: an empty capability bounding set and ``SECBIT_NOROOT``,
  so that even a capture run by root (or root inside the user namespace)
  executes bash with no capability at all (loading a kernel module, raw
  sockets, mounts, ...). Refused without ``CAP_SETPCAP``: such a process has
  no capability to lose.
- :func:`landlock`: reads only beneath the sandbox, the system's program and
  library trees and a few files of ``/etc`` (never ``/proc``: no other
  process's ``environ``, and no machine facts in the launch); writes only
  beneath the sandbox; executes only the allow-listed files; with ABI >= 4 no
  TCP; with ABI >= 6 no signal out of the domain and no abstract unix socket.
- :func:`seccomp`: ``socket()`` and ``io_uring_setup()`` fail (no network of any
  kind, pathname unix sockets included: Landlock does not govern ``connect``),
  and so do the kernel keyring calls (a user's keyring holds secrets); a system
  call of another ABI (i386's ``int 0x80``, x32) kills the process, since its
  numbers differ.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import sys

# landlock_create_ruleset, _add_rule, _restrict_self: the same numbers on x86_64 and asm-generic (aarch64).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
# NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, each with its lock.
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80

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
_READS = READ_FILE | READ_DIR
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE

#: Trees of programs, libraries, locales and time zones: what bash and the text
#: tools read to start. Merged-/usr systems make most of them links to /usr.
SYSTEM_TREES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What the dynamic loader and the C library read from /etc; nothing else there
#: (no shadow, ssh keys, credentials, machine configuration).
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf", "/etc/passwd",
                "/etc/group", "/etc/localtime", "/etc/alternatives")
_DEVICES = {"/dev/null": READ_FILE | WRITE_FILE | TRUNCATE, "/dev/zero": READ_FILE, "/dev/random": READ_FILE,
            "/dev/urandom": READ_FILE}


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _fail(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        abi = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(abi), 0)


def drop_privileges() -> bool:
    """No capability survives the next execve; False where there was none to drop (no CAP_SETPCAP)."""
    libc = _libc()
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break  # past the kernel's last capability
            return False
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    return libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0) == 0


def no_new_privs() -> None:
    if _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")


def landlock(sandbox: str, executables: list[str]) -> int:
    """Apply the rules above to this process; return the ABI used, raise OSError when impossible."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available in this kernel (Linux >= 5.13 with lsm=landlock)")
    libc = _libc()
    handled = EXECUTE | _READS | _WRITES | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise _fail("landlock_create_ruleset")

    def allow(path: str, access: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a tree or listed tool this machine lacks
        try:
            if not stat.S_ISDIR(os.fstat(pfd).st_mode):
                access &= _FILE_RIGHTS
            rule = _PathBeneath(access & handled, pfd)
            if libc.syscall(_SYS_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                raise _fail(f"landlock_add_rule({path})")
        finally:
            os.close(pfd)

    try:
        allow(sandbox, handled)
        for tree in SYSTEM_TREES + SYSTEM_FILES:
            allow(tree, _READS)
        for device, access in _DEVICES.items():
            allow(device, access)
        for exe in executables:
            allow(exe, EXECUTE | READ_FILE)
        no_new_privs()
        if libc.syscall(_SYS_RESTRICT_SELF, fd, 0) < 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(fd)
    return abi


# -- seccomp ------------------------------------------------------------------

_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_KILL_PROCESS, _RET_ALLOW = 0x80000000, 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_X32_BIT = 0x40000000
#: machine -> (audit arch, {system call: number}) for the calls refused.
_ARCHES = {
    "x86_64": (0xC000003E, {"socket": 41, "add_key": 248, "request_key": 249, "keyctl": 250, "io_uring_setup": 425}),
    "aarch64": (0xC00000B7, {"socket": 198, "add_key": 217, "request_key": 218, "keyctl": 219,
                             "io_uring_setup": 425}),
}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp() -> list[str]:
    """Install the filter; return the refused calls, raise OSError where impossible."""
    machine = platform.machine()
    if machine not in _ARCHES:
        raise OSError(errno.ENOSYS, f"no seccomp filter for this machine ({machine})")
    arch, calls = _ARCHES[machine]
    prog = [(_LD_W_ABS, 0, 0, 4),                # seccomp_data.arch
            (_JEQ_K, 1, 0, arch),
            (_RET_K, 0, 0, _RET_KILL_PROCESS),
            (_LD_W_ABS, 0, 0, 0)]                # seccomp_data.nr
    if machine == "x86_64":
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _RET_KILL_PROCESS)]
    for nr in calls.values():
        prog += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, _RET_ERRNO | errno.EACCES)]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    filters = (_SockFilter * len(prog))(*[_SockFilter(*f) for f in prog])
    fprog = _SockFprog(len(prog), filters)
    no_new_privs()
    if _libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise _fail("prctl(PR_SET_SECCOMP)")
    return sorted(calls)
