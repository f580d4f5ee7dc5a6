"""pyproject's [megatron] extra with verl 0.9.1's CPU stack (this test
environment): installed with pip into a folder of the test's own (no
dependencies: torch, numpy and packaging, all that megatron-core and mbridge
declare outside their own extras, are the [verl] stack's, and the test checks
they meet what those two ask), then verl's Megatron engine and the modules
preflight checks for `strategy = "megatron"` (runtime/stacks/stacks.toml)
imported with that folder on the path, in a fresh interpreter. Transformer
Engine and Apex are not part of it: megatron-core falls back without them on
the CPU, and on a GPU node they are built for its CUDA.

The install needs a package index (about 20 s with a warm cache); where pip
cannot reach one the test is skipped with pip's reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest

import support

pytestmark = [pytest.mark.slow, pytest.mark.wheels]

EXTRA = tomllib.loads((support.REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["megatron"]
STACKS = tomllib.loads((support.REPO / "runtime" / "stacks" / "stacks.toml").read_text())
ENGINE = ["verl.workers.engine.megatron", "verl.workers.engine.megatron.transformer_impl"]

PROBE = r"""
import importlib, importlib.metadata as md, json, sys
from packaging.requirements import Requirement
unmet = []
for dist in ("megatron-core", "mbridge"):
    for text in md.requires(dist) or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # a requirement of one of the package's own extras
        try:
            have = md.version(req.name)
        except md.PackageNotFoundError:
            have = None
        if have is None or not req.specifier.contains(have, prereleases=True):
            unmet.append(f"{dist} needs {text}, this stack has {have}")
imported = []
for name in sys.argv[1:]:
    importlib.import_module(name)
    imported.append(name)
print(json.dumps({"unmet": unmet, "imported": imported,
                  "versions": {d: md.version(d) for d in ("megatron-core", "mbridge", "einops", "verl", "torch")}}))
"""


def test_the_megatron_extra_imports_verls_megatron_engine_with_the_cpu_stack(tmp_path):
    assert [r.split("==")[0] for r in EXTRA] == ["megatron-core", "mbridge", "einops"]
    target = tmp_path / "megatron"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          "--no-deps", "--target", str(target), *EXTRA], capture_output=True, text=True, timeout=600)
    if pip.returncode != 0:
        pytest.skip(f"pip could not install {' '.join(EXTRA)} (exit {pip.returncode}): {pip.stderr[-400:]}")
    checked = STACKS["release"]["0.9.1"]["variant"]["megatron"]["modules"]
    env = dict(os.environ, PYTHONPATH=str(target))
    probe = subprocess.run([sys.executable, "-c", PROBE, *checked, *ENGINE], env=env, capture_output=True,
                           text=True, timeout=300, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["unmet"] == []
    assert found["imported"] == [*checked, *ENGINE]
    assert found["versions"]["verl"] == "0.9.1"
    assert {d: found["versions"][d] for d in ("megatron-core", "mbridge", "einops")} == dict(
        r.split("==") for r in EXTRA)
    # Without einops (mbridge imports it undeclared), the import preflight checks fails --
    # shown where this stack has no einops of its own.
    import importlib.util

    if importlib.util.find_spec("einops") is not None:
        return
    for path in target.iterdir():
        if path.name.startswith("einops"):
            import shutil

            shutil.rmtree(path)
    without = subprocess.run([sys.executable, "-c", "import mbridge"], env=env, capture_output=True, text=True,
                             timeout=300, cwd=tmp_path)
    assert without.returncode != 0 and "No module named 'einops'" in without.stderr
