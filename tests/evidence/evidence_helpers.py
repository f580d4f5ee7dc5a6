"""Builders for verl-shaped checkpoint trees, safetensors files and real compiled bundles."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from tutorrl.compiler import compile_bytes, verify_bundle, write_bundle

EXAMPLE_SPEC = "chess_tutor_grpo.toml"  # under specs/


def write_safetensors(path: Path, tensors: dict[str, tuple[str, bytes, list[int]]], *, pad: int = 8) -> None:
    header, blobs, off = {}, [], 0
    for name, (dtype, data, shape) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header).encode()
    raw += b" " * ((-len(raw)) % pad)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def model_tensors(scale: int) -> dict[str, tuple[str, bytes, list[int]]]:
    """A tiny llama-shaped export: bf16 norms, an fp32 down_proj, a padded embedding."""
    bf16 = (np.arange(16, dtype=np.uint16) * scale).astype("<u2").tobytes()
    f32 = (np.arange(12, dtype=np.float32) * scale).astype("<f4").tobytes()
    emb = (np.ones(10, dtype=np.uint16) * scale).astype("<u2").tobytes()
    return {
        "model.norm.weight": ("BF16", bf16, [16]),
        "model.layers.0.mlp.down_proj.weight": ("F32", f32, [3, 4]),
        "model.embed_tokens.weight": ("BF16", emb, [5, 2]),
    }


def make_fsdp_step(root: Path, step: int, *, world: int = 2, scale: int | None = None, hf: bool = True,
                   tracker: bool = True, data_pt: bool = True) -> Path:
    step_dir = root / f"global_step_{step}"
    actor = step_dir / "actor"
    (actor / "huggingface").mkdir(parents=True, exist_ok=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}))
    (actor / "huggingface" / "config.json").write_text("{}")
    for r in range(world):
        for kind in ("model", "optim", "extra_state"):
            (actor / f"{kind}_world_size_{world}_rank_{r}.pt").write_bytes(os.urandom(2048))
    if hf:
        write_safetensors(actor / "huggingface" / "model.safetensors", model_tensors(scale or step))
    if data_pt:
        (step_dir / "data.pt").write_bytes(b"dataloader")
    if tracker:
        (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    return step_dir


def make_bundle(out_root: Path, output_dir: str = "ckpts", model_path: str = "base") -> Path:
    """Compile the example spec with these paths and write it under `out_root`.

    Returns the real bundle folder (`out_root/<id>`), which `verify_bundle` accepts.
    """
    import support  # here, not at the top: a job's Ray actor imports this module with only tests/evidence on its path

    text = support.spec_toml(support.example_spec(EXAMPLE_SPEC), trainer={"output_dir": output_dir},
                             model={"path": model_path})
    compiled = compile_bytes(text.encode(), "evidence-test.toml")
    result = write_bundle(compiled, out_root)
    assert result.path.name == compiled.id
    return result.path


def digest_of(bundle: Path) -> str:
    """The bundle's digest, as the compiler verifies it (not as evidence reads it)."""
    return verify_bundle(bundle).manifest.digest
