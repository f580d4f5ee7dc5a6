"""tutorrl's publication checks against a real sglang 0.5.14 server, on the CPU.

No stand-in server: the test starts sglang's own `launch_server` (the
environment `tools/dev.sh test` builds, TUTORRL_SGLANG_CPU_PYTHON: CPU torch
2.13, sglang 0.5.14 installed without its CUDA requirements) on loopback,
serving copies of the tiny head_dim-32 Qwen2 (TUTORRL_TINY_DIR), and drives
tutorrl's real code against it: `read_engine` and
`normalise_checksum_response` parse sglang's own `/weights_checker` answers,
`served_layout` rebuilds its fused tensors from the checkpoint, `judge`
compares them, and the in-run watch (`watch_from_bootstrap`,
`check_after_push`) reads the engine around real weight pushes
(`/update_weights_from_disk`, through sglang's own loaders).

What is not sglang's GPU behaviour, and so not proven here (see
tools/cpu_training/sglang_cpu/sglang_cpu_patches.py for the patches):
- the hash: for a CPU tensor sglang hashes with sha256 (first 8 bytes,
  tutorrl's `sglang_cpu_hash`), not the Triton kernel of every GPU engine
  (`sglang_gpu_hash`, held to sglang's kernel by test_tensorhash). The engine
  says it runs on the CPU (`/server_info`'s `device`), so `judge` rebuilds with
  `sglang_cpu_hash`, over an fp16 copy of the export (the engine serves the
  float32 checkpoint as fp16, sglang's "auto" dtype for fp32);
- GPU kernels, TP > 1 (one process, tp_size 1), NCCL;
- `snapshot`/`compare` (the sensitivity control): on a CPU tensor sglang's
  snapshot shares the served storage, so `compare` always agrees; only
  `checksum` is meaningful on the CPU, and the control is not run here;
- verl's push (`update_weights_from_tensor` from its rollout worker): the
  pushes here are `update_weights_from_disk`, whose loader is the same
  `model.load_weights`; verl's server actor is absent, so the version checks
  (`global_steps`) have nothing to read and are not asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import types
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import support
from tutorrl.evidence import publication, sglang
from tutorrl.evidence.schema import HASH_FUNCTION_CPU
from tutorrl.evidence.served_layout import build, model_shape, plan
from tutorrl.evidence.tensorhash import sglang_cpu_hash

pytestmark = [pytest.mark.slow, pytest.mark.needs_train_env("TUTORRL_SGLANG_CPU_PYTHON", "TUTORRL_TINY_DIR")]

SHIM = support.REPO / "tools" / "cpu_training" / "sglang_cpu"
START_TIMEOUT_S = 300
# The served (fused) names of the tiny Qwen2: what sglang's loader builds from q/k/v and gate/up.
FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def _environment() -> tuple[str, Path]:
    python, tiny = os.environ.get("TUTORRL_SGLANG_CPU_PYTHON"), os.environ.get("TUTORRL_TINY_DIR")
    if (not python or not tiny or not os.path.isfile(python)
            or not os.path.isfile(os.path.join(tiny, "tiny-qwen2-hd32", "model.safetensors"))):
        pytest.fail("the CPU sglang environment is not set up: `bash tools/dev.sh test` builds it and sets "
                    "TUTORRL_SGLANG_CPU_PYTHON and TUTORRL_TINY_DIR (tools/cpu_training/sglang_cpu)")
    return python, Path(tiny) / "tiny-qwen2-hd32"


def _load(model: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(model / "model.safetensors"))


def _variant(src: Path, dst: Path, change: dict[str, float], *, fp16: bool = False) -> Path:
    """A copy of the model with each named tensor scaled (and all of them cast to fp16 when asked)."""
    from safetensors.numpy import save_file

    shutil.copytree(src, dst)
    tensors = _load(src)
    for name, factor in change.items():
        tensors[name] = (tensors[name] * np.float32(factor)).astype(tensors[name].dtype)
    if fp16:
        tensors = {n: t.astype(np.float16) for n, t in tensors.items()}
        config = json.loads((dst / "config.json").read_text())
        config["dtype"] = "float16"
        (dst / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def _expected(model: Path) -> dict[str, str]:
    """The served checksums derived from the files alone: fp16 (what the engine holds), q/k/v and gate/up fused."""
    tensors = {n: t.astype(np.float16) for n, t in _load(model).items()}
    out = {}
    for name in sorted(tensors):
        fused = next(((f, parts) for f, parts in FUSED.items() if any(f".{p}." in name for p in parts)), None)
        if fused is None:
            out[name] = sglang_cpu_hash(np.ascontiguousarray(tensors[name]).tobytes())
            continue
        target, parts = fused
        part = next(p for p in parts if f".{p}." in name)
        if part != parts[0]:
            continue  # built once, from the first part's name
        served = name.replace(f".{part}.", f".{target}.")
        block = np.concatenate([tensors[name.replace(f".{part}.", f".{p}.")] for p in parts], axis=0)
        out[served] = sglang_cpu_hash(np.ascontiguousarray(block).tobytes())
    return out


# sglang 0.5.14 also serves gRPC on --port + 10000 and refuses to start when that passes 65535,
# which an ephemeral port (up to 60999 on Linux) does one start in five.
GRPC_OFFSET = 10000


def _free_port() -> int:
    """A free loopback port whose gRPC companion (port + GRPC_OFFSET) is a valid, free port too."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + GRPC_OFFSET > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + GRPC_OFFSET))
            except OSError:
                continue
        return port


