"""`tutorrl export --to slurm` under a real Slurm: slurmctld, slurmd and munged
from the distribution's packages (Debian's slurm-wlm 22.05), one node on
loopback with 8 fake GPUs, and the exported script submitted with `sbatch`.

The job is a dry run (`sbatch job.sbatch --cfg job`): it checks the bundle's
sha256 and re-derives it, writes its own Ray token, starts Ray's head in a
`srun` step, waits for it with the token and runs launch.sh, whose verl
(0.9.1, the CPU install in this venv) composes its config and exits. The job's
HOME holds a stale ``~/.ray/auth_token``, which is what made the export before
this one hang: Ray 2.60 turns token auth on when that file exists.

With retries (`--retries 1`) the first start's trainer is killed with SIGKILL, as the OOM killer or a
crash ends it; the job requeues itself (`scontrol requeue`), Slurm starts it again after the
cluster's cred_expire (10 s here, 120 s by Slurm's default) and the second start resumes from scratch
(no checkpoint) and runs the dry run to the end: Slurm's own Restarts=1 and COMPLETED, and one output
file holding both starts. Submitted with `sbatch --no-requeue`, the same job is refused its requeue by
Slurm and ends FAILED with the trainer's status.

Installing needs root and apt-get (CI runs as root on Debian); without them
the test is skipped with that reason. Every daemon, and every process the job
started, carries a marker in its environment, and the fixture's finalizer
ends each of them by id, on failure too. On the 2-core development machine once Slurm
is installed (as the machine's load varies): the plain job 25-50 s, the requeued one 65-120 s
(submit to COMPLETED, two starts of verl's dry run), the one not requeued 17-30 s.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import support
from export_helpers import bundle_named, copy_bundle, export

pytestmark = pytest.mark.slow

NEEDED = ("munged", "slurmctld", "slurmd", "sbatch")
GPUS = 8  # the chess bundle's 7 trainer GPUs + 1 reward GPU
MARKER = "TUTORRL_TEST_SLURM"
REQUEUE_MARKER = "TUTORRL_TEST_REQUEUE"  # the requeued job's processes, apart from the other test's
CRED_EXPIRE_S = 10


def _install_or_skip() -> None:
    if all(shutil.which(d) for d in NEEDED):
        if os.geteuid() != 0:
            pytest.skip("Slurm is installed, but slurmd runs jobs as their users and starts only as root")
        return
    if os.geteuid() != 0:
        pytest.skip("Slurm is not installed, and installing slurm-wlm and munge with apt-get needs root")
    if shutil.which("apt-get") is None:
        pytest.skip("Slurm is not installed, and there is no apt-get to install slurm-wlm and munge with")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:  # a fresh image has no package lists yet
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
        done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not all(shutil.which(d) for d in NEEDED):
        pytest.skip(f"apt-get install slurm-wlm munge failed (exit {done.returncode}): {done.stderr[-500:]}")


class Slurm:
    def __init__(self, root: Path):
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAY_", "TUTORRL_"))}
        self.env.update(SLURM_CONF=str(self.conf), **{MARKER: str(root)})
        self.procs: list[subprocess.Popen] = []

    def cmd(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60, **kw)

    def start(self) -> None:
        r, host = self.root, socket.gethostname().split(".")[0]
        for d in ("munge", "state", "spool", "log", "dev"):
            (r / d).mkdir(mode=0o700)
        (r / "munge" / "key").write_bytes(os.urandom(1024))
        (r / "munge" / "key").chmod(0o600)
        for i in range(GPUS):  # slurmd wants a character device for each GPU: links to /dev/null
            os.symlink("/dev/null", r / "dev" / f"gpu{i}")
        ctld, slurmd = support.free_ports(2)
        self.conf.write_text("\n".join([
            "ClusterName=tutorrl-test", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ctld}",
            f"SlurmdPort={slurmd}", "AuthType=auth/munge", "CredType=cred/munge",
            # cred_expire: how long a requeued job waits before it starts again (120 s by default).
            f"AuthInfo=socket={r}/munge/socket,cred_expire={CRED_EXPIRE_S}", "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={r}/state", f"SlurmdSpoolDir={r}/spool", f"SlurmctldPidFile={r}/slurmctld.pid",
            f"SlurmdPidFile={r}/slurmd.pid", f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdLogFile={r}/log/slurmd.log", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory", "MpiDefault=none",
            "ReturnToService=2", "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
            "JobAcctGatherType=jobacct_gather/none", "KillWait=5", "GresTypes=gpu",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory=2000 Gres=gpu:{GPUS} State=UNKNOWN",
            f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP", ""]))
        # gres.conf sits beside slurm.conf; AutoDetect off: the devices are the fakes above.
        (r / "gres.conf").write_text(f"AutoDetect=off\nNodeName={host} Name=gpu File={r}/dev/gpu[0-{GPUS - 1}]\n")
        self._daemon("munged", "-F", "-f", f"--socket={r}/munge/socket", f"--key-file={r}/munge/key",
                     f"--log-file={r}/log/munged.log", f"--pid-file={r}/munge/pid", f"--seed-file={r}/munge/seed")
        self._wait(lambda: (r / "munge" / "socket").exists(), 30, "munged's socket")
        self._daemon("slurmctld", "-D", "-f", str(self.conf))
        self._wait(lambda: self.cmd("scontrol", "ping").returncode == 0, 60, "slurmctld")
        self._daemon("slurmd", "-D", "-f", str(self.conf))
        self._wait(lambda: self.cmd("sinfo", "-h", "-o", "%T").stdout.strip() == "idle", 60, "the node to be idle")

    def _daemon(self, *argv: str) -> None:
        log = open(self.root / "log" / f"{argv[0]}.stdout", "wb")
        self.procs.append(subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True))

    def _wait(self, ready, timeout: float, what: str) -> None:
        support.wait_until(ready, timeout, what, procs=self.procs, logs=lambda: sorted((self.root / "log").iterdir()))

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted((self.root / "log").iterdir()))

    def job(self, job_id: str) -> dict[str, str]:
        text = self.cmd("scontrol", "-o", "show", "job", job_id).stdout
        return dict(f.split("=", 1) for f in text.split() if "=" in f)

    def stop(self) -> None:
        import pwd

        if self.conf.exists():  # the cluster is this test's own: every job on it is the test's
            self.cmd("scancel", f"--user={pwd.getpwuid(os.getuid()).pw_name}")
        support.end_procs(self.procs, grace=10)
        # What the daemons left: job steps (slurmstepd) and the job's Ray, each marked by its environment.
        for pid in support.procs_with_env(MARKER, str(self.root)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def slurm():
    _install_or_skip()
    # Short: munge's socket and Ray's session folder are AF_UNIX paths (107 bytes at most).
    root = Path(tempfile.mkdtemp(prefix="trs-", dir="/tmp"))
    cluster = Slurm(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        assert support.procs_with_env(MARKER, str(root)) == [], "processes of the test's Slurm are still running"
        shutil.rmtree(root, ignore_errors=True)


def _submit_env(slurm: Slurm, home: Path, **extra: str) -> dict[str, str]:
    """The environment `sbatch` passes on to the job (its default, --export=ALL)."""
    ray_port, *head_ports = support.free_ports(5)
    return dict(slurm.env, HOME=str(home), TMPDIR=str(slurm.root),  # Ray's session folder: short, the test's own
                PATH=f"{Path(sys.executable).parent}{os.pathsep}{slurm.env['PATH']}", TUTORRL_PYTHON=sys.executable,
                TUTORRL_RAY_PORT=str(ray_port),
                # A loopback address `ray start` keeps (it would replace 127.0.0.1 by the machine's routable one).
                TUTORRL_RAY_HEAD_IP="127.0.0.2",
                TUTORRL_RAY_HEAD_OPTIONS=" ".join(f"--{name}={port}" for name, port in zip(
                    ("dashboard-port", "ray-client-server-port", "dashboard-agent-listen-port",
                     "metrics-export-port"), head_ports)),
                **extra)


def test_exported_job_starts_ray_and_verl_under_a_real_slurmctld(slurm, tmp_path):
    bundle = bundle_named("chess-tutor-grpo")
    copy_bundle(bundle, tmp_path)
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("left-by-an-earlier-ray-init")
    result = export(f"bundles/{bundle}", "--to", "slurm", "--cpus-per-task", "1", "--mem", "500M", "-o",
                    "job.sbatch", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    env = _submit_env(slurm, home)
    started = time.monotonic()
    submitted = subprocess.run(["sbatch", "--parsable", "job.sbatch", "--cfg", "job"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    job = slurm.job(job_id)
    assert job["NumCPUs"] == "1" and "mem=500M" in job["TRES"] and job["TresPerNode"] == f"gres:gpu:{GPUS}", job
    # COMPLETING: the batch script has ended (its exit code is the job's) and Slurm is ending its
    # steps -- Ray's head, which drains for up to 30 s; the fixture's finalizer ends what remains.
    done = ("COMPLETING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
    slurm._wait(lambda: slurm.job(job_id).get("JobState") in done, 300, f"job {job_id} to end")
    job, elapsed = slurm.job(job_id), time.monotonic() - started
    out = (tmp_path / f"tutorrl-{bundle}-{job_id}.out").read_text(errors="replace")
    assert job["JobState"] in ("COMPLETING", "COMPLETED") and job["ExitCode"] == "0:0", \
        f"{job}\n{out[-3000:]}\n{slurm.logs()}"
    # The bundle check, re-derivation included, ran inside the job before anything else.
    assert out.startswith(f"ok: bundles/{bundle} is bundle sha256:{bundle}") and "re-derived from its spec" in out
    # Ray's head came up in its srun step; the token-carrying probe saw it (no InvalidAuthToken hang).
    assert "Ray runtime started." in out and "InvalidAuthToken" not in out
    # Loopback only: the head took the address it was given, and every address Ray printed is loopback.
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "Local node IP: 127.0.0.2" in plain
    ray_start = "\n".join(line for line in plain.splitlines() if "scripts.py" in line)  # `ray start`'s own lines
    shown = re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", ray_start)
    assert shown and all(a.startswith("127.") for a in shown), shown
    # verl's own Hydra composed the bundle's config (--cfg job) and printed it.
    assert "experiment_name: chess-tutor-grpo\n" in out and "\nray_kwargs:\n" in out
    # The job's token folder is gone; the stale file in ~/.ray was neither used nor touched.
    assert not list(tmp_path.glob(".tutorrl-slurm-*"))
    assert (home / ".ray" / "auth_token").read_text() == "left-by-an-earlier-ray-init"
    print(f"slurm job {job_id}: submitted to {job['JobState']} in {elapsed:.1f} s")


def _verl_mains(marked: str) -> list[int]:
    """The pids of verl's trainer (launch.sh execs `python -m verl.trainer.main_ppo`) whose environment has
    REQUEUE_MARKER=``marked``: this test's job, not another process on the machine."""
    return [pid for pid in support.procs_with_env(REQUEUE_MARKER, marked)
            if b"verl.trainer.main_ppo" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


class Killed:
    """The chess bundle exported with `--retries 1`, submitted as a dry run (`sbatch [SBATCH_ARGS] job.sbatch
    --cfg job`), and its first start's verl trainer killed with SIGKILL, as the OOM killer or a crash ends it."""

    def __init__(self, slurm: Slurm, tmp_path: Path, *sbatch_args: str):
        self.bundle = bundle_named("chess-tutor-grpo")
        copy_bundle(self.bundle, tmp_path)
        home = tmp_path / "home"
        home.mkdir()
        result = export(f"bundles/{self.bundle}", "--to", "slurm", "--cpus-per-task", "1", "--mem", "500M",
                        "--retries", "1", "-o", "job.sbatch", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        self.marked = str(tmp_path)
        env = _submit_env(slurm, home, **{REQUEUE_MARKER: self.marked})
        self.started = time.monotonic()
        submitted = subprocess.run(["sbatch", "--parsable", *sbatch_args, "job.sbatch", "--cfg", "job"],
                                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert submitted.returncode == 0, submitted.stderr
        self.id = submitted.stdout.strip().split(";")[0]
        self.out_file = tmp_path / f"tutorrl-{self.bundle}-{self.id}.out"
        # The first start's trainer, once verl's Python has started (it imports verl for seconds before its
        # dry run ends, so a poll finds it in time).
        first = support.wait_until(lambda: _verl_mains(self.marked), 300, "the first start's verl trainer",
                                   procs=slurm.procs, logs=lambda: sorted((slurm.root / "log").iterdir()))
        assert slurm.job(self.id).get("Restarts") == "0"
        os.kill(first[0], signal.SIGKILL)

    def output(self) -> str:
        return self.out_file.read_text(errors="replace") if self.out_file.is_file() else "(no output file)"


# Not COMPLETING: the states Slurm holds once every step of the job has ended, not only its script.
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")


def test_a_killed_trainer_is_requeued_by_slurm_and_its_second_start_runs(slurm, tmp_path):
    """`--retries 1`: the first start's trainer is killed, the job requeues itself with `scontrol requeue`,
    and Slurm starts it again, which asks tutorrl where to resume (no checkpoint yet: from scratch) and
    runs verl's dry run to the end."""
    killed = Killed(slurm, tmp_path)
    job_id, bundle = killed.id, killed.bundle
    # Requeued: pending again once Slurm has ended every process of the first start, and it is held back for
    # cred_expire, so nothing of the second has started yet. Nothing of the first may be left: its Ray head
    # would still hold the port the second start's head takes.
    slurm._wait(lambda: slurm.job(job_id).get("JobState") == "PENDING", 120, f"job {job_id} to be requeued")
    assert support.procs_with_env(REQUEUE_MARKER, killed.marked) == [], "the first start left processes running"
    slurm._wait(lambda: slurm.job(job_id).get("JobState") in ENDED, 300, f"job {job_id} to end")
    job, elapsed, out = slurm.job(job_id), time.monotonic() - killed.started, killed.output()
    # Slurm's own account: started again once, and the second start ended 0.
    assert job["Restarts"] == "1" and job["JobState"] == "COMPLETED" and job["ExitCode"] == "0:0", \
        f"{job}\n{out[-4000:]}\n{slurm.logs()}"
    # The first start's words survived the second start (its output file is appended to, not truncated).
    assert out.count(f"ok: bundles/{bundle} is bundle sha256:{bundle}") == 2, out[-4000:]
    first_part, _, second_part = out.partition("tutorrl: the job failed (exit 137); requeued, restart 1 of 1\n")
    assert second_part, out[-4000:]
    # The second start asked tutorrl where to resume: no checkpoint, from scratch, and said so.
    assert "tutorrl: no checkpoint whose evidence verifies; starting from scratch" in second_part
    assert "starting from scratch" not in first_part and "experiment_name: chess-tutor-grpo\n" not in first_part
    # verl's dry run: its config composed, with the resume decision in it.
    assert "experiment_name: chess-tutor-grpo\n" in second_part and "resume_mode: disable\n" in second_part
    assert "Ray runtime started." in second_part and "InvalidAuthToken" not in out
    assert not list(tmp_path.glob(".tutorrl-slurm-*"))
    print(f"slurm job {job_id}: killed, requeued and COMPLETED in {elapsed:.1f} s")


def test_a_job_submitted_with_no_requeue_ends_with_the_trainers_status(slurm, tmp_path):
    """`sbatch --no-requeue` wins over the script's `#SBATCH --requeue`, and Slurm then refuses the job's
    `scontrol requeue`: the job says so and ends FAILED with the killed trainer's status (137), not
    scontrol's (1), and is not started again."""
    killed = Killed(slurm, tmp_path, "--no-requeue")
    slurm._wait(lambda: slurm.job(killed.id).get("JobState") in ENDED, 300, f"job {killed.id} to end")
    job, out = slurm.job(killed.id), killed.output()
    assert job["JobState"] == "FAILED" and job["ExitCode"] == "137:0" and job["Restarts"] == "0", \
        f"{job}\n{out[-4000:]}\n{slurm.logs()}"
    assert "Requested operation is presently disabled" in out, out[-4000:]
    assert "tutorrl: Slurm did not requeue the job; it ends failed\n" in out
    assert out.count("ok: bundles/") == 1 and not list(tmp_path.glob(".tutorrl-slurm-*"))
    print(f"slurm job {killed.id}: killed, not requeued, FAILED in {time.monotonic() - killed.started:.1f} s")
