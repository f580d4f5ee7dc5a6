"""An embedded `tutorrl run --dry-run` against verl's own `--cfg job`, in one run of this script.

    python benchmarks/bench_dryrun.py [--repeat N] [--spec specs/gsm8k_custom_reward.toml]

The spec is compiled into a scratch folder; its bundle's launch.sh is run once
with a stand-in Python that records the argv it would exec, so the baseline
gets exactly the overrides the bundle passes verl. Rows (wall clock, median of
N, rounds alternating):
  * baseline: `python -m verl.trainer.main_ppo --config-name NAME <overrides>
    --cfg job` -- verl's own Hydra composing and printing the config;
  * `tutorrl run BUNDLE --dry-run` on an embedded head, until its result line
    ("dry run succeeded ...") is printed, and until it exits (the head stopped);
and the peak memory of each: the sum of the resident sizes of the process and
every process below it (tutorrl, the head, every Ray process, verl), sampled
every 0.2 s, and each process of the dry run's tree at that peak. Ratios are
against the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
RESULT = "dry run succeeded"
STANDIN = """#!/usr/bin/env bash
# Records what launch.sh would exec verl with; anything else runs the real Python.
if [ "${1:-}" = "-m" ] && [ "${2:-}" = "verl.trainer.main_ppo" ]; then
  "$REAL_PYTHON" -c 'import json, os, sys; json.dump(sys.argv[1:], open(os.environ["ARGV_FILE"], "w"))' "${@:3}"
  exit 0
fi
exec "$REAL_PYTHON" "$@"
"""


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process this user can see."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        out[int(name)] = (parent, cmd)
    return out


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) bytes of one process; PSS shares each page among the processes
    that map it, so forked processes (Ray's dashboard modules) are not counted twice."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


# What a process of the tree is, by what its command line contains (first match).
_NAMES = (("verl.trainer.main_ppo", "verl (the job)"), ("launch.sh", "launch.sh (the job)"),
          ("-m tutorrl run", "tutorrl"), ("gcs_server", "gcs_server"), ("raylet/raylet", "raylet"),
          ("lean_ray.py handoff dashboard", "dashboard's stand-in (ray start's child)"),
          ("lean_ray.py handoff agent", "dashboard agent's stand-in (the raylet's child)"),
          ("ray::DashboardAgent", "dashboard agent"), ("dashboard/agent.py", "dashboard agent (starting)"),
          ("ray::RuntimeEnvAgent", "runtime_env agent"),
          ("lean_ray.py handoff runtime_env_agent", "runtime_env agent's stand-in (the raylet's child)"),
          ("runtime_env/agent/main.py", "runtime_env agent (starting)"),
          ("ray::JobSupervisor", "job supervisor (Ray worker)"), ("default_worker.py", "Ray worker (starting)"),
          ("ray-dashboard-", "dashboard module"), ("multiprocessing.forkserver", "dashboard forkserver"),
          ("multiprocessing.resource_tracker", "dashboard resource tracker"),
          ("dashboard/dashboard.py", "dashboard head"), ("lean_ray.py watch", "head (waiting on Ray's processes)"),
          ("ray start", "ray start"), ("lean_ray.py start", "ray start"), ("log_monitor", "log monitor"),
          ("monitor.py", "autoscaler monitor"), ("ray::IDLE", "idle Ray worker"))


def _name(command: str) -> str:
    for needle, name in _NAMES:
        if needle in command:
            if name == "dashboard module":
                return "dashboard module " + command.split("ray-dashboard-", 1)[1].split("-", 1)[0]
            return name
    return command.split(" ", 1)[0].rsplit("/", 1)[-1] or "?"


def tree_memory(root: int) -> tuple[dict[str, int], list[tuple[str, int, int]]]:
    """RSS and PSS of ``root`` and every process below it, and of its Ray part:
    all but ``root`` itself (tutorrl) and the job's entrypoint (launch.sh and verl, below it);
    and (name, RSS, PSS) of each process."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in procs.items():
        children.setdefault(parent, []).append(pid)
    totals, each = {"rss": 0, "pss": 0, "ray_rss": 0, "ray_pss": 0}, []
    todo = [(root, False)]
    while todo:
        pid, in_job = todo.pop()
        command = procs.get(pid, (0, ""))[1]
        in_job = in_job or "launch.sh" in command or "verl.trainer.main_ppo" in command
        rss, pss = _memory(pid)
        totals["rss"] += rss
        totals["pss"] += pss
        if pid != root and not in_job:
            totals["ray_rss"] += rss
            totals["ray_pss"] += pss
        if rss:
            name = _name(command)
            # The lean head's forkserver is a fork of the dashboard: the same command line as its parent.
            if name == "dashboard head" and procs.get(procs.get(pid, (0, ""))[0], (0, ""))[1] == command:
                name = "dashboard forkserver (a fork of the dashboard)"
            each.append((name, rss, pss))
        todo.extend((c, in_job) for c in children.get(pid, []))
    return totals, each


def _env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(extra)
    return env


