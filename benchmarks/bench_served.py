"""Cost of rebuilding every served TP shard from a checkpoint and hashing it.

Generates a Qwen2-shaped bf16 safetensors export (with config.json) in a temp
dir, then times, in one run on the same files:

- the sglang checksum of every stored tensor as it is (the baseline: what a
  name-for-name comparison at tp_size 1 costs at most),
- `CheckpointReference.expected` for every served parameter of every rank at
  each tp_size (fused qkv/gate_up, slices, KV replication, vocab padding).

Usage: python benchmarks/bench_served.py [--size-gib 0.5] [--hidden 1024] [--tp 1,2,4] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import struct
import tempfile
import time
from pathlib import Path

import numpy as np



def _export(root: Path, size: int, hidden: int) -> tuple[list[Path], dict]:
    head_dim = 64 if hidden >= 256 else 16
    heads = hidden // head_dim
    kv = max(1, heads // 4)
    inter, vocab = hidden * 11 // 4 // 8 * 8, hidden * 31
    config = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": hidden, "num_attention_heads": heads,
              "num_key_value_heads": kv, "head_dim": head_dim, "intermediate_size": inter, "vocab_size": vocab,
              "tie_word_embeddings": False}
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "lm_head.weight": (vocab, hidden),
              "model.norm.weight": (hidden,)}
    per_layer = 2 * hidden * (heads * head_dim * 2 + kv * head_dim * 2 + 3 * inter)
    layers = max(1, (size - 2 * 2 * vocab * hidden) // per_layer)
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes |= {p + "self_attn.q_proj.weight": (heads * head_dim, hidden), p + "self_attn.q_proj.bias": (heads * head_dim,),
                   p + "self_attn.k_proj.weight": (kv * head_dim, hidden), p + "self_attn.k_proj.bias": (kv * head_dim,),
                   p + "self_attn.v_proj.weight": (kv * head_dim, hidden), p + "self_attn.v_proj.bias": (kv * head_dim,),
                   p + "self_attn.o_proj.weight": (hidden, heads * head_dim),
                   p + "mlp.gate_proj.weight": (inter, hidden), p + "mlp.up_proj.weight": (inter, hidden),
                   p + "mlp.down_proj.weight": (hidden, inter),
                   p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,)}
    header, off = {}, 0
    for name, shape in shapes.items():
        n = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    raw += b" " * ((-len(raw)) % 8)
    path = root / "model.safetensors"
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for name, shape in shapes.items():
            f.write(rng.integers(0, 1 << 16, size=shape, dtype=np.uint16).tobytes())
    (root / "config.json").write_text(json.dumps(config))
    return [path], config


def _served_names(config: dict, layers: int) -> list[str]:
    names = ["model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"]
    for i in range(layers):
        p = f"model.layers.{i}."
        names += [p + "self_attn.qkv_proj.weight", p + "self_attn.qkv_proj.bias", p + "self_attn.o_proj.weight",
                  p + "mlp.gate_up_proj.weight", p + "mlp.down_proj.weight", p + "input_layernorm.weight",
                  p + "post_attention_layernorm.weight"]
    return names


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gib", type=float, default=0.5)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--tp", default="1,2,4")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    from tutorrl.evidence.safetensors import read_header
    from tutorrl.evidence.sglang import safetensors_sglang_hashes
    from tutorrl.evidence.tensorhash import sglang_gpu_hash

    with tempfile.TemporaryDirectory() as tmp:
        files, config = _export(Path(tmp), int(args.size_gib * 1024**3), args.hidden)
        header = read_header(files[0])
        total = sum(t.nbytes for t in header.tensors)
        layers = sum(1 for t in header.tensors if t.name.endswith("input_layernorm.weight"))
        names = _served_names(config, layers)

        def baseline() -> None:
            with open(files[0], "rb") as f:
                for t in header.tensors:
                    f.seek(t.start)
                    sglang_gpu_hash(f.read(t.nbytes))

        def rebuild(tp: int):
            def run() -> None:
                ref = safetensors_sglang_hashes(files)
                expected, skipped = ref.expected([(n, r, tp) for n in names for r in range(tp)], sglang_gpu_hash)
                assert not skipped and len(expected) == len(names) * tp, skipped
            return run

        def best(fn) -> float:
            times = []
            for _ in range(max(1, args.repeat)):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            return min(times)

        base = best(baseline)
        rows = [("sglang hash of each stored tensor (baseline)", base)]
        for tp in (int(x) for x in args.tp.split(",")):
            rows.append((f"rebuild + hash every rank, tp_size {tp}", best(rebuild(tp))))
        print(f"export: {total / 1e9:.3f} GB bf16, {layers} layers, hidden {args.hidden}, best of {args.repeat}")
        print(f"{'what':<48} {'seconds':>9} {'GB/s of export':>15} {'x baseline':>11}")
        for what, s in rows:
            print(f"{what:<48} {s:>9.3f} {total / 1e9 / s:>15.3f} {s / base:>11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
