"""Compiling a sweep: one `tutorrl compile` of an N-point sweep against N separate compiles of its points.

Rows per N (a sweep extending the chess tutor spec: ``actor.lr`` x
``trainer.total_steps``, N points):

* one `tutorrl compile SPEC` of a plain spec (one bundle): the "one compile"
  the goal is stated against;
* one `tutorrl compile sweep.toml` (the base read, N points expanded, N
  bundles written);
* N separate `tutorrl compile POINT.toml` processes, each point written out as
  a spec of its own (what a shell loop over copied specs costs).

Goal (issue 25): the sweep in under 2x one compile plus 2 ms a point. Rows
run alternately, each process in a fresh output folder, and the table gives
medians (and CPU time, user + system, which a shared machine moves less).
At the end each point's bundle from the sweep is compared with the bundle of
that point compiled as its own spec: same id and the same launch files, byte
for byte (their manifests differ only in provenance: the sweep's names its
sources and its point).

What users run: tutorrl installed from its wheel (not editable) into a fresh
virtual environment with only its core dependencies (bench_compile.py's
``install``), everything under TMPDIR.

    python benchmarks/bench_sweep.py [--sizes 100] [--runs 5] [--python PATH]

The suite runs it with --sizes 10 --runs 1 as a smoke test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tomllib
from pathlib import Path

import tomli_w
from bench_compile import install
from bench_many import _timed

SPEC = Path(__file__).resolve().parent.parent / "specs" / "chess_tutor_grpo.toml"
CONTENT = ("bundle.env", "launch.sh", "ray-job.json", "spec.toml")


def write_sweep(folder: Path, n: int) -> Path:
    """``folder/base.toml`` and ``folder/sweep.toml``, a sweep of ``n`` points over it."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SPEC, folder / "base.toml")
    lrs = 10 if n % 10 == 0 and n >= 10 else n
    steps = n // lrs
    grid = {"actor.lr": [round(1e-7 * (i + 1), 12) for i in range(lrs)],
            "trainer.total_steps": [100 + j for j in range(steps)]}
    (folder / "sweep.toml").write_text(tomli_w.dumps({"experiment": {"extends": "base.toml"},
                                                      "sweep": {"grid": grid}}))
    return folder / "sweep.toml"


def write_points(out: Path, folder: Path) -> list[Path]:
    """Each point of a compiled sweep (read from its bundles' manifests) written out as its own spec."""
    base = tomllib.loads(SPEC.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, bundle in enumerate(sorted(out.iterdir())):
        manifest = json.loads((bundle / "manifest.json").read_text())
        doc = json.loads(json.dumps(base))
        for dotted, value in manifest["point"].items():
            table = doc
            *parts, last = dotted.split(".")
            for part in parts:
                table = table.setdefault(part, {})
            table[last] = value
        doc["experiment"]["name"] = manifest["experiment"]
        path = folder / f"p{n:05d}.toml"
        path.write_text(tomli_w.dumps(doc))
        paths.append(path)
    return paths


def _launches(root: Path) -> dict[str, dict[str, bytes]]:
    return {p.name: {f: (p / f).read_bytes() for f in CONTENT} for p in sorted(root.iterdir())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100", help="points per sweep, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=None, metavar="PATH",
                        help="the interpreter to measure (a venv is made with it); default: this one")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]

    import tempfile

    rows = []  # (what, n, times, cpu)
    verdicts = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        python = install(root, args.python)
        tutorrl = str(python.parent / "tutorrl")
        for n in sizes:
            work = root / f"n{n}"
            sweep = write_sweep(work / "specs", n)
            # The first compile gives each point's name; the page cache then holds everything every row reads.
            _timed([[tutorrl, "compile", str(sweep), "--out", str(work / "first")]], work, [])
            points = write_points(work / "first", work / "points")
            assert len(points) == n, f"the sweep compiled to {len(points)} bundles, not {n}"
            one, swept, separate = [], [], []
            cpu = {"one": [], "sweep": [], "separate": []}
            for _ in range(args.runs):
                for d in ("one", "sweep", "separate"):
                    shutil.rmtree(work / d, ignore_errors=True)
                # Alternate, so the machine's drift lands on every row.
                one.append(_timed([[tutorrl, "compile", str(SPEC), "--out", "one"]], work, cpu["one"]))
                swept.append(_timed([[tutorrl, "compile", str(sweep), "--out", "sweep"]], work, cpu["sweep"]))
                separate.append(_timed([[tutorrl, "compile", str(p), "--out", "separate"] for p in points], work,
                                       cpu["separate"]))
            rows += [("one `tutorrl compile` of one spec", 1, one, cpu["one"]),
                     (f"one `tutorrl compile` of a {n}-point sweep", n, swept, cpu["sweep"]),
                     (f"{n} separate `tutorrl compile` of its points", n, separate, cpu["separate"])]
            same = _launches(work / "sweep") == _launches(work / "separate")
            goal = 2 * statistics.median(one) + 0.002 * n
            verdicts.append((n, same, statistics.median(swept), goal, statistics.median(separate)))

    print(f"{'what':<48} {'bundles':>7} {'runs':>5} {'median ms':>10} {'ms/bundle':>10} {'x one':>7} "
          f"{'cpu ms':>9} {'cpu x one':>10}")
    for what, n, times, c in rows:
        med, cm = statistics.median(times), statistics.median(c)
        ref = next(statistics.median(t) for w, _, t, _ in rows if w.startswith("one `tutorrl compile` of one"))
        cref = next(statistics.median(cc) for w, _, _, cc in rows if w.startswith("one `tutorrl compile` of one"))
        print(f"{what:<48} {n:>7} {len(times):>5} {med * 1000:>10.1f} {med * 1000 / n:>10.2f} {med / ref:>7.2f} "
              f"{cm * 1000:>9.1f} {cm / cref:>10.2f}")
    print()
    for n, same, swept, goal, separate in verdicts:
        print(f"{n} points: sweep {swept * 1000:.1f} ms against the goal 2 x one compile + 2 ms/point = "
              f"{goal * 1000:.1f} ms: {'met' if swept < goal else 'NOT met'}; "
              f"{separate / swept:.1f}x faster than separate compiles; "
              f"launches byte-identical to the points compiled as their own specs: {'yes' if same else 'NO'}")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if not all(same for _, same, _, _, _ in verdicts):
        raise SystemExit("a sweep's bundle differs from its point compiled as its own spec")


if __name__ == "__main__":
    main()
