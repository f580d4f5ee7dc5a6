"""The in-process floor: ``compile_bytes`` (and optionally ``write_bundle``) in a loop.

Run by the interpreter under test -- the benchmark's fresh venv with tutorrl
installed from its wheel -- as a script, so the repository is never on
``sys.path`` (its ``tutorrl/`` folder would shadow the installed package).
Prints JSON: the seconds of each pass over the specs (wall clock, and CPU
time of this process), and where tutorrl was imported from (the benchmarks
check it is the installed copy).

    python benchmarks/_floor.py SPEC... [--repeat N] [--write DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import tutorrl
from tutorrl.compiler import compile_bytes, write_bundle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("specs", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=1, help="passes over the specs (each timed)")
    parser.add_argument("--write", type=Path, default=None, metavar="DIR",
                        help="also write each bundle, pass i under DIR/pass<i> (a fresh folder each pass)")
    args = parser.parse_args()
    raws = [(p.read_bytes(), str(p)) for p in args.specs]
    compile_bytes(*raws[0])  # warm: the first compile loads the key map and templates
    times, cpu = [], []
    for i in range(args.repeat):
        out = args.write / f"pass{i}" if args.write is not None else None
        start, start_cpu = time.perf_counter(), time.process_time()
        for raw, name in raws:
            compiled = compile_bytes(raw, name)
            if out is not None:
                write_bundle(compiled, out)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    print(json.dumps({"times": times, "cpu": cpu, "tutorrl": tutorrl.__file__}))


if __name__ == "__main__":
    main()