def _get(url: str, timeout: float = 5.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except OSError:
        return 0


def _post(url: str, body: dict, timeout: float = 120.0) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def _stop(proc: subprocess.Popen) -> None:
    """End the server and every process it started (its own process group), whatever state it is in."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The launcher is gone; its scheduler and detokenizer children share its group.
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


@pytest.fixture(scope="module")
def engine(request):
    python, tiny = _environment()
    # Not under pytest's basetemp: a concurrent pytest run prunes old numbered folders there, and the
    # server reads its model files long after this fixture made them.
    root = Path(tempfile.mkdtemp(prefix="tutorrl-sglang-cpu-"))
    request.addfinalizer(lambda: shutil.rmtree(root, ignore_errors=True))
    model = _variant(tiny, root / "model-a", {})
    port = _free_port()
    log = root / "server.log"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
           "PYTHONPATH": str(SHIM), "SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"}
    started = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [python, "-m", "sglang.launch_server", "--model-path", str(model), "--device", "cpu",
             "--attention-backend", "torch_native", "--disable-cuda-graph", "--grammar-backend", "none",
             # Uncapped, sglang sizes its KV cache to the machine's memory (17 GB here).
             "--max-total-tokens", "4096", "--max-running-requests", "8",
             "--host", "127.0.0.1", "--port", str(port)],
            cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    request.addfinalizer(lambda: _stop(proc))
    url = f"http://127.0.0.1:{port}"
    # Ready once its own warm-up request has run: it logs that after /model_info first answers.
    deadline = started + START_TIMEOUT_S
    while b"ready to roll" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-4000:]
            pytest.fail(f"sglang did not come up (exit {proc.poll()}) within {START_TIMEOUT_S} s:\n{tail}")
        time.sleep(0.5)
    assert _get(url + "/model_info") == 200
    print(f"sglang 0.5.14 on the CPU ready in {time.monotonic() - started:.1f} s")
    return types.SimpleNamespace(url=url, root=root, tiny=tiny, model=model, log=log)


def _reference(engine, model: Path) -> sglang.CheckpointReference:
    export = _variant(model, engine.root / f"{model.name}-fp16-{time.monotonic_ns()}", {}, fp16=True)
    return sglang.safetensors_sglang_hashes([export / "model.safetensors"])


def test_checksums_are_the_checkpoints_as_served(engine):
    body = _post(engine.url + "/weights_checker", {"action": "checksum", **sglang.SELECTOR})
    shape, ranks = sglang.normalise_checksum_response(body)
    assert shape == "0.5.13-0.5.20"
    assert [(r.role, r.tp_rank, r.tp_size, r.dp_size) for r in ranks] == [("target", 0, 1, 1)]
    served = ranks[0].checksums
    expected = _expected(engine.model)
    assert served == expected
    assert {"model.layers.0.self_attn.qkv_proj.weight", "model.layers.1.mlp.gate_up_proj.weight"} <= served.keys()
    assert not any(".q_proj." in n or ".gate_proj." in n for n in served)

    # tutorrl's layout code names the same sources for every served tensor and rebuilds the same bytes.
    shape_of = model_shape(json.loads((engine.model / "config.json").read_text()))
    tensors = {n: t.astype(np.float16) for n, t in _load(engine.model).items()}
    for name, value in served.items():
        kind, sources = plan(name, shape_of)
        rebuilt = build(kind, [tensors[s].view("<u2") for s in sources], shape_of, 0, 1)
        assert sglang_cpu_hash(np.ascontiguousarray(rebuilt).tobytes()) == value, name

    reading = sglang.read_engine(engine.url, timeout=60)
    assert reading.observation.error is None
    assert reading.observation.kind == "sglang-http (unauthenticated)"
    assert reading.observation.weight_version == "default"
    assert reading.ranks[0].checksums == served
    # The engine says it runs on the CPU (/server_info), so its checksums are compared as sglang computes
    # them there (sha256), and the record names that function, not the GPU kernel's.
    assert reading.device == "cpu"

    pub, checks = sglang.judge([reading], _reference(engine, engine.model), None)
    assert pub.hash_function == HASH_FUNCTION_CPU
    status = {c.id: c for c in checks}
    assert status["publication.engines_answered"].status == "pass"
    assert "publication.real_engine" not in status  # not tutorrl's contract test server
    assert status["publication.tp_coverage"].status == "pass"
    assert status["publication.weight_version"].status == "pass"
    assert status["publication.matches_checkpoint"].status == "pass", status["publication.matches_checkpoint"].detail
    assert f"all {len(served)} served shards" in status["publication.matches_checkpoint"].detail
    assert status["publication.checkpoint_coverage"].status == "pass"


class _Manager:
    """verl's checkpoint manager as the watch sees it: replicas with an address, a push per step."""

    def __init__(self, url: str, models: dict[int, Path]):
        self.replicas = [types.SimpleNamespace(replica_rank=0, server_address=url.removeprefix("http://"),
                                               server_handle=None)]
        self.url, self.models, self.pushed = url, models, []

    def update_weights(self, global_steps=None):
        answer = _post(self.url + "/update_weights_from_disk", {"model_path": str(self.models[global_steps])})
        assert answer["success"] is True, answer
        self.pushed.append(global_steps)


def test_a_push_changes_exactly_the_tensors_it_changed(engine):
    a = engine.model
    qkv0 = "model.layers.0.self_attn.qkv_proj.weight"
    gate_up1 = "model.layers.1.mlp.gate_up_proj.weight"
    b = _variant(a, engine.root / "model-b", {"model.layers.0.self_attn.k_proj.weight": 2.0})
    c = _variant(b, engine.root / "model-c", {"model.layers.1.mlp.up_proj.weight": -1.0})
    manager = _Manager(engine.url, {1: b, 2: c, 3: c})
    trainer = types.SimpleNamespace(trainer_mode="sync", checkpoint_manager=manager, global_steps=0,
                                    config=types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(
                                        rollout=types.SimpleNamespace(name="sglang"))))
    before = sglang.read_engine(engine.url, timeout=60).ranks[0].checksums
    assert before == _expected(a)
    assert publication.watch_from_bootstrap(manager, trainer_mode="sync", lora=False, timeout=60, device="cpu") is None

    seen = {}
    for step in (1, 2, 3):
        trainer.global_steps = step
        assert publication.check_after_push(trainer, step, lambda o, step=step: seen.__setitem__(step, o),
                                            timeout=60) is None
        trainer.checkpoint_manager.update_weights(global_steps=step)  # the watch's wrapper, then sglang's push
    assert manager.pushed == [1, 2, 3]

    maps = {s: seen[s].readings[0].ranks[0].checksums for s in (1, 2, 3)}
    assert maps[1] == _expected(b) and maps[2] == _expected(c) and maps[3] == maps[2]
    assert {n for n in maps[1] if maps[1][n] != before[n]} == {qkv0}
    assert {n for n in maps[2] if maps[2][n] != maps[1][n]} == {gate_up1}
    checks = {s: {c.id: c for c in seen[s].checks} for s in (1, 2, 3)}
    assert checks[1]["publication.changed_from_bootstrap"].status == "pass"
    assert checks[1]["publication.changed_from_bootstrap"].detail.startswith("1 of 17 ")
    assert checks[1]["publication.changed_since_previous"].status == "skipped"
    assert checks[2]["publication.roster_stable"].status == "pass"
    assert checks[2]["publication.changed_since_previous"].status == "pass"
    assert seen[2].in_run.changed_since_previous == 1 and seen[2].in_run.previous_step == 1
    assert checks[3]["publication.roster_stable"].status == "pass"
    assert checks[3]["publication.changed_since_previous"].status == "fail"
    assert seen[3].in_run.changed_since_previous == 0
    assert any(f.startswith("publication.changed_since_previous") for f in seen[3].failed)

    # The served weights after the last push are the last checkpoint's, not the one before nor the base.
    reading = seen[3].readings[0]
    _, ok = sglang.judge([reading], _reference(engine, c), _reference(engine, a))
    ok = {x.id: x for x in ok}
    assert ok["publication.matches_checkpoint"].status == "pass", ok["publication.matches_checkpoint"].detail
    assert ok["publication.changed_from_base"].status == "pass"
    assert ok["publication.changed_from_base"].detail.startswith("2 of 17 ")
    _, stale = sglang.judge([reading], _reference(engine, b), None)
    stale = {x.id: x for x in stale}
    assert stale["publication.matches_checkpoint"].status == "fail"
    assert gate_up1 in stale["publication.matches_checkpoint"].detail
