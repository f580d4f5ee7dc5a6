"""Instruments for the tests of the SGLang run: an independent witness, and a wrong publication on purpose.

Test tooling, never part of tutorrl, and off unless asked for: ``sitecustomize``
beside this file imports it only where one of these variables is set (the
test sets them in ``tutorrl run``'s environment, which the embedded Ray head
and so verl's workers inherit). Both wrap verl 0.9.1's own push,
``verl.workers.rollout.sglang_rollout.sglang_rollout.ServerAdapter.update_weights``
(in the hybrid worker that holds the actor), and act after it returns, on the
worker that talks to the server (TP rank 0).

- ``CPU_PLUGIN_SERVED_LOG=FILE``: the witness. After every push it asks the
  server for its checksums itself (``POST /weights_checker {"action":
  "checksum"}`` with ``urllib``, no tutorrl code) and appends one JSON line,
  ``{"global_steps": N, "checksums": {name: hex16}}``, so the test can compare
  what the engine served at each step with the checkpoint verl saved, without
  trusting tutorrl's reading of either.
- ``CPU_PLUGIN_CORRUPT=STEP:NAME``: the wrong publication. After verl's push
  of step STEP it pushes one more tensor through the same path sglang's
  ``update_weights`` takes (``/update_weights_from_tensor`` into
  ``model.load_weights``): the tensor NAME as verl just sent it, plus 0.5. So
  the engine then serves, for that one tensor, something the trainer never
  held, exactly as a buggy or partial push would leave it.
"""

from __future__ import annotations

import json
import os
import urllib.request

_SERVED_LOG = os.environ.get("CPU_PLUGIN_SERVED_LOG") or None
_CORRUPT = os.environ.get("CPU_PLUGIN_CORRUPT") or None
TARGET = "verl.workers.rollout.sglang_rollout.sglang_rollout"


def _corruption() -> tuple[int, str] | None:
    if _CORRUPT is None:
        return None
    step, _, name = _CORRUPT.partition(":")
    return int(step), name


def _served_checksums(engine) -> dict[str, str]:
    url = f"http://{engine.server_args.host}:{engine.server_args.port}/weights_checker"
    request = urllib.request.Request(url, data=json.dumps({"action": "checksum"}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        body = json.load(answer)
    # sglang 0.5.13-0.5.20: {"success", "ranks": [{"checksums": {...}, ...}]}; one rank at TP 1.
    (rank,) = body["ranks"]
    return dict(rank["checksums"])


def install(module) -> None:
    import torch

    from sglang.srt.weight_sync.utils import update_weights as sgl_update_weights
    from verl.workers.rollout.utils import ensure_async_iterator

    adapter = module.ServerAdapter
    original = adapter.update_weights
    corruption = _corruption()

    async def _capturing(weights, name: str, captured: dict):
        async for item in ensure_async_iterator(weights):
            if item[0] == name:
                captured[name] = item[1].detach().clone()
            yield item

    async def update_weights(self, weights, global_steps=None, **kwargs):
        captured: dict = {}
        corrupt = corruption is not None and global_steps == corruption[0]
        if corrupt:
            weights = _capturing(weights, corruption[1], captured)
        result = await original(self, weights, global_steps=global_steps, **kwargs)
        leader = self._engine is not None and self._is_server_tp_leader()
        if corrupt:
            if corruption[1] not in captured:
                raise RuntimeError(f"CPU_PLUGIN_CORRUPT: verl pushed no tensor named {corruption[1]!r}")
            wrong = captured[corruption[1]] + torch.tensor(0.5, dtype=captured[corruption[1]].dtype)
            await sgl_update_weights(engine=self._engine, params_batch=[(corruption[1], wrong)],
                                     device_mesh_key="infer_tp", device_mesh=self.device_mesh)
            if leader:
                await self._engine.flush_cache()
                print(f"CPU_PLUGIN_CORRUPT: after verl's push of step {global_steps}, {corruption[1]} was "
                      f"pushed again plus 0.5", flush=True)
        if _SERVED_LOG is not None and leader:
            line = {"global_steps": global_steps, "checksums": _served_checksums(self._engine)}
            with open(_SERVED_LOG, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, sort_keys=True) + "\n")
        return result

    adapter.update_weights = update_weights
