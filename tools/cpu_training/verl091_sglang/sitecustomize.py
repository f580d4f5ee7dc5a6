"""SGLang's side of the verl 0.9.1 CPU run with an SGLang rollout: test tooling, never part of tutorrl.

Loaded as ``sitecustomize`` by every Python process with this folder first on
``PYTHONPATH``: the job's driver, every Ray worker (the embedded head is
started with it), the SGLang server actor verl starts and the scheduler and
detokenizer processes SGLang spawns from it. The run's ``PYTHONPATH`` is
``tools/cpu_training/verl091_sglang:tools/cpu_training/sglang_cpu:tools/cpu_training/verl091``:
this file, then sglang's CPU patches and the ``torchvision`` stand-in, then
verl's CPU platform (``verl_cpu_platform``, which the spec's
``VERL_USE_EXTERNAL_MODULES`` names). ``verl091``'s own ``sitecustomize`` (vLLM's
GEMM patch) is shadowed by this one and never runs; its ``vllm-0.28.0.dist-info``
is on the path but read by nothing on the SGLang path (verl asks vLLM's version
only where it builds a vLLM rollout or quantises for it).

It edits no installed file. What it does, each needed on its own:

1. Applies ``sglang_cpu_patches`` (``tools/cpu_training/sglang_cpu``): the
   weight checker's ``torch.cuda.synchronize`` calls, transformers' torchvision
   probe, sglang's image-processor registrations. Without them
   ``/weights_checker`` answers 400 on a CPU build and sglang does not import.
2. ``sglang.srt.utils.common.MultiprocessingSerializer.serialize`` pickles by
   value where torch has no CUDA. verl's push (``ServerAdapter.update_weights``
   -> ``sglang.srt.weight_sync.utils.update_weights``) serialises every tensor
   with ``multiprocessing``'s ``ForkingPickler``, which for a CPU tensor sends a
   handle to shared memory. With torch's default sharing strategy
   (``file_descriptor``) SGLang's scheduler fails to fetch it
   (``AuthenticationError: digest sent was rejected``: the descriptor is passed
   through the sender's ``resource_sharer``, which authenticates with the
   sender's own key) and the server goes down; with ``file_system`` it works
   but leaves a ``torch_shm_manager`` daemon behind for every sender. By value
   (the standard pickler: ``torch.storage._load_from_bytes``, which SGLang's
   ``SafeUnpickler`` allows) nothing is shared and nothing is left running.
   The bytes then travel inside verl's HTTP request, base64-encoded, as a
   multi-node deployment's do. On a GPU verl sends CUDA IPC handles instead,
   so this path never runs there.

3. Only where a test sets ``CPU_PLUGIN_SERVED_LOG`` or ``CPU_PLUGIN_CORRUPT``:
   ``publication_probe.py`` beside this file wraps verl's push (a witness that
   reads the served checksums itself; a wrong publication on purpose).

What a run with it proves, and what not: see ``docs/notes/cpu-training.md``
("verl 0.9.1 with an SGLang rollout"). In short, verl's own SGLang server
actor, its ``update_weights`` push through ``/update_weights_from_tensor`` into
SGLang's own ``model.load_weights``, and SGLang's ``/weights_checker`` answering
from the live engine are real; CUDA IPC handles, the GPU checksum kernel, TP > 1
and torch_memory_saver's release of weights (off on the CPU: the spec sets
``enable_memory_saver = false``, so ``sleep``/``wake_up`` release nothing) are not.
"""

from __future__ import annotations

import os

import sglang_cpu_patches  # the sglang CPU patches (see its docstring), and its after-import hook

_TARGET = "sglang.srt.utils.common"
# The tests' instruments (publication_probe.py beside this file), only where a test asks for one.
_PROBE = "verl.workers.rollout.sglang_rollout.sglang_rollout"
_PROBED = any(os.environ.get(v) for v in ("CPU_PLUGIN_SERVED_LOG", "CPU_PLUGIN_CORRUPT"))


def _by_value(module) -> None:
    import io
    import pickle

    import torch

    if torch.cuda.is_available():
        return
    serializer = module.MultiprocessingSerializer
    b64encode = module.pybase64.b64encode

    def serialize(obj, output_str: bool = False):
        buf = io.BytesIO()
        pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        output = buf.getvalue()
        return b64encode(output).decode("utf-8") if output_str else output

    serializer.serialize = staticmethod(serialize)


def _probe(module) -> None:
    import publication_probe

    publication_probe.install(module)


_HOOKS = {_TARGET: _by_value, **({_PROBE: _probe} if _PROBED else {})}


sglang_cpu_patches.after_import(_HOOKS)
