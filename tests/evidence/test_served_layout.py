"""Served-vs-checkpoint comparison for fused and tensor-parallel tensors.

The served side is built here the way sglang 0.5.12's loaders fill each rank's
parameters (`load_weights` with `stacked_params_mapping`, then each layer's
`weight_loader`: allocate the rank's parameter, narrow the parameter to the
shard's offset, narrow the checkpoint tensor to the rank's slice, copy). It
is written from those loaders' steps, not by calling tutorrl's rebuild, and
served per rank by the contract test server (not sglang: what a real engine
serves is only checked on a GPU).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_contract_server import ContractServer
from evidence_helpers import make_bundle, make_fsdp_step, write_safetensors
from tutorrl.evidence.bundle import load_bundle
from tutorrl.evidence.record import read_records, record_checkpoint
from tutorrl.evidence.served_layout import build, model_shape, plan
from tutorrl.evidence.sglang import judge, read_engine, safetensors_sglang_hashes
from tutorrl.evidence.tensorhash import fp32_to_bf16_bytes, sglang_gpu_hash

ARCH = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}


def tiny_model(seed, *, family="qwen2", heads=4, kv=2, head_dim=4, hidden=16, inter=24, vocab=100, layers=2,
               tied=False, dtype="BF16"):
    """HF-named tensors (integer bit patterns for BF16, floats for F32) and the config.json verl writes."""
    rng = np.random.default_rng(seed)

    def t(*shape):
        if dtype == "F32":
            return rng.standard_normal(shape).astype("<f4")
        return rng.integers(0, 1 << 16, size=shape, dtype=np.uint16).astype("<u2")

    out = {"model.embed_tokens.weight": t(vocab, hidden), "model.norm.weight": t(hidden)}
    if not tied:
        out["lm_head.weight"] = t(vocab, hidden)
    for i in range(layers):
        p = f"model.layers.{i}."
        out |= {p + "self_attn.q_proj.weight": t(heads * head_dim, hidden),
                p + "self_attn.k_proj.weight": t(kv * head_dim, hidden),
                p + "self_attn.v_proj.weight": t(kv * head_dim, hidden),
                p + "self_attn.o_proj.weight": t(hidden, heads * head_dim),
                p + "mlp.gate_proj.weight": t(inter, hidden),
                p + "mlp.up_proj.weight": t(inter, hidden),
                p + "mlp.down_proj.weight": t(hidden, inter),
                p + "input_layernorm.weight": t(hidden),
                p + "post_attention_layernorm.weight": t(hidden)}
        if family == "qwen2":  # Qwen2 attention has a qkv bias (qwen2.py: bias=True)
            out |= {p + "self_attn.q_proj.bias": t(heads * head_dim), p + "self_attn.k_proj.bias": t(kv * head_dim),
                    p + "self_attn.v_proj.bias": t(kv * head_dim)}
        if family == "qwen3":
            out |= {p + "self_attn.q_norm.weight": t(head_dim), p + "self_attn.k_norm.weight": t(head_dim)}
    config = {"architectures": [ARCH[family]], "hidden_size": hidden, "num_attention_heads": heads,
              "num_key_value_heads": kv, "head_dim": head_dim, "intermediate_size": inter, "vocab_size": vocab,
              "num_hidden_layers": layers, "tie_word_embeddings": tied}
    return out, config


def sglang_rank(ckpt, config, tp_rank, tp_size):
    """One rank's parameters as sglang's loaders fill them (GPU path), from the loaders' own steps."""
    heads, kv, d = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    # QKVParallelLinear.__init__
    num_heads = heads // tp_size
    if tp_size >= kv:
        num_kv_heads, replicas = 1, tp_size // kv
    else:
        num_kv_heads, replicas = kv // tp_size, 1
    padded = (vocab + 63) // 64 * 64  # pad_vocab_size(vocab, 64)
    per = padded // tp_size
    any_t = next(iter(ckpt.values()))
    # Parameters start as garbage (torch.empty): a loader that misses a byte shows.
    params = {}

    def param(name, shape):
        if name not in params:
            params[name] = np.full(shape, 0x5A, dtype=any_t.dtype)
        return params[name]

    mapping = [("qkv_proj", "q_proj", "q"), ("qkv_proj", "k_proj", "k"), ("qkv_proj", "v_proj", "v"),
               ("gate_up_proj", "gate_proj", 0), ("gate_up_proj", "up_proj", 1)]
    qkv_rows = (num_heads + 2 * num_kv_heads) * d
    for name, w in ckpt.items():
        for param_name, weight_name, shard_id in mapping:
            if weight_name not in name:
                continue
            name = name.replace(weight_name, param_name)
            if param_name == "qkv_proj":
                p = param(name, (qkv_rows, *w.shape[1:]))
                offset = {"q": 0, "k": num_heads * d, "v": (num_heads + num_kv_heads) * d}[shard_id]
                size = (num_heads if shard_id == "q" else num_kv_heads) * d
                start = (tp_rank if shard_id == "q" else tp_rank // replicas) * size
                p[offset:offset + size] = w[start:start + size]
            else:
                size = inter // tp_size
                p = param(name, (2 * size, *w.shape[1:]))
                offset = shard_id * inter // tp_size  # sum(output_sizes[:id]) // tp_size
                p[offset:offset + size] = w[tp_rank * size:(tp_rank + 1) * size]
            break
        else:
            if name.endswith(("o_proj.weight", "down_proj.weight")):  # RowParallelLinear: input dim 1
                size = w.shape[1] // tp_size
                param(name, (w.shape[0], size))[:] = w[:, tp_rank * size:(tp_rank + 1) * size]
            elif name in ("model.embed_tokens.weight", "lm_head.weight"):  # VocabParallelEmbedding
                p = param(name, (per, hidden))
                start, end = min(tp_rank * per, vocab), min((tp_rank + 1) * per, vocab)
                p[:end - start] = w[start:end]
                p[end - start:] = 0
            else:
                param(name, w.shape)[:] = w
    return params


def served_bytes(params):
    """What a bf16 engine hashes: the parameters' bytes, fp32 cast to bf16."""
    return {n: fp32_to_bf16_bytes(p.tobytes()) if p.dtype == np.float32 else p.tobytes() for n, p in params.items()}


def write_export(root, ckpt, config, *, with_config=True):
    hf = root / "actor" / "huggingface"
    dtype = "F32" if next(iter(ckpt.values())).dtype == np.float32 else "BF16"
    write_safetensors(hf / "model.safetensors", {n: (dtype, a.tobytes(), list(a.shape)) for n, a in ckpt.items()})
    if with_config:
        (hf / "config.json").write_text(json.dumps(config))
    return [hf / "model.safetensors"]


def run_judge(files, shards, shape=">=0.5.21", base=None):
    with ContractServer({}, shape=shape, shards=shards) as srv:
        reading = read_engine(srv.url)
    pub, checks = judge([reading], safetensors_sglang_hashes(files), base)
    return pub, {c.id: c for c in checks}


@pytest.mark.parametrize("family,tied", [("qwen2", False), ("qwen3", True), ("llama", False)])
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_every_rank_of_every_served_tensor_matches(tmp_path, family, tied, tp):
    ckpt, config = tiny_model(1, family=family, tied=tied)
    files = write_export(tmp_path, ckpt, config)
    shards = [served_bytes(sglang_rank(ckpt, config, r, tp)) for r in range(tp)]
    pub, checks = run_judge(files, shards)
    assert checks["publication.matches_checkpoint"].status == "pass", checks["publication.matches_checkpoint"].detail
    assert checks["publication.checkpoint_coverage"].status == "pass", checks["publication.checkpoint_coverage"].detail
    # Every served tensor on every rank, fused ones included, was compared.
    n = len(shards[0])
    assert pub.vs_checkpoint.compared == n * tp and pub.vs_checkpoint.equal == n * tp
    assert any("qkv_proj" in k for k in shards[0]) and any("gate_up_proj" in k for k in shards[0])
    assert ("lm_head.weight" in shards[0]) is (not tied)
    assert ARCH[family] in checks["publication.matches_checkpoint"].detail


@pytest.mark.parametrize("tp,rank,name", [
    (1, 0, "model.layers.1.self_attn.qkv_proj.weight"),
    (2, 1, "model.layers.0.mlp.gate_up_proj.weight"),
    (4, 3, "model.embed_tokens.weight"),
    (4, 2, "model.layers.1.self_attn.o_proj.weight"),
    (2, 0, "model.layers.0.self_attn.qkv_proj.bias"),
])
def test_one_perturbed_shard_fails_naming_tensor_and_rank(tmp_path, tp, rank, name):
    ckpt, config = tiny_model(2)
    files = write_export(tmp_path, ckpt, config)
    shards = [served_bytes(sglang_rank(ckpt, config, r, tp)) for r in range(tp)]
    raw = bytearray(shards[rank][name])
    raw[-1] ^= 0x01  # the last byte: for the embedding on the last rank, a padding row
    shards[rank][name] = bytes(raw)
    pub, checks = run_judge(files, shards)
    label = name if tp == 1 else f"{name} (tp {rank}/{tp})"
    assert checks["publication.matches_checkpoint"].status == "fail"
    assert pub.vs_checkpoint.different == [label]
    assert label in checks["publication.matches_checkpoint"].detail


def test_kv_heads_replicated_over_ranks_are_told_apart(tmp_path):
    """kv 2, tp 4: ranks 0-1 hold kv head 0 and ranks 2-3 head 1; rank 1 holding head 1 is caught."""
    ckpt, config = tiny_model(3)
    files = write_export(tmp_path, ckpt, config)
    shards = [served_bytes(sglang_rank(ckpt, config, r, 4)) for r in range(4)]
    q = [n for n in shards[0] if n.endswith("qkv_proj.weight")]
    assert all(shards[0][n][-16 * 8:] == shards[1][n][-16 * 8:] for n in q)  # same v head on ranks 0 and 1
    wrong = sglang_rank(ckpt, config, 2, 4)  # kv head 1 ...
    right = sglang_rank(ckpt, config, 1, 4)
    qrows = config["head_dim"]  # one q head per rank
    for n in q:
        right[n][qrows:] = wrong[n][qrows:]  # ... with rank 1's own q head
    shards[1] = served_bytes(right)
    pub, checks = run_judge(files, shards)
    assert checks["publication.matches_checkpoint"].status == "fail"
    assert sorted(pub.vs_checkpoint.different) == sorted(f"{n} (tp 1/4)" for n in q)


def test_fp32_export_served_as_bf16(tmp_path):
    ckpt, config = tiny_model(4, dtype="F32")
    files = write_export(tmp_path, ckpt, config)
    shards = [served_bytes(sglang_rank(ckpt, config, r, 2)) for r in range(2)]
    pub, checks = run_judge(files, shards)
    assert checks["publication.matches_checkpoint"].status == "pass"
    assert pub.vs_checkpoint.compared == 2 * len(shards[0])


def test_only_rank_zero_answering_says_the_rest_are_not_covered(tmp_path):
    ckpt, config = tiny_model(5)
    files = write_export(tmp_path, ckpt, config)
    shards = [served_bytes(sglang_rank(ckpt, config, r, 4)) for r in range(4)]
    pub, checks = run_judge(files, shards, shape="0.5.12")
    assert checks["publication.matches_checkpoint"].status == "pass"
    assert "ranks [1, 2, 3] of tp_size 4" in checks["publication.matches_checkpoint"].detail
    assert checks["publication.tp_coverage"].status == "skipped"
    assert pub.vs_checkpoint.compared == len(shards[0])


def test_changed_from_base_compares_rebuilt_shards(tmp_path):
    ckpt, config = tiny_model(6)
    base_ckpt, _ = tiny_model(7)
    files = write_export(tmp_path / "ckpt", ckpt, config)
    base = safetensors_sglang_hashes(write_export(tmp_path / "base", base_ckpt, config))
    shards = [served_bytes(sglang_rank(ckpt, config, r, 2)) for r in range(2)]
    _, checks = run_judge(files, shards, base=base)
    assert checks["publication.changed_from_base"].status == "pass"
    stale = [served_bytes(sglang_rank(base_ckpt, config, r, 2)) for r in range(2)]
    _, checks = run_judge(files, stale, base=base)
    assert checks["publication.matches_checkpoint"].status == "fail"
    assert checks["publication.changed_from_base"].status == "fail"


def test_without_config_only_same_named_tensors_at_tp1_and_the_record_says_why(tmp_path):
    ckpt, config = tiny_model(8)
    files = write_export(tmp_path, ckpt, config, with_config=False)
    shards = [served_bytes(sglang_rank(ckpt, config, 0, 1))]
    pub, checks = run_judge(files, shards)
    # Norms and o_proj/down_proj keep their names at tp 1; fused and padded ones are not compared.
    assert checks["publication.matches_checkpoint"].status == "pass"
    assert pub.vs_checkpoint.compared == 1 + 2 * 4
    cover = checks["publication.checkpoint_coverage"]
    assert cover.status == "skipped" and "no config.json next to the safetensors files" in cover.detail
    assert "qkv_proj" in cover.detail or "gate_up_proj" in cover.detail
    shards = [served_bytes(sglang_rank(ckpt, config, r, 2)) for r in range(2)]
    pub, checks = run_judge(files, shards)
    assert checks["publication.matches_checkpoint"].status == "skipped"
    assert pub.vs_checkpoint.compared == 0


def test_an_unknown_architecture_is_named_as_not_covered(tmp_path):
    ckpt, config = tiny_model(9)
    config["architectures"] = ["DeepseekV3ForCausalLM"]
    files = write_export(tmp_path, ckpt, config)
    shards = [served_bytes(sglang_rank(ckpt, config, r, 2)) for r in range(2)]
    _, checks = run_judge(files, shards)
    assert checks["publication.matches_checkpoint"].status == "skipped"
    assert "'DeepseekV3ForCausalLM' has no known sglang layout" in checks["publication.checkpoint_coverage"].detail


def test_shapes_that_do_not_fit_are_skipped_with_the_reason(tmp_path):
    """tp 4 over 6 heads is not a layout sglang can load: skipped, not failed."""
    ckpt, config = tiny_model(10, heads=6, kv=2, head_dim=4, hidden=24)
    files = write_export(tmp_path, ckpt, config)
    served = served_bytes(sglang_rank(ckpt, config, 0, 2))
    shards = [{n: b for n, b in served.items() if "qkv" not in n} for _ in range(4)]
    shards[0]["model.layers.0.self_attn.qkv_proj.weight"] = b"\0" * 8
    pub, checks = run_judge(files, shards)
    assert "attention heads 6 does not divide by tp_size 4" in checks["publication.checkpoint_coverage"].detail


def test_record_reads_the_config_verl_writes(tmp_path):
    """End to end: actor/huggingface/config.json and model.safetensors of a verl-shaped step."""
    ckpt, config = tiny_model(11)
    bundle = make_bundle(tmp_path / "bundles")
    step = make_fsdp_step(tmp_path / "ckpts", 3, hf=False)
    write_export(step, ckpt, config)
    shards = [served_bytes(sglang_rank(ckpt, config, r, 2)) for r in range(2)]
    with ContractServer({}, shards=shards) as srv:
        record_checkpoint(load_bundle(bundle), "r", step, source="manual", finished=None, engines=[srv.url],
                          progress=False)
    s = read_records(bundle)[-1][1]
    checks = {c.id: c.status for c in s.predicate.verdict.checks}
    assert checks["publication.matches_checkpoint"] == "pass" and checks["publication.checkpoint_coverage"] == "pass"
    assert s.predicate.publication.vs_checkpoint.compared == 2 * len(shards[0])


@settings(max_examples=60, deadline=None)
@given(
    kv=st.sampled_from([1, 2, 4]), group=st.sampled_from([1, 2, 3]), head_dim=st.sampled_from([2, 4, 6]),
    tp=st.sampled_from([1, 2, 4, 8]), inter_per=st.integers(1, 3), vocab=st.integers(1, 300),
    family=st.sampled_from(sorted(ARCH)), tied=st.booleans(), seed=st.integers(0, 2**16),
)
def test_rebuild_equals_the_loaders_for_any_fitting_shape(kv, group, head_dim, tp, inter_per, vocab, family, tied, seed):
    heads = kv * group
    if heads % tp or (tp >= kv and tp % kv) or (tp < kv and kv % tp):
        return  # sglang refuses to load these (divide() asserts)
    if (vocab + 63) // 64 * 64 % tp:
        return
    ckpt, config = tiny_model(seed, family=family, heads=heads, kv=kv, head_dim=head_dim, hidden=8,
                              inter=inter_per * tp, vocab=vocab, layers=1, tied=tied)
    shape = model_shape(config)
    for r in range(tp):
        for name, want in sglang_rank(ckpt, config, r, tp).items():
            kind, sources = plan(name, shape)
            got = build(kind, [ckpt[s] for s in sources], shape, r, tp)
            assert got.shape == want.shape and sglang_gpu_hash(got.tobytes()) == sglang_gpu_hash(want.tobytes()), name
