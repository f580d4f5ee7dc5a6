"""How long `tutorrl compile` takes, against a bare start of the same interpreter.

What users run: tutorrl installed from its wheel (not editable -- an editable
install adds an import hook to every interpreter start) into a fresh virtual
environment with only its core dependencies. The baseline is `python -c pass`
of that same interpreter, and the two are run alternately so both see the same
machine; the table gives medians and minimums, ratios against the baseline of
the same run. Goal (issue "Speak all of verl"): a cold compile within 4x. A
second baseline row, importing msgspec and tomli (the spec's TOML reader,
tutorrl/_toml.py) and nothing else, shows the floor the core dependencies set
on the same interpreter.

    python benchmarks/bench_compile.py [--runs 21] [--verl-runs 2] [--python python3.13] [--no-extras]

Goal (issue 26): a cold compile within 3x a bare start on a core install and
4x with the extras installed. The extras change what compile imports in one
way only: msgspec imports typing_extensions where it is installed (ray, torch,
hydra and verl all bring it). So a second venv, the same wheel plus the
typing_extensions this interpreter has (copied: no index needed), gives the
"extras" rows, measured in the same alternating rounds; --no-extras leaves it out.

The venv and every bundle live under TMPDIR: the "writes" row includes
creating five files and a folder on that file system (0.3-5 ms on a slow
virtual disk, next to nothing on tmpfs); ``TMPDIR=/dev/shm`` separates
tutorrl's time from the disk's. The "no-op" row (same spec, bundle already
there) is the compile without the writes.

The suite runs it with --runs 1 --verl-runs 0 as a smoke test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "specs" / "chess_tutor_grpo.toml"
# A spec with [roots]: launch.sh computes the rooted values with a program
# carrying the compiler's quoting functions by their source.
ROOTED = REPO / "specs" / "gsm8k_custom_reward.toml"

# A "cold" process is a new interpreter, as a user gets it: with bytecode
# caches (pip writes them for installed packages). PYTHONDONTWRITEBYTECODE=1,
# set on some machines, would make every run recompile tutorrl's sources.
_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}


def _run(argv: list[str], **kwargs) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV, **kwargs)
    return time.perf_counter() - start


def install(root: Path, interpreter: str | None = None, extras: str = "") -> Path:
    """A fresh venv (made by ``interpreter``, default this one) with tutorrl's
    wheel and its core dependencies (and ``extras``' from the package index, e.g.
    ``"import"``); returns its python."""
    wheels = root / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    str(REPO), "-w", str(wheels)], check=True, env=_ENV)
    env_dir = root / "venv"
    if interpreter is None:
        venv.EnvBuilder(with_pip=True).create(env_dir)
    else:
        subprocess.run([interpreter, "-m", "venv", str(env_dir)], check=True, env=_ENV)
    python = env_dir / "bin" / "python"
    wheel = next(wheels.glob("tutorrl-*.whl"))
    # pip installs the console script and byte-compiles, as for a user.
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    f"{wheel}[{extras}]" if extras else str(wheel)], check=True, env=_ENV)
    return python


def with_typing_extensions(root: Path, interpreter: str | None = None) -> Path:
    """:func:`install`, plus this interpreter's typing_extensions (one module file,
    byte-compiled there as pip would); returns the venv's python."""
    import importlib.util
    import shutil

    found = importlib.util.find_spec("typing_extensions")  # found, not imported: the benchmark needs only its file
    if found is None or not found.origin:
        raise SystemExit("the extras rows copy this interpreter's typing_extensions, and it has none: "
                         "install it or pass --no-extras")
    python = install(root, interpreter)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, env=_ENV).stdout.strip()
    target = Path(site) / "typing_extensions.py"
    shutil.copyfile(found.origin, target)
    subprocess.run([str(python), "-m", "py_compile", str(target)], check=True, env=_ENV)
    return python


FLOOR = Path(__file__).resolve().parent / "_floor.py"