def prepare(root: Path, spec: Path) -> tuple[Path, Path, list[str]]:
    """(bundle, folder to run in, verl's argv after `python`) for ``spec``."""
    proc = subprocess.run([sys.executable, "-m", "tutorrl", "compile", str(spec), "--out", str(root / "bundles")],
                          capture_output=True, text=True, env=_env())
    if proc.returncode != 0:
        raise SystemExit(f"compile failed:\n{proc.stderr}")
    bundle = Path(proc.stdout.strip().splitlines()[-1].rsplit(" ", 1)[-1])
    if not bundle.is_absolute():
        bundle = (Path.cwd() / bundle).resolve()
    cwd = root / "cwd"
    cwd.mkdir()
    standin = root / "python"
    standin.write_text(STANDIN)
    standin.chmod(0o755)
    subprocess.run(["bash", str(bundle / "launch.sh")], cwd=cwd, check=True, capture_output=True,
                   env=_env(TUTORRL_PYTHON=str(standin), REAL_PYTHON=sys.executable, ARGV_FILE=str(root / "argv")))
    argv = json.loads((root / "argv").read_text())
    return bundle, cwd, ["-m", "verl.trainer.main_ppo", *argv]


def measured(argv: list[str], cwd: Path, env: dict[str, str], marker: str | None = None):
    """(seconds until ``marker`` is printed on stderr (None: until exit), seconds until exit,
    the peaks of :func:`tree_memory` (with ``processes``: each process when the tree's RSS peaked),
    the standard error)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, done, seen, at_peak = {}, threading.Event(), [None], []

    def sample():
        while not done.wait(0.2):
            totals, each = tree_memory(proc.pid)
            if totals["rss"] > peak.get("rss", 0):
                at_peak[:] = each
            for key, value in totals.items():
                peak[key] = max(peak.get(key, 0), value)

    def read_stderr(lines):
        for line in proc.stderr:
            lines.append(line)
            if marker and seen[0] is None and marker in line:
                seen[0] = time.perf_counter() - t0

    sampler, err_lines = threading.Thread(target=sample, daemon=True), []
    reader = threading.Thread(target=read_stderr, args=(err_lines,), daemon=True)
    sampler.start()
    reader.start()
    out = proc.stdout.read()
    proc.wait()
    total = time.perf_counter() - t0
    reader.join()
    done.set()
    sampler.join()
    err = "".join(err_lines)
    if proc.returncode != 0 or (marker and seen[0] is None):
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}):\n{out[-2000:]}\n{err[-3000:]}")
    peak["processes"] = at_peak
    return (seen[0] if marker else total), total, peak, err


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spec", default=str(REPO / "specs" / "gsm8k_custom_reward.toml"))
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    peaks: dict[str, list[dict[str, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-dryrun-") as tmp:
        bundle, cwd, verl_argv = prepare(Path(tmp), Path(args.spec))
        baseline = "verl's own --cfg job (baseline)"
        result, finished = "tutorrl run --dry-run: result printed", "tutorrl run --dry-run: exited"
        for _ in range(args.repeat):
            seconds, _, peak, _ = measured([sys.executable, *verl_argv, "--cfg", "job"], cwd, _env())
            rows.setdefault(baseline, []).append(seconds)
            peaks.setdefault(baseline, []).append(peak)
            shown, total, peak, err = measured([sys.executable, "-m", "tutorrl", "run", str(bundle), "--dry-run"],
                                               cwd, _env(), marker=RESULT)
            rows.setdefault(result, []).append(shown)
            rows.setdefault(finished, []).append(total)
            peaks.setdefault("tutorrl run --dry-run (whole tree)", []).append(peak)
    print(f"embedded dry run benchmark: {args.repeat} repeats, {os.cpu_count()} CPUs, "
          f"{len(verl_argv) - 4} overrides ({Path(args.spec).name})")
    width = max(len(n) for n in [*rows, *peaks, "peak memory, median MiB"])
    base = statistics.median(rows[baseline])
    print(f"{'what':{width}} {'median s':>9} {'min s':>7} {'max s':>7} {'x baseline':>11}")
    for name, values in rows.items():
        med = statistics.median(values)
        print(f"{name:{width}} {med:9.2f} {min(values):7.2f} {max(values):7.2f} {med / base:11.2f}")
    print(f"{'peak memory, median MiB':{width}} {'RSS':>7} {'PSS':>7} {'Ray RSS':>8} {'Ray PSS':>8}")
    for name, values in peaks.items():
        med = {k: statistics.median(v[k] for v in values) / 2**20 for k in values[0] if k != "processes"}
        ray = (f"{med['ray_rss']:8.0f} {med['ray_pss']:8.0f}" if name != baseline else f"{'-':>8} {'-':>8}")
        print(f"{name:{width}} {med['rss']:7.0f} {med['pss']:7.0f} {ray}")
    print("(RSS: resident sizes summed, shared pages counted in each process; PSS: each page shared out;"
          " Ray: the tree without tutorrl's own process and the job's launch.sh and verl)")
    last = peaks["tutorrl run --dry-run (whole tree)"][-1]["processes"]
    print(f"\nthe dry run's tree when its RSS peaked (last round), {len(last)} processes:")
    each = max([width, *(len(name) for name, _, _ in last)])
    print(f"{'process':{each}} {'RSS MiB':>8} {'PSS MiB':>8}")
    for name, rss, pss in sorted(last, key=lambda p: -p[1]):
        print(f"{name:{each}} {rss / 2**20:8.0f} {pss / 2**20:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
