"""How sglang builds each served parameter from a Hugging Face checkpoint, per TP rank.

An engine's `/weights_checker` hashes the parameters it holds, and for the
families verl's examples train those are not the checkpoint's tensors: q/k/v
are fused into `qkv_proj`, gate/up into `gate_up_proj`, and with tensor
parallelism T every rank holds its own slice. To compare a served checksum
with the checkpoint we rebuild that rank's tensor from the checkpoint's bytes
exactly as the engine's loaders do, then hash it.

Read from sglang 0.5.12 (the release verl 0.9.1 pins), GPU code paths:

- `layers/linear.py`
  - `QKVParallelLinear.__init__` (945-958): heads per rank H/T; when T >= KV
    each rank holds one KV head, shared by T/KV consecutive ranks
    (`num_kv_head_replicas`), else KV/T heads.
  - `QKVParallelLinear.weight_loader` (1241-1290, 1310): q, k and v land at
    offsets 0, H/T*D and (H/T+KV/T)*D of the rank's tensor; q's slice starts at
    rank*H/T*D, k's and v's at (rank // replicas)*kv_heads*D. The bias
    (`output_dim` 0) is built the same way.
  - `MergedColumnParallelLinear.weight_loader` (652-653, 672, 699): gate then
    up, each sliced to rows [rank*I/T, (rank+1)*I/T).
  - `RowParallelLinear.weight_loader` (1453, 1476): the input dim (1) is
    sliced; the bias is not sharded (1416).
- `layers/vocab_parallel_embedding.py`: rows are padded to a multiple of
  64 (`DEFAULT_VOCAB_PADDING_SIZE`, 45; `pad_vocab_size`, 54) and split
  evenly (`_get_indices`, 320-354); `weight_loader` copies the rank's real rows
  and fills the rest with zeros (470-471), so the padded tensor is determined
  and is compared whole.
- Models: `models/qwen2.py` (Qwen2 and Qwen2.5; `stacked_params_mapping`
  561-567, tied head 452-453), `models/qwen3.py` (593-600; tied head 484-485;
  `q_norm`/`k_norm` replicated, 112-113), `models/llama.py` (616-623; tied head
  483-484). Norms are plain replicated parameters.
- Pushes go through the same loaders: `update_weights_from_tensor` ends in
  `model.load_weights` (`model_executor/model_runner.py` 2076-2127; verl's
  optional sparse-delta loader is not modelled).
- `utils/weight_checker.py`: the checksum covers `named_parameters()` and
  buffers (146-149) minus non-persistent buffers (38-47); a tied `lm_head` is
  the embedding itself, so only `model.embed_tokens.weight` is served.

Covered: the three families above, any tp_size sglang can load them with.
Other architectures (MoE, vision towers, MLA...) have no rules here: the
caller compares only same-named tensors at tp_size 1 and records the rest as
not compared, with the reason. Not modelled, and not visible in a checksum
answer, so they would read as a mismatch: DP attention (`enable_dp_attention`
shards attention and embeddings over a smaller group), quantized engines, an
engine dtype other than the checkpoint's (or bf16 from fp32), the CPU-only
loader paths (`_is_cpu`: padding instead of narrowing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# `architectures[0]` of config.json -> sglang model file. Qwen2.5 checkpoints say Qwen2ForCausalLM.
FAMILIES = {
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "LlamaForCausalLM": "llama",
}

VOCAB_PADDING = 64  # vocab_parallel_embedding.py:45

# Served parameter name -> (how it is built, the checkpoint tensors it comes
# from as templates over the name's groups). First match wins. Names are the
# same in the three families (their stacked_params_mapping entries agree).
LAYOUT: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = tuple(
    (re.compile(pattern), kind, sources) for pattern, kind, sources in (
        (r"(.+)\.qkv_proj\.(weight|bias)", "qkv", (r"\1.q_proj.\2", r"\1.k_proj.\2", r"\1.v_proj.\2")),
        (r"(.+)\.gate_up_proj\.weight", "merged", (r"\1.gate_proj.weight", r"\1.up_proj.weight")),
        (r"(.+)\.(o_proj|down_proj)\.weight", "row", (r"\1.\2.weight",)),
        (r"(.+)\.(o_proj|down_proj)\.bias", "replicated", (r"\1.\2.bias",)),
        (r"model\.embed_tokens\.weight", "vocab", ("model.embed_tokens.weight",)),
        (r"lm_head\.weight", "vocab", ("lm_head.weight",)),
        (r"(.+\.(?:input_layernorm|post_attention_layernorm|q_norm|k_norm)|model\.norm)\.weight", "replicated",
         (r"\1.weight",)),
    )
)


class LayoutError(ValueError):
    """The checkpoint's tensors do not fit the layout: the message says why (recorded as a skip)."""


@dataclass(frozen=True, slots=True)
class ModelShape:
    architecture: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int | None
    tied: bool


