"""CPU stand-in for verl 0.4.1 / 0.5.0: test tooling, never part of tutorrl.

verl 0.5.0 trains a tiny model on a machine without a GPU once three things
that assume a GPU are answered. Each, alone, stops the run; this module
answers them by patching two modules right after they are first imported. It
edits no file and changes nothing else. It is loaded as ``sitecustomize`` by
every Python process that has this folder on ``PYTHONPATH`` -- the job's
driver and every Ray worker, when the embedded head is started with it.

1. ``verl.utils.device.get_nccl_backend()`` raises ``RuntimeError("No
   available nccl backend found on device type cpu.")`` where neither CUDA nor
   an NPU is there (0.4.1, 0.5.0). Patched: it returns ``"gloo"`` there.
2. ``torch.distributed.init_process_group`` is then called with
   ``"cpu:gloo,cpu:gloo"`` (verl names the CPU backend and the device's), which
   torch refuses ("Duplicate device type cpu"). Patched: a backend string
   whose every entry is ``cpu:...`` becomes ``"gloo"``, on a machine without CUDA.
3. verl calls the device module (``get_torch_device()`` is ``torch.cpu`` here)
   for ``empty_cache``, ``memory_allocated``, ``memory_reserved``,
   ``max_memory_allocated``, ``max_memory_reserved``, ``mem_get_info`` and
   ``get_device_name``; ``torch.cpu`` has none of them. Added where missing:
   ``empty_cache`` does nothing, the memory figures are the process's resident
   and peak resident sizes (so verl's ``perf/max_memory_allocated_gb`` is the
   worker's peak RSS), ``mem_get_info`` is the machine's (available, total),
   ``get_device_name`` is ``"cpu"`` (verl's flops counter then knows no peak,
   and reports an MFU of 0).

Nothing here is used on 0.6.0 and later (they build ``"cpu:gloo,cpu:nccl"``
and offer no HF rollout) or on 0.2/0.3 (nccl and ``torch.cuda`` hard-coded);
on a machine with CUDA every patch steps aside.

What a run with it proves: verl's real trainer, Ray workers, HF rollout, FSDP2
actor update, checkpoint manager, resume and model merger, and tutorrl's run
path and evidence on the checkpoints verl wrote. What it does not: GPU
kernels, NCCL collectives, vLLM or SGLang rollouts, more than one rank.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import resource
import sys

_TARGETS = {}


def _rss_bytes(device=None) -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes(device=None) -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


def _mem_get_info(device=None) -> tuple[int, int]:
    fields = {}
    with open("/proc/meminfo") as fh:
        for line in fh:
            name, _, rest = line.partition(":")
            fields[name] = int(rest.split()[0]) * 1024
    return fields["MemAvailable"], fields["MemTotal"]


def _patch_torch(torch) -> None:
    cpu = torch.cpu
    for name, fn in (("empty_cache", lambda: None), ("memory_allocated", _rss_bytes),
                     ("memory_reserved", _rss_bytes), ("max_memory_allocated", _peak_rss_bytes),
                     ("max_memory_reserved", _peak_rss_bytes), ("mem_get_info", _mem_get_info),
                     ("get_device_name", lambda device=None: "cpu")):
        if not hasattr(cpu, name):
            setattr(cpu, name, fn)
    import torch.distributed as dist

    original = dist.init_process_group

    def init_process_group(*args, **kwargs):
        in_kwargs = "backend" in kwargs
        backend = kwargs["backend"] if in_kwargs else (args[0] if args else None)
        if isinstance(backend, str) and "," in backend and not torch.cuda.is_available():
            devices = [entry.split(":", 1)[0] for entry in backend.split(",")]
            if all(device == "cpu" for device in devices):
                if in_kwargs:
                    kwargs["backend"] = "gloo"
                else:
                    args = ("gloo", *args[1:])
        return original(*args, **kwargs)

    dist.init_process_group = init_process_group


def _patch_verl_device(module) -> None:
    original = module.get_nccl_backend

    def get_nccl_backend():
        if not getattr(module, "is_cuda_available", False) and not getattr(module, "is_npu_available", False):
            return "gloo"
        return original()

    module.get_nccl_backend = get_nccl_backend


_TARGETS = {"torch": _patch_torch, "verl.utils.device": _patch_verl_device}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, patch):
        self._loader, self._patch = loader, patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of a target module."""

    def find_spec(self, name, path, target=None):
        patch = _TARGETS.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


sys.meta_path.insert(0, _Finder())
