"""What SGLang served after each of verl's pushes, next to what verl trained: the demo's proof, shown.

    python tools/cpu_training/publication_table.py BUNDLE CHECKPOINTS

For every evidence record of BUNDLE (a run of specs/tiny_cpu_grpo_sglang.toml)
it prints the served checksum root -- the digest of the per-tensor checksums
SGLang's /weights_checker answered right after verl pushed that step, as
tutorrl recorded it -- beside the trained root this script derives itself
from verl's FSDP shard of the same step under CHECKPOINTS (every tensor,
fused as SGLang serves it, in its bf16 dtype, hashed as SGLang hashes a CPU
tensor), and PASS where they are equal and the record's checks hold.

Test tooling beside the CPU plug-ins, never part of tutorrl: it reads the
records as JSON and the shard with torch, and uses no tutorrl code, so it
checks tutorrl's record instead of repeating it. tests/e2e/test_real_training_sglang.py
derives the trained side with the same functions. Run it with a Python that
has torch (the training environment's).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

# How SGLang serves Qwen2's attention and MLP projections: fused, in this order (its weight loaders).
FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def served_from_shard(shard: Path) -> dict[str, str]:
    """The checksums SGLang serves for the actor saved in ``shard`` (one rank), derived from that file alone."""
    import logging

    import torch

    # torch says, for every DTensor shard loaded outside a process group, that torch.compile would fail.
    logging.getLogger("torch.distributed.device_mesh").setLevel(logging.ERROR)
    state = torch.load(shard, map_location="cpu", weights_only=False)
    # World size 1: each DTensor's local part is the whole tensor. SGLang holds them in the rollout's
    # dtype (verl's default bfloat16) and hashes a CPU tensor as the first 8 bytes of sha256.
    tensors = {name: (t.to_local() if hasattr(t, "to_local") else t).to(torch.bfloat16) for name, t in state.items()}
    out = {}
    for name, tensor in sorted(tensors.items()):
        fused = next(((f, parts) for f, parts in FUSED.items() if any(f".{p}." in name for p in parts)), None)
        if fused is not None:
            target, parts = fused
            part = next(p for p in parts if f".{p}." in name)
            if part != parts[0]:
                continue  # built once, from the first part's name
            tensor = torch.cat([tensors[name.replace(f".{part}.", f".{p}.")] for p in parts], dim=0)
            name = name.replace(f".{part}.", f".{target}.")
        raw = tensor.contiguous().view(torch.uint16).numpy().tobytes()
        out[name] = hashlib.sha256(raw).hexdigest()[:16]
    return out


def checksums_root(checksums: dict[str, str]) -> str:
    """A rank's checksum root as tutorrl's record writes it: sha256 of the canonical JSON of the sorted pairs."""
    pairs = json.dumps(sorted([n, c] for n, c in checksums.items()), separators=(",", ":"))
    return "sha256:" + hashlib.sha256(pairs.encode()).hexdigest()


def served_root(checksums: dict[str, str]) -> str:
    """The record's served root (`publication.served_digest`, the "served" of `tutorrl evidence`) of one
    engine with one TP rank: sha256 of the canonical JSON of [[role, pp rank, tp rank, sorted pairs]]."""
    served = [["target", 0, 0, sorted([n, c] for n, c in checksums.items())]]
    return "sha256:" + hashlib.sha256(json.dumps(served, separators=(",", ":")).encode()).hexdigest()


def statement(path: Path) -> dict:
    return json.loads(base64.b64decode(json.loads(path.read_text())["payload"]))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    bundle, checkpoints = Path(argv[0]), Path(argv[1])
    records = sorted((bundle / "evidence").glob("[0-9]*.json"))
    if not records:
        print(f"{bundle}: no evidence records", file=sys.stderr)
        return 1
    ok = True
    for path in records:
        predicate = statement(path)["predicate"]
        step = predicate["checkpoint"]["step"]
        (engine,) = predicate["publication"]["engines"]
        (rank,) = engine["ranks"]
        shards = list(checkpoints.rglob(f"global_step_{step}/actor/model_world_size_1_rank_0.pt"))
        if len(shards) != 1:
            print(f"   step {step}: {len(shards)} shards named global_step_{step} under {checkpoints}", file=sys.stderr)
            return 1
        trained = served_from_shard(shards[0])
        failed = [c["id"] for c in predicate["verdict"]["checks"] if c["status"] == "fail"]
        served = predicate["publication"]["served_digest"]
        same = served_root(trained) == served and checksums_root(trained) == rank["checksums_digest"]
        verdict = "PASS" if same and not failed else "FAIL"
        ok = ok and verdict == "PASS"
        print(f"   step {step}  served {served[:19]}  trained {served_root(trained)[:19]}  "
              f"{rank['tensor_count']}/{len(trained)} tensors  {verdict}" + (f"  ({', '.join(failed)})" if failed else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
