"""Run one command confined to a sandbox folder (the launch capture's jail).

Executed as a file by the interpreter (``python -I -S _jail.py CONFIG -- ARGV``),
never imported by the capture itself: it uses the standard library and its
sibling :mod:`._confine` only, so it starts fast and independently of the
environment. The capture starts it with an environment of its own
(``PATH`` only) and the script's environment comes from CONFIG: nothing of
the importer's environment reaches the script.

The jail never confines itself; it is the part that outlives what it
confines and ends it. Two shapes, the first wherever the kernel allows:

- **Namespaces.** The jail enters a new user, PID, network, mount and IPC
  namespace (an unprivileged user's own, or without the user namespace when
  run by root on a kernel that refuses them) and forks the namespace's init,
  which mounts a private ``/proc`` and forks the script. The script sees no
  process but its own, has a network namespace with nothing in it, cannot
  stop or kill init (the kernel delivers a namespace's init only the signals
  it handles, and this one handles none), and when init exits -- the script
  ended, or the jail killed init for the time limit -- the kernel kills every
  process left in the namespace before init is reaped, so nothing outlives
  the capture.
- **Subreaper** (no namespaces): the jail becomes a child subreaper, forks the
  script, and when it ends -- or the jail gets SIGTERM -- kills every
  descendant still alive. It is outside the script's Landlock domain, so with
  Landlock ABI >= 6 the script cannot signal it; below that it can, and the
  confinement report says background processes may outlive the capture.

The process that executes the script first drops every capability, then
applies Landlock and seccomp (:mod:`._confine`), writes what it got to the
configuration's ``report`` file, outside the sandbox (JSON: each property,
confined or not, and how), and
refuses -- exit 125, the reason on stderr -- when a property the
configuration requires is not confined.

Exit status: the command's (128 + N for a signal); 124 when stopped by
SIGTERM; 125 when confinement was required and is not available.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import resource
import signal
import sys
import time

if __package__:
    from . import _confine
else:  # run as a file under -I, which leaves the file's folder off the path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _confine

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 1 << 18
_NAMESPACES = _CLONE_NEWPID | _CLONE_NEWNET | _CLONE_NEWNS | _CLONE_NEWIPC
#: Properties required when the configuration does not say (capture.REQUIRE["core"],
#: which a test keeps equal): what keeps the importer's secrets from the script
#: and the script off the network.
CORE = ("environment", "reads", "writes", "executables", "network", "processes")
#: How long ending the subreaper's descendants may take (a fork loop racing the kill).
_KILL_DEADLINE_S = 5.0


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _err(what: str) -> str:
    return f"{what}: {os.strerror(ctypes.get_errno())}"


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _unshare(flags: int) -> str:
    """'' when done, else why not."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    return "" if _libc().unshare(flags) == 0 else _err("unshare")


