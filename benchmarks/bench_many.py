"""Compiling many specs: one `tutorrl compile` of N specs against N separate processes and the floor.

Rows per N (generated specs: the chess tutor spec under N experiment names):

* N separate `tutorrl compile SPEC` processes, one after another (what a
  shell loop over the specs costs);
* one `tutorrl compile 'specs/*.toml'` process (the glob expanded by tutorrl);
* the in-process floor: ``compile_bytes`` over the N specs in one warm process
  of the same interpreter (benchmarks/_floor.py), and the same with
  ``write_bundle`` -- the floor a process that also writes the bundles cannot
  go under on this file system.

Every process writes into a fresh folder, so each row includes creating the
bundles; the rows run alternately, and the table gives medians, each row over
the compile-only floor ("x floor", goal under 2 at N = 1,000, issue 26) and
the separate processes over the one process ("x one"), and the same in CPU
time (user + system; each process whole, the floor's loop alone), which a
machine shared with other work moves far less. At the end the bundles
of the last run of each are compared byte for byte.

What users run: tutorrl installed from its wheel (not editable) into a fresh
virtual environment with only its core dependencies (bench_compile.py's
``install``), everything under TMPDIR (``TMPDIR=/dev/shm`` takes the disk out
of the "writes" rows).

    python benchmarks/bench_many.py [--sizes 10,100,1000] [--runs 3] [--separate-max 1000] [--python PATH]

The suite runs it with --sizes 10 --runs 1 as a smoke test.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _specs import write_specs
from bench_compile import _ENV, in_process, install


def _timed(argvs: list[list[str]], cwd: Path, cpu: list[float]) -> float:
    """Wall seconds of running each of ``argvs`` in turn; their CPU seconds (user + system) appended to ``cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for argv in argvs:
        subprocess.run(argv, cwd=cwd, env=_ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return elapsed


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000", help="numbers of specs, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--separate-max", type=int, default=1000, metavar="N",
                        help="time the N separate processes only up to this many specs (default: 1000)")
    parser.add_argument("--python", default=None, metavar="PATH",
                        help="the interpreter to measure (a venv is made with it); default: this one")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]

    rows = []  # (what, n, times)
    identical = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        python = install(root, args.python)
        tutorrl = str(python.parent / "tutorrl")
        for n in sizes:
            work = root / f"n{n}"
            specs = write_specs(work / "specs", n)
            names = [str(p.relative_to(work)) for p in specs]
            in_process(python, specs, cwd=work)  # the page cache holds the specs and tutorrl for every row
            separate, one, floor, floor_writes = [], [], [], []
            cpu = {"separate": [], "one": [], "floor": [], "writes": []}
            for i in range(args.runs):
                for d in ("separate", "one", "floor"):
                    shutil.rmtree(work / d, ignore_errors=True)
                # Alternate, so the machine's drift lands on every row.
                if n <= args.separate_max:
                    separate.append(_timed([[tutorrl, "compile", name, "--out", "separate"] for name in names], work,
                                           cpu["separate"]))
                one.append(_timed([[tutorrl, "compile", "specs/*.toml", "--out", "one"]], work, cpu["one"]))
                floor += in_process(python, specs, cwd=work, cpu=cpu["floor"])
                floor_writes += in_process(python, specs, write=work / "floor", cwd=work, cpu=cpu["writes"])
            if separate:
                rows.append((f"{n} separate `tutorrl compile`", n, separate, cpu["separate"]))
            rows.append(("one `tutorrl compile` of all", n, one, cpu["one"]))
            rows.append(("floor: compile_bytes loop", n, floor, cpu["floor"]))
            rows.append(("floor + write_bundle", n, floor_writes, cpu["writes"]))
            if separate:
                identical.append((n, _tree(work / "separate") == _tree(work / "one")))
            identical.append((n, _tree(work / "floor" / "pass0") == _tree(work / "one")))

    medians = {(what, n): statistics.median(times) for what, n, times, _ in rows}
    cpus = {(what, n): statistics.median(c) for what, n, _, c in rows}
    # CPU time (each process whole, start-up included; the floor's compile loop) is what a machine
    # shared with other work moves least: on a busy machine, read those columns.
    print(f"{'what':<34} {'specs':>6} {'runs':>5} {'median ms':>10} {'ms/spec':>8} {'x floor':>8} {'x one':>6} "
          f"{'cpu ms':>9} {'cpu x floor':>12}")
    for what, n, times, _ in rows:
        med, c = medians[(what, n)], cpus[(what, n)]
        print(f"{what:<34} {n:>6} {len(times):>5} {med * 1000:>10.1f} {med * 1000 / n:>8.2f} "
              f"{med / medians[('floor: compile_bytes loop', n)]:>8.2f} "
              f"{med / medians[('one `tutorrl compile` of all', n)]:>6.2f} "
              f"{c * 1000:>9.1f} {c / cpus[('floor: compile_bytes loop', n)]:>12.2f}")
    same = all(ok for _, ok in identical)
    print(f"\nbundles byte-identical (separate processes, one process, in-process writes): {'yes' if same else 'NO'}; "
          f"cpu: user + system seconds; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if not same:
        raise SystemExit(f"bundles differ: {identical}")


if __name__ == "__main__":
    main()
