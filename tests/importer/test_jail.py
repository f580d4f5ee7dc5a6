"""The jail against scripts that attack the machine importing them (issue 27).

Each test runs a real script under the real jail and proves that the attack
fails: reading the importer's environment through /proc, reading files
outside the sandbox and the system trees, the network (UDP, TCP, unix
sockets, from bash and from native code the script ships), processes that
outlive the capture, stopping the jail. Checks are deterministic: what the
script sent has arrived (or not) by the time the capture returns, and what it
left running is looked for by a marker in every process's environment.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tutorrl.importer._confine import landlock_abi
from tutorrl.importer.capture import CaptureError, capture

PPO = "python3 -m verl.trainer.main_ppo"


def run(folder: Path, body: str, **kw):
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "run.sh"
    script.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body))
    kw.setdefault("timeout", 20)
    return capture(script, **kw)


def overrides(cap) -> list[str]:
    assert len(cap.launches) == 1, (cap.launches, cap.stderr_tail)
    return cap.launches[0].overrides


def _import(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tutorrl", "import", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, check=False)


def test_this_kernel_gives_every_property():
    # The machine the suite runs on has Landlock >= 6 or namespaces: nothing degraded.
    cap = run(Path(os.environ.get("TMPDIR", "/tmp")) / f"tutorrl-jail-{uuid.uuid4().hex}", f"{PPO} a=1\n")
    try:
        assert set(cap.confinement.properties) == {"environment", "reads", "writes", "executables", "network",
                                                   "processes", "signals", "lifetime", "privileges"}
        assert cap.confinement.not_confined == [], cap.confinement
        assert landlock_abi() >= 1
    finally:
        shutil.rmtree(Path(cap.script).parent, ignore_errors=True)


def test_the_jail_and_the_capture_name_the_same_properties(tmp_path):
    from tutorrl.importer import _jail
    from tutorrl.importer.capture import REQUIRE

    assert _jail.CORE == REQUIRE["core"]
    cap = run(tmp_path, f"{PPO} a=1\n", require="none")
    assert tuple(cap.confinement.properties) == REQUIRE["all"]


# -- the importer's environment -------------------------------------------------

_ENVIRON_THIEF = f"""\
    # Walk up the parent chain and read every process's environment, as the issue's script did.
    p=$PPID; got=""
    for i in 1 2 3 4 5 6 7 8; do
      got="$got $(tr '\\0' ' ' < /proc/$p/environ 2>/dev/null)"
      p=$(cut -d' ' -f4 /proc/$p/stat 2>/dev/null)
      [ -n "$p" ] && [ "$p" != 0 ] || break
    done
    got="$got $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' ' ')"
    {PPO} "trainer.project_name=x$(echo $got | grep -o 'TUTORRL_TEST_SECRET=[^ ]*')" \\
        "trainer.experiment_name=x$(echo $got | grep -o 's3cret' | head -1)"
    """


@pytest.mark.wheels
def test_the_importers_environment_never_reaches_the_spec(tmp_path):
    (tmp_path / "s").mkdir()
    script = tmp_path / "s" / "steal.sh"
    script.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(_ENVIRON_THIEF))
    out = tmp_path / "spec.toml"
    proc = _import(str(script), "--verl", "0.9.1", "-o", str(out), "--format", "json",
                   env={"TUTORRL_TEST_SECRET": "s3cret", "HF_TOKEN": "s3cret"})
    assert proc.returncode in (0, 1), proc.stderr
    assert "s3cret" not in out.read_text() + proc.stdout + proc.stderr
    assert 'project = "x"' in out.read_text()


def test_no_process_outside_the_capture_is_visible(tmp_path):
    # In a fresh interpreter: /proc/PID/environ is the environment a process
    # was started with, so the secret must be there from the start.
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "run.sh").write_text("#!/usr/bin/env bash\n" + textwrap.dedent(f"""\
        n=0; for p in /proc/[0-9]*; do [ -e "$p" ] && n=$((n+1)); done
        {PPO} trainer.nnodes=$n
        """) + textwrap.dedent(_ENVIRON_THIEF))
    code = ("import sys, msgspec; from tutorrl.importer.capture import capture; "
            "sys.stdout.buffer.write(msgspec.json.encode(capture(sys.argv[1], timeout=20)))")
    proc = subprocess.run([sys.executable, "-c", code, str(folder / "run.sh")], capture_output=True, text=True,
                          env={**os.environ, "TUTORRL_TEST_SECRET": "s3cret"}, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout
    assert '"overrides":["trainer.nnodes=0"]' in proc.stdout  # /proc cannot be listed


# -- files --------------------------------------------------------------------

def test_files_outside_the_sandbox_and_system_trees_cannot_be_read(tmp_path):
    secret = tmp_path / "elsewhere" / "token"
    secret.parent.mkdir()
    secret.write_text("s3cret-file\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "mine.txt").write_text("mine\n")
    (tmp_path / "s" / "link").symlink_to(secret)
    cap = run(tmp_path / "s", f"""\
        {PPO} "a=$(cat {secret} 2>/dev/null)" "b=$(cat link 2>/dev/null)" "c=$(cat mine.txt)" \\
            "d=$(ls {secret.parent} 2>/dev/null)" "e=$(head -c 64 /etc/shadow /root/.bashrc 2>/dev/null | wc -c)" \\
            "f=$(grep -c . /usr/share/zoneinfo/UTC 2>/dev/null | wc -l)"
        """)
    assert overrides(cap) == ["a=", "b=", "c=mine", "d=", "e=0", "f=1"]
    assert "s3cret" not in repr(cap)


# -- network --------------------------------------------------------------------

@pytest.fixture
def listeners(tmp_path):
    """A UDP and a TCP socket on loopback, a unix socket on the file system and an abstract one."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    path = tmp_path / "outside.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(path))
    unix.listen(8)
    name = f"tutorrl-test-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + name)
    abstract.listen(8)
    socks = {"udp": udp, "tcp": tcp, "unix": unix, "abstract": abstract}
    for s in socks.values():
        s.setblocking(False)
    yield {"udp": udp.getsockname()[1], "tcp": tcp.getsockname()[1], "unix": str(path), "abstract": name}, socks
    for s in socks.values():
        s.close()


