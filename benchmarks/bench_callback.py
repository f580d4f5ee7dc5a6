"""How long tutorrl's evidence callback blocks verl's trainer per save, against recording synchronously.

For each size (default 2 and 20 GiB) a verl-FSDP-shaped checkpoint of real
random bytes is written into a temp dir (removed after; a size that does not
fit on that disk with 10% to spare is reported as skipped, with the free space),
then, in the same run:

- baseline: `record_checkpoint` called in the trainer's thread, as the callback
  did before -- the whole hash of every file (optimizer shards included) and
  the record, on all usable cores;
- callback: `EvidenceCallback.on_save` as verl calls it, `--saves` times in a
  row (the same folder reported again, like saves that come faster than
  hashing), timing each call's return; then the wait for every record to be
  durable (what verl's last save waits for), and a count of the records
  written: every save must have its record.

Usage: python benchmarks/bench_callback.py [--sizes-gib 2 20] [--saves 3] [--dir DIR]
The page cache is warm for both (the baseline reads the files first); with a
size beyond free RAM both read from disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent / "specs" / "chess_tutor_grpo.toml"
GiB = 1024**3


def _bundle(root: Path, output_dir: Path) -> Path:
    import tomli_w

    from tutorrl.compiler import compile_bytes, write_bundle

    doc = tomllib.loads(SPEC.read_text(encoding="utf-8"))
    doc["trainer"]["output_dir"] = str(output_dir)
    doc["trainer"]["evidence_callback"] = True
    return write_bundle(compile_bytes(tomli_w.dumps(doc).encode(), "bench.toml"), root).path


class Trainer:
    total_training_steps = 10**9  # never the last step: on_save must not wait


def measure(size_gib: float, saves: int, where: Path | None) -> dict:
    sys.path.insert(0, str(HERE))
    from bench_hash import generate

    from tutorrl.evidence.bundle import load_bundle
    from tutorrl.evidence.callback import HASH_THREADS, EvidenceCallback
    from tutorrl.evidence.hashing import default_workers
    from tutorrl.evidence.record import read_records, record_checkpoint

    need = size_gib * GiB * 1.1
    free = shutil.disk_usage(where or tempfile.gettempdir()).free
    if free < need:
        return {"size": size_gib, "skipped": f"needs {need / GiB:.1f} GiB free, {free / GiB:.1f} GiB available"}
    tmp = Path(tempfile.mkdtemp(prefix="tutorrl-bench-cb-", dir=where))
    try:
        t = time.perf_counter()
        step = generate(tmp / "ckpts", size_gib)
        nbytes = sum(p.stat().st_size for p in step.rglob("*") if p.is_file())
        print(f"{size_gib} GiB: generated {nbytes / GiB:.2f} GiB in {time.perf_counter() - t:.1f}s", file=sys.stderr)

        sync_bundle = _bundle(tmp / "sync", tmp / "ckpts")
        t = time.perf_counter()
        record_checkpoint(load_bundle(sync_bundle), "bench", step, source="callback", finished=None, progress=False)
        baseline = time.perf_counter() - t

        os.environ.update(TUTORRL_BUNDLE_DIR=str(_bundle(tmp / "async", tmp / "ckpts")), TUTORRL_RUN_ID="bench")
        os.environ.pop("TUTORRL_EVIDENCE_ON_FAILURE", None)
        cb = EvidenceCallback(config=None)
        blocked = []
        t0 = time.perf_counter()
        for _ in range(saves):
            t = time.perf_counter()
            cb.on_save(trainer=Trainer(), global_step=10, checkpoint_dir=str(step), async_save=False)
            blocked.append(time.perf_counter() - t)
        cb.wait()
        durable = time.perf_counter() - t0
        records = read_records(Path(os.environ["TUTORRL_BUNDLE_DIR"]))
        failed = sum(1 for _, s in records if s is None or s.predicate.verdict.status == "fail")
        return {"size": size_gib, "bytes": nbytes, "baseline": baseline, "blocked": blocked, "durable": durable,
                "records": len(records), "saves": saves, "failed": failed + len(cb.failures),
                "threads": (default_workers(), min(HASH_THREADS, default_workers()))}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-gib", type=float, nargs="+", default=[2.0, 20.0])
    ap.add_argument("--saves", type=int, default=3, help="on_save calls in a row per size (default 3)")
    ap.add_argument("--dir", type=Path, default=None, help="where to generate (default: the system temp dir)")
    args = ap.parse_args()
    rows = [measure(size, args.saves, args.dir) for size in args.sizes_gib]

    print(f"\n| {'checkpoint':>10} | {'sync record (baseline)':>22} | {'on_save blocks: max':>19} | {'mean':>7} | "
          f"{'max / baseline':>14} | {'all durable after':>17} | records / saves")
    print(f"|{'-' * 12}|{'-' * 24}|{'-' * 21}|{'-' * 9}|{'-' * 16}|{'-' * 19}|----------------")
    ok = True
    for r in rows:
        if "skipped" in r:
            print(f"| {r['size']:>6.2f} GiB | skipped: {r['skipped']}")
            continue
        worst, mean = max(r["blocked"]), sum(r["blocked"]) / len(r["blocked"])
        lost = r["records"] != r["saves"]
        ok &= not lost and r["failed"] == 0
        print(f"| {r['bytes'] / GiB:>6.2f} GiB | {r['baseline']:>20.3f} s | {worst:>17.4f} s | {mean:>5.4f} s | "
              f"{worst / r['baseline']:>14.5f} | {r['durable']:>15.2f} s | {r['records']} / {r['saves']}"
              + ("  LOST RECORDS" if lost else "") + (f"  {r['failed']} FAILED" if r["failed"] else ""))
    done = [r for r in rows if "skipped" not in r]
    if done:
        threads = done[0]["threads"]
        print(f"\nbaseline hashes on {threads[0]} threads in the trainer's thread; the callback on {threads[1]} "
              "beside it. Goal: on_save <= 1 s per save, every save recorded.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