def _userns_works() -> str:
    """Whether this user may have a user namespace with its own id mapped ('' when yes, else why not).

    Tried in a throw-away child: a namespace entered without its id map could
    not create files in the sandbox, and cannot be left.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        why = _enter_userns()
        os.write(w, why.encode()[:500])
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        why = fh.read().decode()
    os.waitpid(pid, 0)
    return why


def _enter_userns() -> str:
    uid, gid = os.getuid(), os.getgid()
    why = _unshare(_CLONE_NEWUSER | _NAMESPACES)
    if why:
        return why
    try:
        try:
            _write("/proc/self/setgroups", "deny")
        except FileNotFoundError:
            pass  # before Linux 3.19 there is nothing to deny
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        return f"writing the user namespace's id map: {exc.strerror}"
    return ""


def enter_namespaces() -> tuple[str, str]:
    """(what was entered, why not) -- ('', reason) where the kernel refuses both forms."""
    why = _userns_works()
    if not why:
        # The probe's conditions are this process's: the id map cannot fail now
        # unless the machine changed in between (then the report says so).
        again = _enter_userns()
        return ("user, PID, network, mount and IPC namespaces", "") if not again else ("", again)
    if os.geteuid() == 0 and not _unshare(_NAMESPACES):
        return "PID, network, mount and IPC namespaces (run as root, no user namespace)", ""
    return "", f"no user namespace ({why})"


def _mount_proc() -> str:
    """A /proc of the new PID namespace: '' when mounted, else why not."""
    libc = _libc()
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return _err("making the mounts private")
    if libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
        return _err("mounting /proc")
    return ""


def _properties(facts: dict) -> dict[str, dict]:
    """Each property: {"confined": bool, "how": text} from what the confining process got."""
    abi, ns, seccomp = facts["landlock_abi"], facts["namespaces"], facts["seccomp"]
    landlock_why = facts.get("landlock_error", "")

    def prop(ok: bool, how: str, missing: str) -> dict:
        return {"confined": bool(ok), "how": how if ok else missing}

    no_landlock = f"needs Landlock ({landlock_why or 'unavailable'})"
    out = {
        "environment": prop(True, "only the capture's own variables and the --var values (env -i)", ""),
        "reads": prop(abi >= 1, "only the sandbox, /usr and the library trees, the loader's files of /etc; "
                      f"never /proc (Landlock ABI {abi})", no_landlock),
        "writes": prop(abi >= 1, f"only beneath the sandbox (Landlock ABI {abi})", no_landlock),
        "executables": prop(abi >= 1, "only bash, the allow-listed text tools and the stand-ins (Landlock); "
                            "native code the dynamic loader maps (LD_PRELOAD, enable -f) runs under the same "
                            "confinement", no_landlock),
        "network": prop(bool(seccomp), "socket() and io_uring refused (seccomp)"
                        + ("; an empty network namespace" if ns else ""),
                        "needs seccomp (" + facts.get("seccomp_error", "unavailable") + ")"
                        + ("; the empty network namespace still leaves unix sockets on the file system"
                           if ns else "") + ("; Landlock ABI >= 4 refuses TCP only" if abi >= 4 else "")),
        "processes": prop(bool(ns) or abi >= 1,
                          ("a PID namespace of its own; " if ns else "")
                          + ("no /proc reads (Landlock)" if abi >= 1 else "its own /proc"),
                          "needs a PID namespace or Landlock"),
        "signals": prop(bool(ns) or abi >= 6,
                        "a PID namespace of its own" if ns else f"scoped to the jail (Landlock ABI {abi})",
                        f"needs a PID namespace ({facts['namespaces_error']}) or Landlock ABI >= 6 "
                        f"(this kernel: {abi}): the script can signal this user's processes"),
        "lifetime": prop(bool(ns) or abi >= 6,
                         "the PID namespace ends with its init" if ns else
                         "a subreaper the script cannot signal kills every descendant",
                         "the script can kill or stop the jail's subreaper; background processes may "
                         "outlive the capture (needs a PID namespace or Landlock ABI >= 6)"),
        "privileges": prop(facts["capabilities_dropped"] or os.geteuid() != 0,
                           "no capabilities (bounding set emptied, SECBIT_NOROOT)",
                           "running as root and the capabilities could not be dropped"),
    }
    return out


def _confine_and_exec(config: dict, command: list[str], facts: dict) -> None:
    """In the process that becomes the script: confine, report, refuse or execute. Never returns."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        # Opened before Landlock: the report lies outside the sandbox, out of the script's reach.
        report = os.open(config["report"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        facts["capabilities_dropped"] = _confine.drop_privileges()
        without = set(config.get("without", ()))
        try:
            if "landlock" in without:
                raise OSError(errno.ENOSYS, "switched off")
            facts["landlock_abi"] = _confine.landlock(config["sandbox"], config["executables"])
        except OSError as exc:
            facts["landlock_abi"], facts["landlock_error"] = 0, exc.strerror or str(exc)
        try:
            if "seccomp" in without:
                raise OSError(errno.ENOSYS, "switched off")
            facts["seccomp"] = _confine.seccomp()
        except OSError as exc:
            facts["seccomp"], facts["seccomp_error"] = [], exc.strerror or str(exc)
        props = _properties(facts)
        missing = [name for name in config.get("require", CORE) if not props[name]["confined"]]
        with open(report, "w") as fh:
            json.dump({"properties": props, "facts": facts, "refused": missing}, fh)
        if missing:
            reasons = "; ".join(f"{name}: {props[name]['how']}" for name in missing)
            os.write(2, f"tutorrl capture: cannot confine the script ({reasons})\n".encode())
            os._exit(125)
        os.execve(command[0], command, config["env"])
    except BaseException as exc:  # noqa: BLE001 -- a child of the jail must never return into it
        os.write(2, f"tutorrl capture: {exc}\n".encode())
    os._exit(127)


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _wait_for(pid: int) -> int:
    """Reap children until ``pid`` ends (the others are orphans handed to us); its exit code."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 127
        if done == pid:
            return _exit_code(status)


def _init(config: dict, command: list[str], facts: dict) -> None:
    """PID 1 of the namespace: the script's parent and every orphan's. Never returns."""
    libc = _libc()
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the jail gone: the namespace goes
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # no handler: nothing in the namespace can signal init
    why = _mount_proc()
    facts["proc"] = "own" if not why else f"the machine's ({why})"
    pid = os.fork()
    if pid == 0:
        _confine_and_exec(config, command, facts)
    # Exiting makes the kernel kill what is left in the namespace before the jail can reap us.
    os._exit(_wait_for(pid))


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
    deadline = time.monotonic() + _KILL_DEADLINE_S
    while time.monotonic() < deadline:  # processes may fork while we kill: repeat until none is left
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
    libc = _libc()
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the capture gone: the jail goes
    without = set(config.get("without", ()))
    namespaces, why = enter_namespaces() if "namespaces" not in without else ("", "switched off")
    facts = {"kernel": os.uname().release, "namespaces": namespaces, "namespaces_error": why}
    stop = {"now": False}
    if namespaces:
        init = os.fork()
        if init == 0:
            _init(config, command, facts)

        def on_term(signum, frame):  # noqa: ARG001
            stop["now"] = True
            os.kill(init, signal.SIGKILL)

        signal.signal(signal.SIGTERM, on_term)
        status = _wait_for(init)
    else:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        facts["proc"] = "the machine's"

        def on_term(signum, frame):  # noqa: ARG001
            stop["now"] = True
            _kill_descendants()

        signal.signal(signal.SIGTERM, on_term)
        pid = os.fork()
        if pid == 0:
            _confine_and_exec(config, command, facts)
        status = _wait_for(pid)
        _kill_descendants()
    return 124 if stop["now"] else status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