def received(socks) -> list[str]:
    # Loopback delivery is synchronous: a datagram sent or a connection made
    # before the capture returned is already queued here.
    got = []
    for kind, s in socks.items():
        try:
            s.recvfrom(64) if kind == "udp" else s.accept()[0].close()
            got.append(kind)
        except BlockingIOError:
            pass
    return got


def test_bash_reaches_no_network(tmp_path, listeners):
    where, socks = listeners
    cap = run(tmp_path / "s", f"""\
        echo leak > /dev/udp/127.0.0.1/{where['udp']} 2>/dev/null; u=$?
        echo leak > /dev/tcp/127.0.0.1/{where['tcp']} 2>/dev/null; t=$?
        {PPO} udp=$u tcp=$t
        """)
    assert received(socks) == []
    assert overrides(cap) == ["udp=1", "tcp=1"]


_NATIVE = r"""
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int unix_connect(const char *name, int abstract) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path + abstract, name, sizeof a.sun_path - 2);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return -2;
    return connect(s, (struct sockaddr *)&a, offsetof(struct sockaddr_un, sun_path) + abstract + strlen(name));
}

__attribute__((constructor)) static void attack(void) {
    const char *path = getenv("ATTACK_UNIX"), *name = getenv("ATTACK_ABSTRACT"), *port = getenv("ATTACK_UDP");
    const char *file = getenv("ATTACK_FILE");
    if (!path) return;
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(atoi(port))};
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    int sent = u < 0 ? -2 : (int)sendto(u, "leak", 4, 0, (struct sockaddr *)&in, sizeof in);
    char buf[64] = "";
    int fd = open(file, O_RDONLY);
    if (fd >= 0) buf[read(fd, buf, sizeof buf - 1) > 0 ? 20 : 0] = 0;
    printf("native unix=%d abstract=%d udp=%d file=%s\n", unix_connect(path, 0), unix_connect(name, 1), sent, buf);
    fflush(stdout);
    unsetenv("ATTACK_UNIX");
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build the native code")
@pytest.mark.parametrize("how", ["LD_PRELOAD=./evil.so cat /dev/null", "enable -f ./evil.so evil 2>/dev/null"])
def test_native_code_the_script_ships_reaches_no_socket_and_no_file(tmp_path, listeners, how):
    where, socks = listeners
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "evil.c").write_text(_NATIVE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(folder / "evil.so"), str(folder / "evil.c")], check=True)
    secret = tmp_path / "token"
    secret.write_text("s3cret-native\n")
    cap = run(folder, f"""\
        export ATTACK_UNIX={where['unix']} ATTACK_ABSTRACT={where['abstract']} ATTACK_UDP={where['udp']}
        export ATTACK_FILE={secret}
        {how}
        {PPO} a=1
        """)
    assert "native unix=" in cap.stdout_tail, cap.stderr_tail  # the code did run
    assert received(socks) == []
    assert "unix=-2 abstract=-2 udp=-2 file=\n" in cap.stdout_tail + "\n"


# -- processes ------------------------------------------------------------------

def _marked(mark: str) -> list[int]:
    """Processes (of the whole machine) whose environment holds ``mark``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if mark.encode() in fh.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


