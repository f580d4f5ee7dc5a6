"""Every benchmark runs at its smallest size: benchmarks rot unless they run.

These assert that each one completes and prints its table with every row --
never a timing (speed is what the benchmarks themselves report).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _bench(name: str, *args: str, timeout: int = 600) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    proc = subprocess.run([sys.executable, str(BENCH / name), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_bench_compile_smallest():
    out = _bench("bench_compile.py", "--runs", "1", "--verl-runs", "0")
    for row in ("python -c pass (same interpreter)", "tutorrl compile (cold process, writes)",
                "tutorrl compile (unchanged: no-op)", "tutorrl compile, a spec with roots",
                "extras venv: tutorrl compile (cold, writes)", "extras venv: compile before (typing_ext.)",
                "compile_bytes (in process, warm)"):
        assert row in out, out


@pytest.mark.slow
def test_bench_check_smallest():
    out = _bench("bench_check.py", "--sizes", "10", "--runs", "1", "--staged")
    for row in ("tutorrl check ", "tutorrl check --staged", "floor: compile_bytes"):
        assert row in out, out


@pytest.mark.slow
def test_bench_many_smallest():
    out = _bench("bench_many.py", "--sizes", "10", "--runs", "1")
    for row in ("10 separate `tutorrl compile`", "one `tutorrl compile` of all", "floor: compile_bytes loop",
                "floor + write_bundle"):
        assert row in out, out
    assert "bundles byte-identical (separate processes, one process, in-process writes): yes" in out, out


@pytest.mark.slow
def test_bench_sweep_smallest():
    out = _bench("bench_sweep.py", "--sizes", "10", "--runs", "1")
    for row in ("one `tutorrl compile` of one spec", "one `tutorrl compile` of a 10-point sweep",
                "10 separate `tutorrl compile` of its points", "against the goal 2 x one compile + 2 ms/point"):
        assert row in out, out
    assert "launches byte-identical to the points compiled as their own specs: yes" in out, out


@pytest.mark.slow
def test_bench_launch_check_smallest():
    out = _bench("bench_launch_check.py", "--runs", "1")
    for row in ("python -c pass (same interpreter)", "check before: import tutorrl.evidence.callback",
                "check now: tutorrl.evidence.hook_check"):
        assert row in out, out


@pytest.mark.slow
def test_bench_import_smallest():
    out = _bench("bench_import.py", "--runs", "1", "--scripts", "grpo_fsdp_lists")
    for row in ("python -c pass", "import --no-check", "import, before (two whole composes)",
                "import, now, cold (no base kept)", "import, now, warm (base kept)"):
        assert row in out, out


@pytest.mark.slow
def test_bench_dryrun_smallest():
    out = _bench("bench_dryrun.py", "--repeat", "1")
    for row in ("verl's own --cfg job (baseline)", "tutorrl run --dry-run: result printed",
                "tutorrl run --dry-run: exited", "tutorrl run --dry-run (whole tree)", "Ray PSS",
                "the dry run's tree when its RSS peaked", "gcs_server", "verl (the job)"):
        assert row in out, out


def test_bench_hash_beside_smallest():
    out = _bench("bench_hash_beside.py", "--size-gib", "0.02", "--rounds", "1", "--idle-s", "0.2")
    for row in ("before: normal priority", "now: lowest priority (nice 19)", "compare: nice 10", "hashlib bound"):
        assert row in out, out


def test_bench_hash_smallest():
    out = _bench("bench_hash.py", "--size-gib", "0.01", "--repeat", "1")
    assert "tutorrl manifest" in out and "sha256sum" in out, out


@pytest.mark.slow
def test_bench_run_smallest():
    out = _bench("bench_run.py", "--repeat", "1")
    for row in ("ray job submit", "sdk submit+poll", "tutorrl run --address", "embedded head start",
                "tutorrl run (embedded, cold)",
                # The real CPU training job, in the environment tools/dev.sh test sets up.
                "ray job submit (verl trains)", "tutorrl run --address (verl trains)",
                "evidence --add, one checkpoint", "peak memory of a cold tutorrl run",
                # The publication proof of a real verl + SGLang run.
                "publication proof in a real run (verl 0.9.1 + SGLang", "median check / step",
                "peak memory of the whole run", "7B estimate"):
        assert row in out, out


@pytest.mark.needs_torch
def test_gpu_checksum_parity_smallest_on_cpu():
    """The GPU proof script's CPU path: tutorrl's port and a torch re-implementation agree on real tensors.

    No GPU here: sglang's own kernel is not run (the row says so)."""
    out = _bench("gpu/checksum_parity.py", "--sizes-mib", "0.01", "--repeat", "1")
    for row in ("bf16 odd length", "fp32 one tile + 1 word", "fp32 0.01 MiB", "bf16 0.01 MiB"):
        assert row in out, out
    assert "MISMATCH" not in out and "not run: no CUDA device" in out, out


def test_bench_callback_smallest():
    out = _bench("bench_callback.py", "--sizes-gib", "0.01", "--saves", "2")
    assert "sync record (baseline)" in out and "on_save blocks: max" in out, out
    assert "| 2 / 2" in out and "LOST" not in out and "FAILED" not in out, out


def test_bench_served_smallest():
    out = _bench("bench_served.py", "--size-gib", "0.002", "--hidden", "64", "--tp", "1,2", "--repeat", "1")
    for row in ("sglang hash of each stored tensor (baseline)", "rebuild + hash every rank, tp_size 1",
                "rebuild + hash every rank, tp_size 2"):
        assert row in out, out
