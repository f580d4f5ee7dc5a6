"""How long `tutorrl check` takes as the number of specs grows, against the compile floor.

`tutorrl check` recompiles every spec and compares it with its committed
bundle. Its floor is compiling the same specs once each in one warm process
(``compile_bytes`` in a loop, benchmarks/_floor.py), measured here in the same
run and interpreter: the table gives check's time, its time per spec, and
check over the floor -- 1.0 would be a check that costs nothing beyond the
compiles. Goal (issue 26 "Fast where users wait"): linear in the number of
specs, 1,000 specs under 2 s.

What users run: tutorrl installed from its wheel (not editable) into a fresh
virtual environment with only its core dependencies (bench_compile.py's
``install``). Generated specs (the chess tutor spec under N experiment names)
and their bundles live in a temporary folder; check and the floor are run
alternately, and the table gives medians -- of wall time, and of CPU time
(user + system: check's whole process, the floor's compile loop), which a
machine shared with other work moves far less.

    python benchmarks/bench_check.py [--sizes 10,100,1000] [--runs 5] [--staged] [--python python3.13]

``--staged`` adds a row per size for `tutorrl check --staged` (the
pre-commit hook), with specs and bundles committed in a throwaway git repository.

The suite runs it with --sizes 10 --runs 1 as a smoke test.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _specs import write_specs
from bench_compile import _ENV, in_process, install


def _timed(argv: list[str], cwd: Path, env: dict | None = None, cpu: list[float] | None = None) -> float:
    """Wall seconds of running ``argv``; its CPU seconds (user + system) appended to ``cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env or _ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    if cpu is not None:
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return elapsed


def _git_env(root: Path) -> dict:
    config = root / "gitconfig"
    root.mkdir(parents=True, exist_ok=True)
    config.write_text("")
    env = {k: v for k, v in _ENV.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=str(config), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="b",
               GIT_AUTHOR_EMAIL="b@example.invalid", GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.invalid")
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000", help="numbers of specs, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--staged", action="store_true", help="also time `tutorrl check --staged`")
    parser.add_argument("--python", default=None, metavar="PATH",
                        help="the interpreter to measure (a venv is made with it); default: this one")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]

    rows = []  # (what, n, times, floor times)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        python = install(root, args.python)
        tutorrl = str(python.parent / "tutorrl")
        for n in sizes:
            work = root / f"n{n}"
            specs = write_specs(work / "specs", n)
            # The bundles, written by the installed tutorrl in one process.
            _timed([tutorrl, "compile", "specs/*.toml"], work)
            git_env = None
            if args.staged:
                git_env = _git_env(work.parent / f"git{n}")
                for command in (["init", "-q", "-b", "main"], ["add", "specs", "bundles"], ["commit", "-q", "-m", "b"]):
                    subprocess.run(["git", *command], cwd=work, env=git_env, check=True, capture_output=True)
            _timed([tutorrl, "check"], work)  # warm the file system's caches as every later run finds them
            check, staged, floor = [], [], []
            check_cpu, staged_cpu, floor_cpu = [], [], []
            for _ in range(args.runs):
                # Alternate, so the machine's drift lands on every row.
                check.append(_timed([tutorrl, "check"], work, cpu=check_cpu))
                if git_env is not None:
                    staged.append(_timed([tutorrl, "check", "--staged"], work, git_env, cpu=staged_cpu))
                floor += in_process(python, specs, cwd=work, cpu=floor_cpu)
            rows.append(("tutorrl check", n, check, floor, check_cpu, floor_cpu))
            if staged:
                rows.append(("tutorrl check --staged", n, staged, floor, staged_cpu, floor_cpu))

    # CPU time (the check's whole process, start-up included; the floor's compile loop) is what a
    # machine shared with other work moves least: on a busy machine, read those columns.
    print(f"{'what':<24} {'specs':>6} {'runs':>5} {'median ms':>10} {'ms/spec':>8} {'floor ms':>9} {'x floor':>8} "
          f"{'cpu ms':>8} {'floor cpu':>10} {'cpu x floor':>12}")
    for what, n, times, floor, cpu, fcpu in rows:
        med, fl = statistics.median(times), statistics.median(floor)
        c, fc = statistics.median(cpu), statistics.median(fcpu)
        print(f"{what:<24} {n:>6} {len(times):>5} {med * 1000:>10.1f} {med * 1000 / n:>8.2f} {fl * 1000:>9.1f} "
              f"{med / fl:>8.2f} {c * 1000:>8.1f} {fc * 1000:>10.1f} {c / fc:>12.2f}")
    print(f"\nfloor: compile_bytes of the same specs once each, in one warm process of the same interpreter "
          f"(medians of {args.runs} passes); cpu: user + system seconds; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