def _no_survivors(mark: str) -> list[int]:
    survivors = _marked(mark)
    for pid in survivors:  # a failing run must not leave a busy loop behind
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return survivors


@pytest.mark.parametrize("without", [(), ("namespaces",)], ids=["namespaces", "subreaper"])
@pytest.mark.parametrize("escape", ["kill -KILL $PPID", "kill -KILL 1; kill -KILL -1", "kill -STOP $PPID"])
def test_no_process_outlives_the_capture(tmp_path, without, escape):
    probe = run(tmp_path / "probe", f"{PPO} a=1\n", without=without, require="none")
    lifetime = probe.confinement.properties.get("lifetime")
    if lifetime is not None and not lifetime.confined:
        # The documented degraded shape (no namespaces, Landlock < 6): the script
        # could signal the subreaper -- and `kill -1` every process of this user.
        assert "outlive the capture" in lifetime.how
        return
    mark = f"TUTORRL_TEST_MARK_{uuid.uuid4().hex}"
    started = time.monotonic()
    cap = run(tmp_path, f"""\
        ( while :; do :; done ) &
        ( trap '' TERM HUP; exec 0</dev/null; while :; do :; done ) &
        {escape} 2>/dev/null
        {PPO} a=1
        """, vars={"MARK": mark}, without=without)
    assert _no_survivors(mark) == []
    assert not cap.timed_out and cap.exit_code == 0 and overrides(cap) == ["a=1"]
    assert time.monotonic() - started < 15  # not the time limit
    assert cap.confinement.properties["lifetime"].confined


def test_the_time_limit_ends_every_process(tmp_path):
    mark = f"TUTORRL_TEST_MARK_{uuid.uuid4().hex}"
    cap = run(tmp_path, "( while :; do :; done ) &\nkill -STOP $PPID 2>/dev/null\nwhile :; do :; done\n",
              vars={"MARK": mark}, timeout=2)
    assert cap.timed_out
    assert _no_survivors(mark) == []


def test_subreaper_shape_reports_itself(tmp_path):
    cap = run(tmp_path, f"{PPO} a=1\n", without=("namespaces",))
    facts = cap.confinement.facts
    assert facts["namespaces"] == "" and facts["namespaces_error"] == "switched off"
    assert cap.confinement.properties["processes"].how == "no /proc reads (Landlock)"
    # This kernel has Landlock >= 6: the script cannot signal the subreaper.
    assert cap.confinement.properties["signals"].confined == (landlock_abi() >= 6)


