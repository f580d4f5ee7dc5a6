"""A CPU platform for verl 0.9.1: test tooling, never part of tutorrl.

verl 0.9.1 has no CPU platform. Its platform registry
(``verl.plugin.platform``) knows nvidia, npu and rocm; on a machine with
none of them it falls back to ``nvidia``, so the device is ``"cuda"`` and the
process group asks for NCCL ("Distributed package doesn't have NCCL built
in"). verl's own hook loads this module instead: ``VERL_USE_EXTERNAL_MODULES=
verl_cpu_platform`` makes ``import verl`` import it (in every process that
imports verl: the job's driver, the TaskRunner, the workers), and
``VERL_PLATFORM=cpu`` selects the class it registers. Nothing in verl is
edited. What it patches, and why (each one stopped the run on its own):

1. The platform (``PlatformCPU``, registered as ``cpu``): the device is
   ``"cpu"`` (``torch.cpu``, ``current_device()`` is ``"cpu"`` so that
   ``torch.device(get_device_id())`` is the CPU), the collective backend is
   ``gloo``, the Ray resource is ``GPU`` (the embedded head declares one fake
   GPU, ``tutorrl run --num-gpus 1``, because verl places its workers on GPU
   bundles; they compute on the CPU all the same), there is no CUDA IPC
   (``is_ipc_supported()`` is false, so verl's weight transfer to vLLM goes
   through shared memory), and the profiler, allocator and cache calls do
   nothing. verl's engine registry has no engine for ``cpu``:
   ``VERL_ENGINE_DEVICE=cuda`` (the spec sets it) makes it hand out the FSDP
   engine, which then runs on this platform's device.
2. ``torch.distributed.init_process_group`` is called with
   ``"cpu:gloo,cpu:gloo"`` (verl names a CPU backend and the device's), which
   torch refuses ("Duplicate device type cpu"). A backend string whose every
   entry is ``cpu:...`` becomes ``"gloo"``, where CUDA is absent.
3. verl calls the device module for ``empty_cache``, ``memory_allocated``,
   ``memory_reserved``, ``max_memory_*``, ``mem_get_info``,
   ``get_device_name``, and, when it resumes, ``get_rng_state`` /
   ``set_rng_state`` (the checkpoint manager restores the ``cpu`` entry of the
   saved RNG state through it); ``torch.cpu`` has none of them. Added where
   missing: the memory figures are the process's resident and peak resident
   sizes, ``mem_get_info`` is the machine's (available, total),
   ``get_device_name`` is ``"cpu"``, the RNG calls are torch's own CPU RNG.

For verl 0.9.1 (read from its source; 0.9.0 has the same hook, not run).
vLLM's side (its CPU backend's weight prepacking, and its distribution name)
is in ``sitecustomize.py`` beside this file; the checkpoint engine the
separated-pool entry points (one-step-off) need on a CPU is in
``verl_cpu_checkpoint_engine.py``, which a spec names in
``checkpoint_engine.custom_backend_module``.

What a run with it proves: verl 0.9.1's real v1 trainer, TaskRunner, Ray
workers, FSDP2 actor update, agent loop, vLLM rollout server (vLLM's own
CPU engine), the weight sync from the actor to it, checkpoint manager and
``trainer.checkpoint_callback_class``; and tutorrl's run path and in-run
evidence on the checkpoints verl wrote. What it does not: GPU kernels (CUDA,
flash attention, vLLM's GPU model runner and CUDA graphs), NCCL collectives,
CUDA IPC weight transfer (the shared-memory path runs instead), vLLM's sleep
mode, more than one rank, and whether vLLM serves the pushed weights (vLLM
has no endpoint that shows them).
"""

from __future__ import annotations

import os
import resource
from contextlib import contextmanager

import torch
import torch.distributed as dist

from verl.plugin.platform import PlatformBase, PlatformRegistry


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


def _patch_torch_cpu() -> None:
    cpu = torch.cpu
    for name, fn in (("empty_cache", lambda: None), ("memory_allocated", _rss_bytes),
                     ("memory_reserved", _rss_bytes), ("max_memory_allocated", _peak_rss_bytes),
                     ("max_memory_reserved", _peak_rss_bytes), ("mem_get_info", _mem_get_info),
                     ("get_device_name", lambda device=None: "cpu"),
                     ("get_rng_state", lambda device="cpu": torch.get_rng_state()),
                     ("set_rng_state", lambda state, device="cpu": torch.set_rng_state(state))):
        if not hasattr(cpu, name):
            setattr(cpu, name, fn)


def _patch_init_process_group() -> None:
    original = dist.init_process_group
    if getattr(original, "_tutorrl_cpu", False):
        return

    def init_process_group(*args, **kwargs):
        in_kwargs = "backend" in kwargs
        backend = kwargs["backend"] if in_kwargs else (args[0] if args else None)
        if isinstance(backend, str) and "," in backend and not torch.cuda.is_available():
            if all(entry.split(":", 1)[0] == "cpu" for entry in backend.split(",")):
                if in_kwargs:
                    kwargs["backend"] = "gloo"
                else:
                    args = ("gloo", *args[1:])
        return original(*args, **kwargs)

    init_process_group._tutorrl_cpu = True
    dist.init_process_group = init_process_group


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's device calls answered for the CPU (see the module docstring)."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self):
        return torch.cpu

    def is_available(self) -> bool:
        return True

    def current_device(self):
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index) -> None:
        pass

    def synchronize(self, device_index=None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for an actor that holds one of the head's (fake) GPUs.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self):
        return None


_patch_torch_cpu()
_patch_init_process_group()