def in_process(python: Path, specs: list[Path], *, repeat: int = 1, write: Path | None = None,
               cwd: Path | None = None, cpu: list[float] | None = None) -> list[float]:
    """Seconds of each of ``repeat`` passes of ``compile_bytes`` (and ``write_bundle``
    into ``write``) over ``specs``, in one warm process of ``python`` (benchmarks/_floor.py);
    the CPU seconds of each pass are appended to ``cpu`` when given."""
    import json

    argv = [str(python), str(FLOOR), *map(str, specs), "--repeat", str(repeat)]
    if write is not None:
        argv += ["--write", str(write)]
    done = subprocess.run(argv, check=True, capture_output=True, text=True, env=_ENV, cwd=cwd)
    answer = json.loads(done.stdout)
    imported = Path(answer["tutorrl"]).resolve()
    if REPO in imported.parents and python.parent.parent not in imported.parents:
        raise SystemExit(f"the in-process floor imported tutorrl from the repository ({imported}), "
                         "not the installed wheel")
    if cpu is not None:
        cpu += answer["cpu"]
    return answer["times"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--verl-runs", type=int, default=2)
    parser.add_argument("--python", default=None, metavar="PATH",
                        help="the interpreter to measure (a venv is made with it); default: this one")
    parser.add_argument("--no-extras", dest="extras", action="store_false",
                        help="no second venv with typing_extensions (the extras' one effect on compile)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        python = install(root, args.python)
        tutorrl = python.parent / "tutorrl"
        extras = with_typing_extensions(root / "extras", args.python) if args.extras else None
        baseline, floor, cold, noop, rooted, x_base, x_cold, x_before = [], [], [], [], [], [], [], []
        # The compile as it ran before issue 26 in that venv: msgspec importing typing_extensions.
        before = ("import sys, typing_extensions; from tutorrl.cli import entry; "
                  "sys.argv = ['tutorrl', 'compile', sys.argv[1], '--out', sys.argv[2]]; entry()")
        _run([str(tutorrl), "compile", str(SPEC), "--out", str(root / "warm")])  # first run writes .pyc of nothing new
        if extras is not None:
            _run([str(extras.parent / "tutorrl"), "compile", str(SPEC), "--out", str(root / "xwarm")])
        for i in range(args.runs):
            # Alternate, so the machine's drift lands on both sides.
            baseline.append(_run([str(python), "-c", "pass"]))
            floor.append(_run([str(python), "-c", "import msgspec, tomli"]))
            cold.append(_run([str(tutorrl), "compile", str(SPEC), "--out", str(root / f"out{i}")]))
            noop.append(_run([str(tutorrl), "compile", str(SPEC), "--out", str(root / "warm")]))
            rooted.append(_run([str(tutorrl), "compile", str(ROOTED), "--out", str(root / f"rout{i}")]))
            if extras is not None:
                x_base.append(_run([str(extras), "-c", "pass"]))
                x_cold.append(_run([str(extras.parent / "tutorrl"), "compile", str(SPEC), "--out",
                                    str(root / f"xout{i}")]))
                x_before.append(_run([str(extras), "-c", before, str(SPEC), str(root / f"bout{i}")]))
        rows = [("python -c pass (same interpreter)", baseline),
                # The floor no compile goes below: the core dependencies' own import
                # (msgspec imports typing, datetime, uuid, decimal) and the TOML reader.
                ("python -c 'import msgspec, tomli'", floor),
                ("tutorrl compile (cold process, writes)", cold),
                ("tutorrl compile (unchanged: no-op)", noop),
                ("tutorrl compile, a spec with roots", rooted)]
        if extras is not None:
            # Over the core venv's bare start, as the goal counts it; the extras
            # venv's own bare start shows the interpreter is the same.
            rows += [("extras venv: python -c pass", x_base),
                     ("extras venv: tutorrl compile (cold, writes)", x_cold),
                     ("extras venv: compile before (typing_ext.)", x_before)]

        # In the venv's own interpreter, never with the repository on sys.path:
        # its tutorrl/ folder would shadow the installed package.
        rows.append(("compile_bytes (in process, warm)", in_process(python, [SPEC], repeat=max(1, args.runs) * 10,
                                                                    cwd=root)))

        if args.verl_runs:
            bundle = Path(subprocess.run([str(tutorrl), "compile", str(SPEC), "--out", str(root / "verl")],
                                         check=True, capture_output=True, text=True, env=_ENV).stdout.strip())
            env = {**_ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
            verl = []
            for _ in range(args.verl_runs):
                start = time.perf_counter()
                subprocess.run(["bash", str(bundle / "launch.sh"), "--cfg", "job"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp)
                verl.append(time.perf_counter() - start)
            rows.append(("verl main_ppo --cfg job (same overrides)", verl))

    base, base_min = statistics.median(baseline), min(baseline)
    # "x python (pairs)": the median of each run's time over the baseline run
    # just before it -- the figure least moved by the machine's drift over the
    # benchmark (the ratio of medians pairs a fast minute's baseline with a slow one's).
    print(f"{'what':<44} {'runs':>5} {'median ms':>10} {'min ms':>9} {'x python':>9} {'x python (min)':>15} "
          f"{'x python (pairs)':>17}")
    for name, times in rows:
        med = statistics.median(times)
        pairs = (f"{statistics.median(t / b for t, b in zip(times, baseline)):>17.2f}"
                 if len(times) == len(baseline) else f"{'':>17}")
        print(f"{name:<44} {len(times):>5} {med * 1000:>10.1f} {min(times) * 1000:>9.1f} {med / base:>9.2f} "
              f"{min(times) / base_min:>15.2f} {pairs}")


if __name__ == "__main__":
    main()
