"""Real training across two Ray nodes: verl 0.5.0 trains the tiny model with one trainer worker on
each of two nodes of a cluster tutorrl did not start, submitted with `tutorrl run --address`.

The cluster is a head and a worker node on this machine (support.RayNodes: `ray start --head` and
`ray start --address`, each its own temp folder and ports, loopback only, token auth), both from the
training environment `tools/dev.sh test` builds (TUTORRL_TRAIN_PYTHON: verl 0.5.0, the CPU torch),
each declaring 1 GPU (verl 0.5.0 places a worker per GPU and refuses a pool without; it computes on
the CPU all the same) and carrying what a CPU cluster's image would: the CPU stand-in on PYTHONPATH
(tools/cpu_training/shim), the job's Python in TUTORRL_PYTHON, and GLOO_SOCKET_IFNAME=lo so the
trainer's process group (gloo, world size 2) stays on loopback.

The spec is specs/tiny_cpu_grpo.toml with `resources.nodes = 2` (1 GPU a node: verl's
trainer.nnodes=2, n_gpus_per_node=1) and the actor's micro-batch halved to divide each rank's
half of the mini-batch. Asserted from what verl and Ray wrote: two steps trained with a finite loss and a
non-zero gradient, both ranks' FSDP shards in each checkpoint, one evidence record per checkpoint
whose file digests are an independent sha256 of the folder, and the two WorkerDict actors -- verl's
trainer workers -- on the two different nodes, by Ray's state API.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
from pathlib import Path

import pytest

import support
from training_helpers import metrics, training_env, tutorrl

pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs_ray,
    pytest.mark.needs_train_env("TUTORRL_TRAIN_PYTHON", "TUTORRL_TINY_DIR"),
]

SHIM = support.REPO / "tools" / "cpu_training" / "shim"
MARKER = "TUTORRL_TEST_TWO_NODE_TRAINING"


def _two_node_spec(folder: Path) -> Path:
    """specs/tiny_cpu_grpo.toml on two nodes: the committed spec, edited where two ranks need it."""
    text = (support.SPECS / "tiny_cpu_grpo.toml").read_text()
    for old, new in (('name = "tiny-cpu-grpo"', 'name = "tiny-cpu-grpo-2node"'),
                     ("nodes = 1\n", "nodes = 2\n"),
                     # verl divides the mini-batch of 4 over the 2 ranks, 2 each, and refuses a micro-batch
                     # that does not divide that (ActorRolloutRefWorker.__init__, fsdp_workers.py).
                     ("ppo_micro_batch_size_per_gpu = 4", "ppo_micro_batch_size_per_gpu = 2"),
                     ('output_dir = "$CKPT_ROOT/tiny-cpu-grpo"', 'output_dir = "$CKPT_ROOT/tiny-cpu-grpo-2node"')):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = folder / "tiny_cpu_grpo_2node.toml"
    path.write_text(text)
    return path


class TrainedOnTwoNodes:
    def __init__(self, root: Path, nodes: support.RayNodes, tiny: Path):
        # Three (logical) CPUs a node: the head runs the job's entrypoint and verl's TaskRunner besides its worker.
        options = ("--num-gpus=1", "--num-cpus=3", "--object-store-memory=300000000")
        self.nodes = nodes.start_head(*options).add_worker(*options)
        self.root, self.ckpt = root, root / "ckpt"
        state = root / "state"
        self.env = {"TINY_ROOT": str(tiny), "CKPT_ROOT": str(self.ckpt), "RAY_AUTH_TOKEN": nodes.token,
                    "XDG_STATE_HOME": str(state), "TUTORRL_STATE_HOME": str(state / "tutorrl")}
        compiled = tutorrl("compile", str(_two_node_spec(root)), "--out", str(root / "bundles"), cwd=root)
        assert compiled.returncode == 0, compiled.stderr
        self.bundle = root / compiled.stdout.strip()
        started = time.monotonic()
        self.run = tutorrl("run", str(self.bundle), "--address", nodes.url, cwd=root, env=self.env)
        self.seconds = time.monotonic() - started
        (self.run_dir,) = (self.bundle / "runs").iterdir()
        self.log = (self.run_dir / "job.log").read_text(errors="replace")
        self.step_dir = self.ckpt / "tiny-cpu-grpo-2node"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    python, tiny = training_env("TUTORRL_TRAIN_PYTHON", ".complete", "the CPU training environment")
    nodes = support.RayNodes(str(Path(python).parent / "ray"), MARKER, env={
        "PYTHONPATH": str(SHIM), "TUTORRL_PYTHON": python, "GLOO_SOCKET_IFNAME": "lo"})
    try:
        yield TrainedOnTwoNodes(tmp_path_factory.mktemp("train2"), nodes, tiny)
    finally:
        nodes.stop()
        assert support.procs_with_env(MARKER, str(nodes.root)) == [], "processes of the test's Ray are left"


def test_verl_trains_two_steps_on_a_two_node_cluster(trained):
    assert trained.run.returncode == 0, trained.run.stdout[-3000:] + trained.run.stderr[-3000:] + trained.log[-3000:]
    record = json.loads((trained.run_dir / "run.json").read_text())
    assert record["status"] == "succeeded" and record["exit_code"] == 0 and record["address_kind"] == "cluster"
    steps = metrics(trained.log)
    assert sorted(steps) == [1, 2], trained.log[-3000:]
    for step, values in steps.items():
        loss, grad = float(values["actor/pg_loss"]), float(values["actor/grad_norm"])
        assert math.isfinite(loss) and math.isfinite(grad) and grad > 0, (step, values)


def test_the_trainer_workers_ran_one_on_each_node(trained):
    nodes = {n["node_id"] for n in trained.nodes.state("nodes") if n["state"] == "ALIVE"}
    assert len(nodes) == 2
    workers = [a for a in trained.nodes.state("actors") if "WorkerDict" in a["class_name"]]
    # verl names its worker actors by resource pool and rank; one per GPU, the two GPUs on two nodes.
    assert len(workers) == 2, [(a["class_name"], a["node_id"]) for a in workers]
    assert {a["node_id"] for a in workers} == nodes
    # On loopback throughout: the job's driver (verl's main_ppo) dialled the head's own loopback
    # address, which Ray's job supervisor put in its RAY_ADDRESS.
    assert f"Using address {support.RayNodes.address(0)}:{trained.nodes.gcs} set in the environment" in trained.log
    print(f"two-node run: {trained.seconds:.1f} s; workers on nodes {sorted(a['node_id'][:8] for a in workers)}")


def test_each_checkpoint_holds_both_ranks_and_has_its_evidence(trained):
    assert (trained.step_dir / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    records = sorted((trained.bundle / "evidence").glob("[0-9]*.json"))
    assert len(records) == 2
    for path, step in zip(records, (1, 2)):
        folder = trained.step_dir / f"global_step_{step}"
        actor = folder / "actor"
        for rank in (0, 1):
            for kind in ("model", "optim", "extra_state"):
                assert (actor / f"{kind}_world_size_2_rank_{rank}.pt").is_file(), (actor, kind, rank)
        assert json.loads((actor / "fsdp_config.json").read_text()) == {"FSDP_version": 2, "world_size": 2}
        predicate = json.loads(base64.b64decode(json.loads(path.read_text())["payload"]))["predicate"]
        assert predicate["checkpoint"]["step"] == step and predicate["run"]["run_id"] == trained.run_dir.name
        layout = next(c for c in predicate["verdict"]["checks"] if c["id"] == "layout.actor")
        assert layout["status"] == "pass" and "all 2 rank shard(s)" in layout["detail"], layout
        on_disk = {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                   for p in folder.rglob("*") if p.is_file()}
        assert {r["name"]: r["digest"] for r in predicate["checkpoint"]["files"]["resources"]} == on_disk
    ok = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    assert ok.returncode == 0, ok.stderr
