"""`tutorrl run --address` against a real two-node Ray cluster on this machine:
a head and a worker node (`ray start --address`), each with its own temp
folder and ports, on loopback only, token auth as a cluster would have it, and
1 GPU declared on each (`--num-gpus=1`; nothing here uses a GPU). A spec of
`resources.nodes = 2` x 1 trainer GPU fits exactly; one asking 2 GPUs a node
does not, and is refused with the numbers before anything is submitted.

Placement is proved, not assumed: the job (a stand-in launch.sh, as verl's
trainer would) reserves one GPU on each of two nodes in a STRICT_SPREAD
placement group, as verl's resource pools do per node, runs a task in each
and prints the node each ran on; the test compares those ids with the two
nodes Ray's state API lists.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest

import support
from runtime_helpers import clean_env, records_of, run_tutorrl

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray]

MARKER = "TUTORRL_TEST_MULTINODE"

PLACE_LAUNCH = """#!/usr/bin/env bash
set -euo pipefail
python - <<'PY'
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

ray.init()
pg = placement_group([{"GPU": 1, "CPU": 1}] * 2, strategy="STRICT_SPREAD")
ray.get(pg.ready(), timeout=120)

@ray.remote(num_gpus=1, num_cpus=1)
def where():
    return ray.get_runtime_context().get_node_id()

ids = ray.get([where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
    placement_group=pg, placement_group_bundle_index=i)).remote() for i in range(2)])
print("placed on nodes=[%s]" % ",".join(ids))
PY
"""


@pytest.fixture(scope="module")
def two_nodes():
    """A head and a worker node (support.RayNodes: token auth, a loopback dashboard, each node
    its own temp folder and ports), 2 CPUs and 1 GPU declared on each, from this venv's Ray."""
    from tutorrl.runtime import cluster

    # What the run tests' own environment carries (runtime_helpers.clean_env), so the job has it too.
    nodes = support.RayNodes(str(Path(sys.executable).parent / "ray"), MARKER,
                             env={"TUTORRL_STACK_CHECK": "skip", "TUTORRL_TRUST_DIGESTS": "1"})
    try:
        nodes.start_head("--num-gpus=1", "--num-cpus=2").add_worker("--num-gpus=1", "--num-cpus=2")
        yield {"url": nodes.url, "token": nodes.token, "headers": cluster.auth_headers(nodes.token)}
    finally:
        nodes.stop()


def _absolute(make_bundle, workdir, **kw) -> Path:
    return make_bundle(train=str(workdir / "data/train.parquet"), val=str(workdir / "data/val.parquet"),
                       output_dir=str(workdir / "out"), **kw)


def _state_nodes(two_nodes) -> list[dict]:
    req = urllib.request.Request(f"{two_nodes['url']}/api/v0/nodes?detail=1", headers=two_nodes["headers"])
    with urllib.request.urlopen(req, timeout=10) as resp:
        return [n for n in json.load(resp)["data"]["result"]["result"] if n["state"] == "ALIVE"]


def test_preflight_counts_both_nodes_and_the_job_spans_them(two_nodes, make_bundle, workdir):
    nodes = _state_nodes(two_nodes)
    assert len(nodes) == 2 and {n["resources_total"].get("GPU") for n in nodes} == {1.0}
    # Loopback only: each node has the address it was given, not one Ray chose for it.
    assert sorted(n["node_ip"] for n in nodes) == [support.RayNodes.address(0), support.RayNodes.address(1)]
    env = clean_env(RAY_AUTH_TOKEN=two_nodes["token"])

    # A dry run of the real launch.sh (verl composes its config): the GPUs it would need are 2,
    # and the cluster's 2 are the sum over both nodes.
    dry = run_tutorrl(["run", str(_absolute(make_bundle, workdir, nodes=2, gpus=1)), "--address",
                       two_nodes["url"], "--dry-run"], workdir, env, timeout=400)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert f"a real run needs 2 GPU, {two_nodes['url']} has 2" in dry.stderr

    # A real run of 2 nodes x 1 GPU passes preflight on those numbers, and its job's
    # placement (one GPU bundle per node, STRICT_SPREAD) lands on both nodes.
    bundle = _absolute(make_bundle, workdir, launch=PLACE_LAUNCH, nodes=2, gpus=1)
    real = run_tutorrl(["run", str(bundle), "--address", two_nodes["url"]], workdir, env, timeout=400)
    assert real.returncode == 0, real.stderr[-3000:]
    (record,) = records_of(bundle)
    assert record["status"] == "succeeded", record
    log = (bundle / "runs" / record["run_id"] / "job.log").read_text()
    (line,) = [s for s in log.splitlines() if s.startswith("placed on nodes=[")]
    placed = line[len("placed on nodes=["):-1].split(",")
    assert sorted(placed) == sorted(n["node_id"] for n in nodes)


def test_a_spec_needing_more_than_both_nodes_is_refused_before_submission(two_nodes, make_bundle, workdir):
    bundle = _absolute(make_bundle, workdir, launch=PLACE_LAUNCH, nodes=2, gpus=2)
    before = _jobs(two_nodes)
    proc = run_tutorrl(["run", str(bundle), "--address", two_nodes["url"]], workdir,
                       clean_env(RAY_AUTH_TOKEN=two_nodes["token"]))
    assert proc.returncode == 2, proc.stderr
    assert (f"the spec needs 4 GPU (resources.nodes 2 x trainer_gpus_per_node 2 + reward_gpus 0), "
            f"but {two_nodes['url']} has 2 GPU over 2 ALIVE node(s)") in proc.stderr
    assert records_of(bundle)[0]["status"] == "refused"
    assert _jobs(two_nodes) == before  # nothing reached the cluster


def _jobs(two_nodes) -> list[str]:
    req = urllib.request.Request(f"{two_nodes['url']}/api/jobs/", headers=two_nodes["headers"])
    with urllib.request.urlopen(req, timeout=10) as resp:
        return sorted(j.get("submission_id") or j.get("job_id") or "" for j in json.load(resp))
