"""The gloo checkpoint engine of the CPU plug-in moves every weight exactly, across processes.

tools/cpu_training/verl091/verl_cpu_checkpoint_engine.py is what lets verl's
separated-pool entry points (one-step-off, fully-async) sync weights on a CPU;
the one-step-off training test shows the run goes through it, this shows the
bytes arrive: one sender and two receivers, each its own Python process of
the 0.9.1 training environment, driven the way verl's CheckpointEngineManager
drives them (prepare, build_topology, init_process_group, send/receive,
finalize), over real gloo on loopback. The weights cross several buckets and
one is larger than a bucket (verl's chunk splitting and merging); every
received tensor must equal the sent one bit for bit, twice in a row (verl
builds the group anew for every sync).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import support
from training_helpers import training_env

pytestmark = [pytest.mark.slow, pytest.mark.needs_train_env("TUTORRL_TRAIN091_PYTHON", "TUTORRL_TINY_DIR")]

PLUGIN = support.REPO / "tools" / "cpu_training" / "verl091"

# Run in each process: the weights (the same seed everywhere), then its role.
PROGRAM = r"""
import asyncio, hashlib, json, sys
import torch
import verl_cpu_checkpoint_engine as plugin
from verl_cpu_checkpoint_engine import GlooCheckpointEngine

role, syncs = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
weights = {"embed.weight": torch.randn(64, 40), "layer.0.bias": torch.randn(24),
           "layer.0.half": torch.randn(30, 6).to(torch.bfloat16), "big.weight": torch.randn(1000),
           "norm.weight": torch.ones(8)}
# What verl looks the backend up in (CheckpointEngineRegistry, as the plug-in imported it).
assert plugin.CheckpointEngineRegistry.get("gloo") is GlooCheckpointEngine
BUCKET = 2048  # bytes: big.weight (4000) spans buckets, the rest share them
out = {}
if role == "send":
    engine = GlooCheckpointEngine(bucket_size=BUCKET, is_master=True)
    for n in range(syncs):
        master = engine.prepare()
        actor, rollout = GlooCheckpointEngine.build_topology(1, 2, [master])
        print(json.dumps({"master": master, "rollout": rollout}), flush=True)
        engine.init_process_group(rank=actor["rank"][0], world_size=actor["world_size"][0], master=actor["master"][0])
        asyncio.run(engine.send_weights(iter(list(weights.items()))))
        engine.finalize()
else:
    engine = GlooCheckpointEngine(bucket_size=BUCKET)
    for n in range(syncs):
        topology = json.loads(sys.stdin.readline())
        rank = int(role)
        assert engine.prepare() is None
        r = topology["rollout"]
        engine.init_process_group(rank=r["rank"][rank], world_size=r["world_size"][rank], master=r["master"][rank])

        async def collect():
            return [(name, t.clone()) for name, t in [x async for x in engine.receive_weights()]]

        got = asyncio.run(collect())
        engine.finalize()
        assert [name for name, _ in got] == list(weights), [name for name, _ in got]
        for name, tensor in got:
            sent = weights[name]
            assert tensor.dtype == sent.dtype and tensor.shape == sent.shape, name
            assert torch.equal(tensor.view(-1).view(torch.uint8), sent.view(-1).view(torch.uint8)), name
        out[n] = hashlib.sha256(b"".join(t.view(-1).view(torch.uint8).numpy().tobytes() for _, t in got)).hexdigest()
    print(json.dumps(out), flush=True)
"""


def test_one_sender_two_receivers_get_every_byte_twice(tmp_path):
    python, _ = training_env("TUTORRL_TRAIN091_PYTHON", "tiny-qwen2-hd32/model.safetensors",
                             "the verl 0.9.1 CPU training environment")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(PYTHONPATH=str(PLUGIN), GLOO_SOCKET_IFNAME="lo", VERL_USE_EXTERNAL_MODULES="verl_cpu_platform",
               VERL_PLATFORM="cpu")
    syncs = 2

    def start(role: str) -> subprocess.Popen:
        return subprocess.Popen([python, "-c", PROGRAM, role, str(syncs)], cwd=tmp_path, env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    sender = start("send")
    receivers = [start(str(i)) for i in range(2)]
    try:
        for _ in range(syncs):
            line = sender.stdout.readline()
            assert line, sender.stderr.read()[-3000:]
            assert json.loads(line)["rollout"]["rank"] == [1, 2]
            for proc in receivers:
                proc.stdin.write(line)
                proc.stdin.flush()
        assert sender.wait(timeout=300) == 0, sender.stderr.read()[-3000:]
        digests = []
        for proc in receivers:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            digests.append(json.loads(out.strip().splitlines()[-1]))
        # Both receivers, both syncs: the same bytes.
        assert digests[0] == digests[1] and len(set(digests[0].values())) == 1
    finally:
        for proc in (sender, *receivers):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
