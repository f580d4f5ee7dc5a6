"""What the in-run callback's background hashing leaves a CPU-bound trainer, before and now.

The callback hashes a checkpoint in the trainer's own process while training
goes on. A trainer thread here runs a fixed CPU-bound step (pure Python and a
numpy matmul, which releases the GIL as torch's ops do) and counts its steps:
first idle, then while a checkpoint (benchmarks/bench_hash.generate's layout,
page cache warm) is hashed by the callback's own code (`Snapshot.hash`, as
`EvidenceCallback._record` calls it). Modes, alternating in every round:

  * before: min(HASH_THREADS, cores) threads at the trainer's priority (7a27be0);
  * now: the same threads at the lowest priority (`hash_jobs(background=True)`:
    nice 19), and, for comparison, the same at nice 10 (`nice`'s default).

Per mode: the trainer's rate while hashing over its idle rate just before
(median of the rounds), the hash's time beside the trainer, and the hash's
time alone (no trainer) against the hashlib bound (one core's hashlib rate,
measured in the same round, times the cores the hash may use). Goals (issue
26): the trainer keeps >= 80% of its idle rate on a 2-core host, and alone
the hash stays >= 90% of the bound. Other work on the machine competes with
a low-priority hash and not with a normal one: the load average is printed.

    python benchmarks/bench_hash_beside.py [--size-gib 1] [--rounds 5]

The suite runs it with --size-gib 0.02 --rounds 1 as a smoke test.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path

# One trainer thread is one thread: BLAS's own pool would spread the step over every core.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402

from bench_hash import _files, generate, one_core_sha256  # noqa: E402
from tutorrl.evidence import hashing  # noqa: E402
from tutorrl.evidence.hashing import default_workers  # noqa: E402
from tutorrl.evidence.record import Snapshot  # noqa: E402

# The callback's thread count, read from its source: importing it imports verl's trainer and torch.
HASH_THREADS = int(re.search(r"^HASH_THREADS = (\d+)$", (Path(hashing.__file__).with_name("callback.py"))
                             .read_text(), re.M)[1])

_M = np.random.default_rng(0).random((96, 96))


def _step() -> None:
    x = 0
    for i in range(3000):
        x += i * i
    _M @ _M


class Trainer:
    """A thread that counts fixed CPU-bound steps until stopped."""

    def __init__(self) -> None:
        self.steps, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            _step()
            self.steps += 1

    def rate_during(self, fn) -> tuple[float, float]:
        """(steps per second while ``fn()`` runs, its seconds)."""
        start_steps, start = self.steps, time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        return (self.steps - start_steps) / elapsed, elapsed

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _hash(step: Path, background: bool, nice: int) -> None:
    hashing.BACKGROUND_NICE = nice
    snapshot = Snapshot(step, hold=True)
    try:
        snapshot.hash(workers=min(HASH_THREADS, default_workers()), progress=False, background=background)
    finally:
        snapshot.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=1.0, help="seconds the idle rate is measured over")
    args = parser.parse_args()
    chosen = hashing.BACKGROUND_NICE
    modes = {"before: normal priority": (False, 0),
             f"now: lowest priority (nice {chosen})": (True, chosen),
             "compare: nice 10": (True, 10)}
    threads = min(HASH_THREADS, default_workers())
    with tempfile.TemporaryDirectory() as tmp:
        step = generate(Path(tmp), args.size_gib)
        probe = Snapshot(step, hold=True)
        size = probe.nbytes  # every byte the record hashes: the files, and each tensor of the safetensors again
        probe.close()
        _hash(step, False, 0)  # page cache warm
        kept = {name: [] for name in modes}
        beside = {name: [] for name in modes}
        alone = {name: [] for name in modes}
        bound = []
        for _ in range(args.rounds):
            biggest = max(_files(step), key=lambda p: p.stat().st_size)
            bound.append(one_core_sha256(biggest) * threads)  # bytes/s on the cores the hash may use
            for name, (background, nice) in modes.items():
                trainer = Trainer()
                try:
                    before, _ = trainer.rate_during(lambda: time.sleep(args.idle_s))
                    busy, seconds = trainer.rate_during(lambda: _hash(step, background, nice))
                    after, _ = trainer.rate_during(lambda: time.sleep(args.idle_s))
                finally:
                    trainer.stop()
                kept[name].append(busy / ((before + after) / 2))  # idle on both sides: the machine drifts
                beside[name].append(seconds)
                start = time.perf_counter()
                _hash(step, background, nice)
                alone[name].append(time.perf_counter() - start)
    hashing.BACKGROUND_NICE = chosen
    gbps = statistics.median(bound) / 1e9
    print(f"{size / 2**30:.2f} GiB hashed per record, {threads} hashing threads on {default_workers()} cores, "
          f"{args.rounds} rounds; hashlib bound {gbps:.2f} GB/s; load average {os.getloadavg()[0]:.2f}")
    print(f"{'mode':<34} {'trainer kept':>13} {'hash beside s':>14} {'hash alone s':>13} {'alone / bound':>14}")
    for name in modes:
        rate = size / statistics.median(alone[name]) / 1e9
        print(f"{name:<34} {statistics.median(kept[name]):>12.0%} {statistics.median(beside[name]):>14.2f} "
              f"{statistics.median(alone[name]):>13.2f} {rate / gbps:>13.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
