"""How long `tutorrl compile` takes, against a bare interpreter and verl's own composition.

Prints one table from one run; ratios are against `python -c pass` measured in
the same run. Goal (issue 2): a cold compile within 4x a bare interpreter start.

    python benchmarks/bench_compile.py [--runs 15] [--verl-runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "specs" / "chess_tutor_grpo.toml"


# A "cold" process is a new interpreter, as a user gets it: with bytecode
# caches (pip writes them for installed packages; the first run writes
# tutorrl's own). PYTHONDONTWRITEBYTECODE=1, set on some machines, would make
# every run recompile tutorrl's sources and measure that instead.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _wall(argv: list[str], runs: int, warm: bool = True, **kwargs) -> list[float]:
    kwargs.setdefault("env", _ENV)
    if warm:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--verl-runs", type=int, default=2)
    args = parser.parse_args()

    from tutorrl.compiler import compile_bytes, write_bundle

    raw = SPEC.read_bytes()
    rows: list[tuple[str, list[float]]] = []
    rows.append(("python -c pass", _wall([sys.executable, "-c", "pass"], args.runs)))

    with tempfile.TemporaryDirectory() as tmp:
        cold = []
        _wall([sys.executable, "-m", "tutorrl", "compile", str(SPEC), "--out", str(Path(tmp) / "warm")], 1)
        for i in range(args.runs):
            out = Path(tmp) / f"out{i}"  # a fresh root: every run really writes
            cold += _wall([sys.executable, "-m", "tutorrl", "compile", str(SPEC), "--out", str(out)], 1, warm=False)
        rows.append(("tutorrl compile (cold process, writes)", cold))
        rows.append(("tutorrl compile (unchanged: no-op)",
                     _wall([sys.executable, "-m", "tutorrl", "compile", str(SPEC), "--out", str(Path(tmp) / "out0")],
                           args.runs)))

        compile_bytes(raw, "warm.toml")  # imports and template compilation happen once
        in_process = []
        for _ in range(args.runs * 10):
            start = time.perf_counter()
            compile_bytes(raw, "spec.toml")
            in_process.append(time.perf_counter() - start)
        rows.append(("compile_bytes (in process, warm)", in_process))

        bundle = write_bundle(compile_bytes(raw, "spec.toml"), Path(tmp) / "verl").path
        env = {**_ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        rows.append(("verl main_ppo --cfg job (same overrides)",
                     _wall(["bash", str(bundle / "launch.sh"), "--cfg", "job"], args.verl_runs, env=env, cwd=tmp)))

    # Both ratios: medians carry the noise of a shared machine, minimums the
    # cost when nothing else runs.
    base, base_min = statistics.median(rows[0][1]), min(rows[0][1])
    print(f"{'what':<44} {'runs':>5} {'median ms':>10} {'min ms':>9} {'x python':>9} {'x python (min)':>15}")
    for name, times in rows:
        med = statistics.median(times)
        print(f"{name:<44} {len(times):>5} {med * 1000:>10.1f} {min(times) * 1000:>9.1f} {med / base:>9.2f} "
              f"{min(times) / base_min:>15.2f}")


if __name__ == "__main__":
    main()
