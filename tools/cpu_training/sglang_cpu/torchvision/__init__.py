"""A stand-in ``torchvision`` for serving a text model with sglang 0.5.14 on the CPU (test tooling only).

Why: sglang 0.5.14 imports torchvision unconditionally at start-up, for image
and video models only (``srt/utils/common.py:92`` ``from torchvision.io import
decode_jpeg``; ``srt/multimodal/internvl_utils.py`` ``import
torchvision.transforms``), and no torchvision wheel that loads against the CPU
torch 2.13 can be installed here (the index's builds are CUDA builds whose
``_C`` extension fails to load). A text model never calls any of it.

What it is: every ``torchvision.<anything>`` import succeeds and every
attribute is a class that raises when it is *used* (called), naming what was
used, so nothing silently computes a wrong image transform. It installs no
distribution metadata, so transformers keeps reporting torchvision as absent
(``is_torchvision_available()`` is False) and picks no torchvision code path.

What a run with it does not prove: anything about image or video inputs, or
about sglang's multimodal processors.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+tutorrl-stand-in"


class _Unavailable:
    """What every attribute of the stand-in is: importable, unusable."""

    _what = "torchvision"

    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"{self._what} was used, but this torchvision is tutorrl's CPU test stand-in "
                           "(tools/cpu_training/sglang_cpu): only text models can be served with it")


def _attribute(module: str, name: str) -> type:
    return type(name, (_Unavailable,), {"_what": f"{module}.{name}"})


class _Module(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _attribute(self.__name__, name)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves every ``torchvision.*`` submodule as a stand-in module."""

    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        return None


sys.meta_path.append(_Finder())
# This package itself answers attribute look-ups the same way.
sys.modules[__name__].__class__ = _Module
