"""Helpers for the review tests: specs built as data, compiled in memory."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest
import tomli_w

import support
from tutorrl.review.sides import Side, spec_side

GOLDEN = Path(__file__).parent / "golden"
# Set to 1 to rewrite the golden files from the current output (then review the diff).
REGEN_ENV = "TUTORRL_REGEN_GOLDEN"

# A simulator-reward chess run, like the team's launcher: every section used,
# most verl settings left unset (verl's defaults).
BASE = support.spec_doc(
    experiment={"name": "chess-tutor-grpo", "project": "chess-tutor"},
    data={"train": "data/chess/train.parquet", "val": "data/chess/val.parquet", "train_batch_size": 56},
    model={"path": "models/tutor-sft-merged"},
    actor={"lr": 1e-6, "ppo_mini_batch_size": 28, "ppo_micro_batch_size_per_gpu": 4, "use_kl_loss": True},
    rollout={"engine": "sglang", "n": 8, "tensor_parallel": 1},
    trainer={"total_steps": 100, "loggers": ["console"]},
    resources={"trainer_gpus_per_node": 7, "reward_gpus": 1},
    reward=support.Whole(
        plugin="chess-simulator",
        options={"table": "data/chess/reward_table.json", "adapter": "models/sim/adapter",
                 "heads_checkpoint": "models/sim/heads.pt", "heads_metrics": "models/sim/heads_metrics.json",
                 "device": "cuda:7"},
    ),
    env={"set": {"TOKENIZERS_PARALLELISM": "false"}, "passthrough": []},
)


def base() -> dict:
    return support.spec_doc(BASE)


def with_(spec: dict, **dotted) -> dict:
    """A copy of ``spec`` with ``section__field=value`` replaced (``__`` separates levels; a table
    given as the value replaces the whole table)."""
    return support.spec_doc(spec, **support.nested(dotted, sep="__"))


def toml_bytes(spec: dict) -> bytes:
    return tomli_w.dumps(spec).encode()


@functools.lru_cache(maxsize=512)
def _side(raw: bytes, label: str) -> Side:
    return spec_side(raw, label)


def side(spec: dict, label: str = "spec.toml") -> Side:
    """The spec compiled in memory (cached: hypothesis revisits the same specs)."""
    return _side(toml_bytes(spec), label)


_ID = re.compile(r"\b[0-9a-f]{16}\b")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_COMPILER = re.compile(r'"tutorrl [^"]*"')


def masked(text: str) -> str:
    """Output with bundle ids, digests and the compiler version masked.

    Those change whenever the compiler's output does (a template edit), which
    is not what these golden files guard: they guard how a diff reads.
    """
    text = _DIGEST.sub("sha256:<digest>", text)
    text = _ID.sub("<id>", text)
    return _COMPILER.sub('"tutorrl <version>"', text)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    text = masked(text)
    if os.environ.get(REGEN_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no golden file {path.name}; run with {REGEN_ENV}=1 to write it, then review it")
    assert text == path.read_text(encoding="utf-8"), (
        f"output differs from golden/{name}; if the change is intended, rerun with {REGEN_ENV}=1 and review")
