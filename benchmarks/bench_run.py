"""What `tutorrl run` costs on top of Ray, measured in one run of this script.

    python benchmarks/bench_run.py [--repeat N]

Rows (wall clock, median of N):
  * baseline: `ray job submit` (the Ray CLI, waits for the job) of the same
    trivial entrypoint on the same running head;
  * baseline-sdk: the least a client can do (JobSubmissionClient.submit_job,
    then poll get_job_status until terminal), in this process;
  * `tutorrl run --address` of a trivial bundle on that head (verify,
    preflight, record, submit, stream, finish);
  * embedded head start (EmbeddedHead.start until the dashboard serves an
    ALIVE node), and a cold `tutorrl run` that starts and stops its own head.
Ratios are against the `ray job submit` baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
[experiment]
name = "bench-trivial"
verl = "0.9.1"
project = "bench"
[data]
train = "{root}/data/train.parquet"
val = "{root}/data/val.parquet"
train_batch_size = 8
[model]
path = "Qwen/Qwen2.5-0.5B-Instruct"
[actor]
ppo_mini_batch_size = 8
ppo_micro_batch_size_per_gpu = 1
[rollout]
engine = "vllm"
n = 2
[trainer]
total_steps = 1
output_dir = "{root}/out"
loggers = ["console"]
[resources]
nodes = 1
trainer_gpus_per_node = 1
reward_gpus = 0
[reward]
module = "bench_reward"
function = "compute_score"
"""
TRIVIAL = "#!/usr/bin/env bash\necho hello from the trivial bundle\n"


def trivial_bundle(root: Path) -> Path:
    """A compiled bundle whose launch.sh only echoes, re-sealed so it verifies."""
    from tutorrl.compiler import compile_spec, write_bundle
    from tutorrl.compiler.bundle import reseal

    spec = root / "bench.toml"
    # Absolute paths: a real run on an existing cluster refuses relative ones
    # (verl's workers there do not run in this folder).
    spec.write_text(SPEC.replace("{root}", str(root)))
    path = write_bundle(reseal(compile_spec(spec), launch_sh=TRIVIAL.encode()), root / "bundles").path
    (root / "bench_reward.py").write_text("def compute_score(*args, **kwargs):\n    return 0.0\n")
    (root / "data").mkdir()
    for name in ("train.parquet", "val.parquet"):
        (root / "data" / name).write_bytes(b"")
    return path


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def env_for(token: str | None = None, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # The bundles run trivial launch scripts, not verl: no training stack to check.
    env["TUTORRL_STACK_CHECK"] = "skip"
    # ... resealed around those scripts: accepted on their digests alone.
    env["TUTORRL_TRUST_DIGESTS"] = "1"
    if token:
        env["RAY_AUTH_TOKEN"] = token
    env.update(extra)
    return env


def check(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    n = ap.parse_args().repeat

    from tutorrl.runtime import cluster
    from tutorrl.runtime.head import EmbeddedHead

    bin_dir = Path(sys.executable).parent
    root = Path(tempfile.mkdtemp(prefix="bench-run-"))
    bundle = trivial_bundle(root)
    rows: dict[str, list[float]] = {k: [] for k in ("ray job submit", "sdk submit+poll", "tutorrl run --address",
                                                      "embedded head start", "tutorrl run (embedded, cold)")}
    heads = []
    try:
        for _ in range(n):
            h = EmbeddedHead(run_id="bench-head", num_gpus=1)  # the trivial spec asks for 1 GPU
            rows["embedded head start"].append(timed(h.start))
            heads.append(h)
        head = heads[0]
        for h in heads[1:]:
            h.stop()
        headers = json.dumps(head.headers)
        client = cluster.job_client(head.url, head.headers)
        entry = f"cd {root} && exec bash {bundle}/launch.sh"
        for i in range(n):
            proc_box = {}

            def ray_cli():
                proc_box["p"] = subprocess.run(
                    [str(bin_dir / "ray"), "job", "submit", "--address", head.url, "--headers", headers,
                     "--submission-id", f"bench-cli-{i}", "--entrypoint-num-cpus", "1", "--", "bash", "-c", entry],
                    capture_output=True, text=True, env=env_for())

            rows["ray job submit"].append(timed(ray_cli))
            check(proc_box["p"], "ray job submit")

            def sdk():
                sid = client.submit_job(entrypoint=entry, submission_id=f"bench-sdk-{i}", entrypoint_num_cpus=1)
                while not client.get_job_status(sid).is_terminal():
                    time.sleep(0.1)

            rows["sdk submit+poll"].append(timed(sdk))

            def tutorrl_address():
                proc_box["p"] = subprocess.run(
                    [sys.executable, "-m", "tutorrl", "run", str(bundle), "--address", head.url, "--quiet"],
                    cwd=root, capture_output=True, text=True, env=env_for(head.token))

            rows["tutorrl run --address"].append(timed(tutorrl_address))
            check(proc_box["p"], "tutorrl run --address")
        head.stop()
        heads = []
        for _ in range(n):
            def tutorrl_cold():
                proc_box["p"] = subprocess.run(
                    [sys.executable, "-m", "tutorrl", "run", str(bundle), "--quiet"], cwd=root,
                    capture_output=True, text=True, env=env_for(TUTORRL_EMBEDDED_NUM_GPUS="1"))

            rows["tutorrl run (embedded, cold)"].append(timed(tutorrl_cold))
            check(proc_box["p"], "tutorrl run (embedded)")
    finally:
        for h in heads:
            h.stop()

    base = statistics.median(rows["ray job submit"])
    print(f"tutorrl run benchmark: {n} repeats, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    print(f"{'what':32} {'median s':>9} {'min s':>7} {'max s':>7} {'x ray job submit':>17}")
    for name, values in rows.items():
        med = statistics.median(values)
        print(f"{name:32} {med:9.2f} {min(values):7.2f} {max(values):7.2f} {med / base:17.2f}")
    overhead = statistics.median(rows["tutorrl run --address"]) - base
    print(f"overhead of tutorrl run over ray job submit (same head): {overhead:+.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
