"""A checkpoint engine for verl 0.9.1 that moves weights over gloo: test tooling, never part of tutorrl.

Where the actor and the rollout do not share a process (verl's one-step-off and
fully-async entry points put them in separate resource pools), verl hands the
actor's weights to the rollout through a *checkpoint engine*
(``actor_rollout_ref.rollout.checkpoint_engine.backend``). The engines verl
0.9.1 ships all need an accelerator's transport: ``nccl`` (the one-step-off
default) imports cupy and opens a ``ray.util.collective`` NCCL group, ``nixl``,
``mooncake`` and ``kimi`` need RDMA libraries, ``hccl`` Ascend; ``naive`` only
works when both sides are one process. None can run on a CPU, and the first
weight sync fails before step 1.

verl has a plug-in point for exactly this: ``checkpoint_engine.custom_backend_module``
names a module that both sides import (``import_external_libs``, in the
actor worker and in the rollout's ``CheckpointEngineWorker``) before the
backend named by ``checkpoint_engine.backend`` is looked up in
``CheckpointEngineRegistry``. This module registers ``gloo``: the same
protocol as verl's NCCL engine -- actor rank 0 sends, every rollout worker
receives, the weights cut into buckets by verl's own ``split_weight_chunks``
and put back together by its ``merge_weight_chunks`` -- with a gloo process
group of its own (``ProcessGroupGloo`` on a ``TCPStore`` that actor rank 0
serves; the workers' default process groups are untouched) for the bucket
bytes, and the store for each bucket's table of contents. Nothing in verl is
patched or edited.

What a run with it proves: verl's separated weight-sync path -- the
``CheckpointEngineManager`` aborting and resuming the rollout, building the
group every sync, the actor's ``update_weights`` in send mode, the rollout's
``CheckpointEngineWorker`` feeding vLLM's server adapter -- on the CPU. What
it does not: NCCL or RDMA transfer, cupy buffers, multi-sender relays (one
actor rank sends here), and the bandwidth of any of them.
"""

from __future__ import annotations

import pickle
import socket
from datetime import timedelta
from typing import AsyncGenerator, Generator

import ray
import torch
import torch.distributed as dist

from verl.checkpoint_engine.base import (
    CheckpointEngine,
    CheckpointEngineRegistry,
    merge_weight_chunks,
    split_weight_chunks,
)

_TIMEOUT = timedelta(minutes=10)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@CheckpointEngineRegistry.register("gloo")
class GlooCheckpointEngine(CheckpointEngine):
    """Actor rank 0 broadcasts each bucket to the rollout workers over a private gloo group."""

    def __init__(self, bucket_size: int, is_master: bool = False, **_ignored) -> None:
        self.bucket_size = bucket_size
        self.is_master = is_master
        self.rank: int | None = None
        self.store = None
        self.group = None

    def prepare(self) -> dict | None:
        if not self.is_master:
            return None
        host = ray.util.get_node_ip_address().strip("[]")
        return {"host": host, "port": _free_port(host)}

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list):
        master = metadata[0]
        assert master is not None, "actor rank 0 must be the gloo checkpoint engine's master"
        world = 1 + rollout_world_size
        actor = {"rank": [0] + [-1] * (actor_wg_world_size - 1), "world_size": [world] * actor_wg_world_size,
                 "master": [master] * actor_wg_world_size}
        rollout = {"rank": list(range(1, world)), "world_size": [world] * rollout_world_size,
                   "master": [master] * rollout_world_size}
        return actor, rollout

    def init_process_group(self, rank: int, world_size: int, master: dict) -> None:
        # Built anew for every sync (verl calls prepare/init/finalize around each one).
        self.rank = rank
        if rank < 0:
            return
        self.store = dist.TCPStore(master["host"], master["port"], world_size, is_master=rank == 0,
                                   timeout=_TIMEOUT)
        self.group = dist.ProcessGroupGloo(self.store, rank, world_size, _TIMEOUT)

    def finalize(self) -> None:
        self.group = None
        self.store = None

    def _broadcast(self, bucket: torch.Tensor) -> None:
        self.group.broadcast(bucket, 0).wait()

    @torch.no_grad()
    async def send_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                           global_steps: int | None = None):
        assert self.rank is not None and self.rank <= 0, "rollout workers do not send weights"
        if self.rank < 0:
            # Producing each weight is collective over the actor group: walk it all the same.
            for _ in weights:
                pass
            return
        index, offset, table = 0, 0, {}
        bucket = torch.empty(self.bucket_size, dtype=torch.uint8)
        async for meta, chunk in split_weight_chunks(weights, self.bucket_size):
            if offset + meta.chunk_size > self.bucket_size:
                self._send_bucket(index, bucket, table, offset, last=False)
                index, offset, table = index + 1, 0, {}
            meta.offset = offset
            table[meta.name] = meta
            bucket[offset:offset + meta.chunk_size] = chunk.cpu()
            offset += meta.chunk_size
        self._send_bucket(index, bucket, table, offset, last=True)

    def _send_bucket(self, index: int, bucket: torch.Tensor, table: dict, length: int, last: bool) -> None:
        self.store.set(f"bucket/{index}", pickle.dumps({"table": table, "length": length, "last": last}))
        self._broadcast(bucket[:length])

    @torch.no_grad()
    async def receive_weights(self, global_steps: int | None = None) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        count, size = 0, 0
        async for name, weight in merge_weight_chunks(self._receive_chunks(), self.bucket_size):
            count, size = count + 1, size + weight.nbytes
            yield name, weight
        # One line per sync in the job's log (Ray forwards it): what the tests read to see every sync arrive.
        print(f"gloo checkpoint engine: rank {self.rank} received {count} tensors, {size} bytes, "
              f"for step {global_steps}", flush=True)

    async def _receive_chunks(self):
        assert self.rank is not None and self.rank > 0, "actor rank 0 does not receive weights"
        index = 0
        while True:
            header = pickle.loads(self.store.get(f"bucket/{index}"))
            # A fresh buffer per bucket: what is yielded are views into it, kept by the consumer.
            bucket = torch.empty(header["length"], dtype=torch.uint8)
            self._broadcast(bucket)
            for meta in header["table"].values():
                yield meta, bucket[meta.offset:meta.offset + meta.chunk_size]
            if header["last"]:
                return
            index += 1