def test_a_kernel_without_landlock_is_refused_unless_told(tmp_path):
    # What a kernel without Landlock gets: the core properties are missing, so
    # the script does not run; `require="none"` runs it and says what is open.
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    body = f"{PPO} a=$(cat {secret})\n"
    with pytest.raises(CaptureError, match=r"cannot confine the script \(reads: needs Landlock \(switched off\)"):
        run(tmp_path / "s", body, without=("landlock",))
    cap = run(tmp_path / "s", body, without=("landlock", "namespaces"), require="none")
    assert overrides(cap) == ["a=s3cret"]  # the degraded behaviour the docs describe
    assert cap.confinement.not_confined == ["reads", "writes", "executables", "processes", "signals", "lifetime"]
    assert "NOT confined: reads, writes" in cap.confinement.summary()


def test_without_seccomp_the_network_is_not_confined(tmp_path, listeners):
    where, socks = listeners
    cap = run(tmp_path / "s", f"echo x > /dev/udp/127.0.0.1/{where['udp']}; {PPO} a=1\n",
              without=("seccomp",), require="none")
    # The empty network namespace still stops UDP; the report names the gap it leaves.
    assert received(socks) == []
    net = cap.confinement.properties["network"]
    assert not net.confined and "unix sockets on the file system" in net.how


# -- the command line ---------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-inf", "0", "-3", "4000", "soon"])
def test_timeouts_that_do_not_limit_are_refused(tmp_path, value):
    script = tmp_path / "run.sh"
    script.write_text(f"{PPO} a=1\n")
    proc = _import(str(script), f"--timeout={value}", "-o", str(tmp_path / "s.toml"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"--timeout {value!r}: give the seconds the script may run" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "s.toml").exists()
    with pytest.raises(CaptureError, match="would be no limit"):
        capture(script, timeout=float(value) if value != "soon" else "soon")


def test_fifos_sockets_and_devices_in_the_script_folder_are_skipped(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "run.sh").write_text(f'{PPO} "trainer.project_name=$(cat pipe sub/pipe2 zero 2>/dev/null)ok"\n')
    os.mkfifo(folder / "pipe")
    (folder / "sub").mkdir()
    os.mkfifo(folder / "sub" / "pipe2")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(folder / "sock"))
    kinds = {"pipe": "a FIFO", "sock": "a socket", "sub/pipe2": "a FIFO"}
    try:
        os.mknod(folder / "zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: a copy without end
        kinds["zero"] = "a character device"
    except PermissionError:
        pass  # not root: no device can be made here, FIFOs and sockets still are
    try:
        proc = _import(str(folder / "run.sh"), "--verl", "0.9.1", "--no-check", "-o", str(tmp_path / "spec.toml"),
                       timeout=60)
    finally:
        sock.close()
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 1: --no-check
    assert "Traceback" not in proc.stderr
    assert "not copied into the sandbox (the script cannot read them):" in proc.stdout
    for name, kind in kinds.items():
        assert f"  {name} ({kind})" in proc.stdout
    assert 'project = "ok"' in (tmp_path / "spec.toml").read_text()


def test_a_script_that_is_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "run.sh")
    proc = _import(str(tmp_path / "run.sh"), timeout=60)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(CaptureError, match="not a regular file \\(a FIFO\\)"):
        capture(tmp_path / "run.sh", timeout=5)


@pytest.mark.wheels
def test_the_report_says_how_the_script_was_confined(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(f"{PPO} trainer.nnodes=1\n")
    proc = _import(str(script), "--verl", "0.9.1", "--require-confinement", "-o", str(tmp_path / "s.toml"))
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("sandbox: "))
    assert f"Landlock ABI {landlock_abi()}" in line and line.endswith("everything confined")
