"""What launch.sh's evidence-callback check costs every launch, against the check it replaced.

A bundle with ``trainer.evidence_callback = true`` checks, before verl starts,
that the job's Python can run tutorrl's callback. Until issue 26 it did so by
importing it (``python -c 'import tutorrl.evidence.callback'``), which loads
verl's callback base and with it verl, tensordict, torch and transformers in a
process thrown away; now it runs ``tutorrl.evidence.hook_check``, which
imports none of them. Both are run here as launch.sh runs them (the snippet
under real bash, ``python_bin`` and ``bundle_dir`` set), alternately with a
bare ``python -c pass`` of the same interpreter. Goal (issue 26): the check
costs < 0.3 s.

The interpreter is this one: it needs verl and torch installed (the training
stack), or the old check measures an import that fails at once.

    python benchmarks/bench_launch_check.py [--runs 7]

The suite runs it with --runs 1 as a smoke test.
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
SPEC = REPO / "specs" / "chess_tutor_prompted.toml"  # evidence_callback = true
NEW = (REPO / "templates" / "evidence_check.tmpl").read_text()
# The check as launch.sh ran it before (templates/evidence_check.tmpl at 7a27be0).
OLD = """
if ! "$python_bin" -c 'import tutorrl.evidence.callback' 2>/dev/null; then
  echo "tutorrl: the job's Python ($python_bin) cannot import tutorrl.evidence.callback" >&2
  exit 3
fi"""
_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}


def _timed(script: str, bundle: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(["bash", "-c", f"set -euo pipefail\npython_bin={sys.executable}\n"
                           f"bundle_dir={bundle}\n{script}"], env=_ENV, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"the check failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(subprocess.run([sys.executable, "-m", "tutorrl", "compile", str(SPEC), "--out", tmp],
                                     check=True, capture_output=True, text=True, env=_ENV).stdout.strip())
        rows = {"python -c pass (same interpreter)": "\"$python_bin\" -c pass",
                "check before: import tutorrl.evidence.callback": OLD,
                "check now: tutorrl.evidence.hook_check": NEW}
        for script in rows.values():  # warm: bytecode and page cache
            _timed(script, bundle)
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, script in rows.items():  # alternate, so drift lands on every row
                times[name].append(_timed(script, bundle))
    base = times["python -c pass (same interpreter)"]
    print(f"{'what':<50} {'runs':>5} {'median ms':>10} {'min ms':>9} {'x python (pairs)':>17} "
          f"{'over python ms':>15}")
    for name, seq in times.items():
        pairs = statistics.median(t / b for t, b in zip(seq, base))
        over = statistics.median(t - b for t, b in zip(seq, base))
        print(f"{name:<50} {len(seq):>5} {statistics.median(seq) * 1000:>10.1f} {min(seq) * 1000:>9.1f} "
              f"{pairs:>17.2f} {over * 1000:>15.1f}")


if __name__ == "__main__":
    main()
