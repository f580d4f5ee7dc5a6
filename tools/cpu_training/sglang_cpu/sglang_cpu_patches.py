"""Post-import patches that let sglang 0.5.14 serve a tiny text model on the CPU (test tooling only).

On the server's ``PYTHONPATH`` (with the stand-in ``torchvision`` beside it)
for tests/evidence/test_sglang_cpu_real.py; never part of tutorrl. No installed
file is edited: each patch is applied right after the module it patches is
imported (a ``sys.meta_path`` finder that wraps that module's loader), and
only when torch has no CUDA.

What it patches, and why:

- ``sglang.srt.utils.weight_checker``: ``_compute_checksum`` calls
  ``torch.cuda.synchronize()`` twice, unconditionally
  (``weight_checker.py:103`` and ``:129``), so on a CPU build every
  ``/weights_checker {"action": "checksum"}`` answers 400 "Torch not compiled
  with CUDA enabled". ``torch.cuda.synchronize`` becomes a no-op (there is
  nothing to wait for without CUDA). ``_check_tensors`` (the ``compare``
  action) calls ``.cuda()`` on both tensors (``weight_checker.py:186-187``);
  inside that function only, ``Tensor.cuda`` returns the CPU tensor itself.
- ``transformers.utils.import_utils.is_torchvision_available``: transformers
  asks ``importlib.util.find_spec("torchvision")``, which finds the stand-in
  (``torchvision/`` beside this file), and would then import torchvision's
  image code at module level (``image_utils.py:53``). It answers False, here
  and in its backend table, so transformers takes its no-torchvision paths.
- ``sglang.srt.configs.utils.register_image_processor``: without torchvision
  transformers refuses to register an image processor class
  (``AutoImageProcessor requires the Torchvision library``), and sglang
  registers some for multimodal configs at import (``configs/janus_pro.py:634``).
  That registration is skipped when transformers raises ImportError for it.

What a run with these patches does not prove:

- the GPU hash: on a CPU tensor sglang's ``tensor_hash`` is the first 8 bytes
  of sha256 of the tensor's bytes (``managers/mm_utils.py``), not the Triton
  kernel every GPU engine runs (tutorrl's ``sglang_gpu_hash``);
- GPU kernels, CUDA graphs, TP > 1 (one process, tp_size 1), NCCL;
- ``snapshot``/``compare`` semantics: ``_snapshot`` stores
  ``param.data.detach().cpu()``, which for a CPU tensor is the same storage, so
  the snapshot follows every later change and ``compare`` always agrees (a
  false pass). Only ``checksum`` is meaningful on the CPU.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _patch_weight_checker(module) -> None:
    import functools

    import torch

    if _cuda_available():
        return
    torch.cuda.synchronize = lambda device=None: None
    original = module._check_tensors

    @functools.wraps(original)
    def check_tensors(*args, **kwargs):
        cuda = torch.Tensor.cuda
        torch.Tensor.cuda = lambda self, *a, **k: self if self.device.type == "cpu" else cuda(self, *a, **k)
        try:
            return original(*args, **kwargs)
        finally:
            torch.Tensor.cuda = cuda

    module._check_tensors = check_tensors


def _patch_config_utils(module) -> None:
    import functools

    original = module.register_image_processor

    @functools.wraps(original)
    def register_image_processor(config, image_processor):
        try:
            return original(config, image_processor)
        except ImportError:
            return None  # no torchvision: that multimodal config's image processor stays unregistered

    module.register_image_processor = register_image_processor


def _patch_transformers_import_utils(module) -> None:
    def is_torchvision_available() -> bool:
        return False  # the torchvision on the path is the stand-in

    module.is_torchvision_available = is_torchvision_available
    mapping = getattr(module, "BACKENDS_MAPPING", None)
    if mapping is not None and "torchvision" in mapping:
        mapping["torchvision"] = (is_torchvision_available, mapping["torchvision"][1])


_HOOKS = {
    "transformers.utils.import_utils": _patch_transformers_import_utils,
    "sglang.srt.utils.weight_checker": _patch_weight_checker,
    "sglang.srt.configs.utils": _patch_config_utils,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, hook):
        self.inner, self.hook = inner, hook

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.hook(module)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds the hooked modules with the normal finders, then patches each once it has run."""

    def __init__(self, hooks: dict):
        self.hooks = hooks

    def find_spec(self, fullname, path, target=None):
        hook = self.hooks.get(fullname)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader, hook)
        return spec


def after_import(hooks: dict) -> None:
    """Run ``hooks[name](module)`` right after each named module is first imported (no file edited).

    Also what the SGLang training plug-in (tools/cpu_training/verl091_sglang) installs its own hooks with."""
    sys.meta_path.insert(0, _AfterImport(hooks))


after_import(_HOOKS)
