"""Make the tiny assets a real verl training run on a CPU needs: a model, its
tokenizer, a data set and a reward, all built here (nothing is downloaded).

    python tools/cpu_training/make_assets.py OUT     # with the training environment's Python

Writes, under OUT:

* ``tiny-qwen2/``: a Qwen2 causal LM with random weights (2 layers, hidden 64,
  4 attention heads of 16, 2 key/value heads, ~115K parameters, seed 0) saved
  with ``save_pretrained``, and a byte-level BPE tokenizer trained here on the
  prompts (vocabulary 300; ``<|endoftext|>`` pads, ``<|im_end|>`` ends a turn)
  with a ChatML chat template, which verl's data set applies to each prompt;
* ``tiny-qwen2-hd32/``: the same shapes with 2 attention heads of 32 and one
  key/value head (the same 115,264 parameters, seed 0, the same tokenizer):
  vLLM's CPU attention has kernels for head sizes 32, 64, 80, ... only, so the
  verl 0.9.1 run with vLLM (specs/tiny_cpu_grpo_091.toml) needs it;
* ``data/train.parquet`` (48 rows) and ``data/val.parquet`` (16 rows) in verl's
  columns (``data_source``, ``prompt`` as chat messages, ``ability``,
  ``reward_model.ground_truth``, ``extra_info``): "What is a plus b?";
* ``reward.py``: the reward function (a copy of ``tiny_add_reward.py`` beside
  this file), which verl 0.5.0 loads from a file path.

The same OUT gives the same files (fixed seeds), and an OUT that already holds
a complete set (``.complete`` written last) is left as it is, so set-up can
call this every time. Runs with the training stack's Python: it needs torch,
transformers, tokenizers and pandas with pyarrow, which verl requires anyway.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK = ".complete"
HD32 = "tiny-qwen2-hd32"
# The exact prompt wording matters only in that the tokenizer is trained on it.
TRAIN_ROWS, VAL_ROWS = 48, 16
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def rows(split: str, count: int, offset: int) -> list[dict]:
    out = []
    for i in range(count):
        a, b = (offset + i) % 10, (offset + 3 * i) % 10
        out.append({
            "data_source": "tiny_add",
            "prompt": [{"role": "user", "content": f"What is {a} plus {b}? Answer with a number."}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(a + b)},
            "extra_info": {"split": split, "index": i},
        })
    return out


def tokenizer(corpus: list[str], folder: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)


def model(folder: Path, heads: int = 4, kv_heads: int = 2) -> int:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=512,
                         tie_word_embeddings=False, pad_token_id=0, eos_token_id=2, bos_token_id=None,
                         torch_dtype="float32")
    net = Qwen2ForCausalLM(config)
    net.save_pretrained(folder, safe_serialization=True)
    GenerationConfig(pad_token_id=0, eos_token_id=2, do_sample=True).save_pretrained(folder)
    return sum(p.numel() for p in net.parameters())


def build(out: Path) -> int:
    import pandas as pd

    train, val = rows("train", TRAIN_ROWS, 0), rows("test", VAL_ROWS, 100)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "data").mkdir(parents=True)
    corpus = [r["prompt"][0]["content"] for r in train + val] + [str(n) for n in range(19)]
    tokenizer(corpus, tmp / "tiny-qwen2")
    params = model(tmp / "tiny-qwen2")
    shutil.copytree(tmp / "tiny-qwen2", tmp / HD32)
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        (tmp / HD32 / name).unlink()
    model(tmp / HD32, heads=2, kv_heads=1)
    pd.DataFrame(train).to_parquet(tmp / "data" / "train.parquet")
    pd.DataFrame(val).to_parquet(tmp / "data" / "val.parquet")
    shutil.copyfile(HERE / "tiny_add_reward.py", tmp / "reward.py")
    (tmp / MARK).write_text(f"{params} parameters\n")
    # A half-made set is never seen under OUT: it appears whole, by rename.
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return params


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/cpu_training/make_assets.py OUT", file=sys.stderr)
        return 2
    out = Path(argv[0]).absolute()
    # A set made before the head_dim-32 model existed is made again (same seeds: the same files, and the new one).
    if (out / MARK).is_file() and (out / HD32 / "model.safetensors").is_file():
        print(f"tiny assets: {out} (already made)")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    params = build(out)
    print(f"tiny assets: {out} (a {params:,}-parameter Qwen2, {TRAIN_ROWS}+{VAL_ROWS} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