def model_shape(config: object) -> ModelShape | str:
    """The shape a layout needs, from a HF config.json's content; a string says why there is none."""
    if not isinstance(config, dict):
        return "config.json is not a JSON object"
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch is None:
        return "config.json names no architecture"
    if arch not in FAMILIES:
        return f"architecture {arch[:80]!r} has no known sglang layout (covered: {', '.join(sorted(FAMILIES))})"

    def positive(key: str, default: int | None = None) -> int:
        v = config.get(key, default)
        if type(v) is not int or v <= 0:
            raise LayoutError(f"config.json {key} is {str(v)[:40]}, not a positive integer")
        return v

    try:
        hidden, heads = positive("hidden_size"), positive("num_attention_heads")
        kv = positive("num_key_value_heads", heads)
        # qwen2.py/qwen3.py/llama.py: head_dim from the config, else hidden // heads (null means absent).
        head_dim = positive("head_dim") if config.get("head_dim") is not None else hidden // heads
        vocab = positive("vocab_size") if "vocab_size" in config else None
    except LayoutError as exc:
        return str(exc)
    return ModelShape(arch, heads, kv, head_dim, hidden, vocab, config.get("tie_word_embeddings") is True)


def plan(served: str, shape: ModelShape | None) -> tuple[str, tuple[str, ...]] | None:
    """(kind, checkpoint names) a served parameter is built from; None when no rule names it."""
    for pattern, kind, sources in LAYOUT:
        m = pattern.fullmatch(served)
        if m:
            if served == "lm_head.weight" and shape is not None and shape.tied:
                # A tied head with its own parameter (pipeline-parallel only) is loaded from the embedding.
                return kind, ("model.embed_tokens.weight",)
            return kind, tuple(m.expand(s) for s in sources)
    return None


def _split(n: int, parts: int, what: str) -> int:
    if n % parts:
        raise LayoutError(f"{what} {n} does not divide by tp_size {parts}")
    return n // parts


def build(kind: str, sources: list[np.ndarray], shape: ModelShape | None, tp_rank: int, tp_size: int) -> np.ndarray:
    """Rank `tp_rank`'s tensor of `tp_size`, from the checkpoint tensors `plan` named (any element type)."""
    if not 0 <= tp_rank < tp_size:
        raise LayoutError(f"tp_rank {tp_rank} is outside tp_size {tp_size}")
    if kind == "replicated":
        return sources[0]
    if kind == "merged":
        parts = []
        for i, src in enumerate(sources):
            size = _split(src.shape[0], tp_size, f"rows of part {i}")
            parts.append(src[tp_rank * size:(tp_rank + 1) * size])
        return np.concatenate(parts, axis=0)
    if kind == "row":
        src = sources[0]
        if src.ndim != 2:
            raise LayoutError(f"a row-parallel weight has {src.ndim} dims, not 2")
        size = _split(src.shape[1], tp_size, "input dim")
        return np.ascontiguousarray(src[:, tp_rank * size:(tp_rank + 1) * size])
    if kind == "qkv":
        if shape is None:
            raise LayoutError("no model config: head counts unknown")
        q, k, v = sources
        h, kv, d = shape.num_heads, shape.num_kv_heads, shape.head_dim
        if q.shape[0] != h * d or k.shape[0] != kv * d or v.shape[0] != kv * d:
            raise LayoutError(f"q/k/v rows {q.shape[0]}/{k.shape[0]}/{v.shape[0]} do not fit {h} heads, "
                              f"{kv} kv heads of {d}")
        heads = _split(h, tp_size, "attention heads")
        if tp_size >= kv:
            replicas, kv_heads = _split(tp_size, kv, "tp_size over kv heads"), 1
        else:
            replicas, kv_heads = 1, _split(kv, tp_size, "kv heads")
        kv_at = tp_rank // replicas
        return np.concatenate([
            q[tp_rank * heads * d:(tp_rank + 1) * heads * d],
            k[kv_at * kv_heads * d:(kv_at + 1) * kv_heads * d],
            v[kv_at * kv_heads * d:(kv_at + 1) * kv_heads * d],
        ], axis=0)
    if kind == "vocab":
        src = sources[0]
        rows = src.shape[0]
        if shape is not None and shape.vocab_size is not None and shape.vocab_size != rows:
            raise LayoutError(f"{rows} rows, config.json vocab_size {shape.vocab_size}")
        padded = -(-rows // VOCAB_PADDING) * VOCAB_PADDING
        per = _split(padded, tp_size, "padded vocab")
        start = tp_rank * per
        real = src[min(start, rows):min(start + per, rows)]
        if real.shape[0] == per:
            return real
        out = np.zeros((per, *src.shape[1:]), dtype=src.dtype)
        out[: real.shape[0]] = real
        return out
    raise ValueError(kind)
