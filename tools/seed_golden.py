#!/usr/bin/env python3
"""Record what the team's launcher (the seed) emits, as golden files the tests read.

    python tools/seed_golden.py          # (re)write tests/compiler/golden/seed/<config>.json
    python tools/seed_golden.py --check  # exit 1 and name every file that differs from the seed

The seed -- one Python function, ``build_verl_command`` -- is not part of this
repository. It lies in the project's shared folder beside the checkout
(``../shared/seeds/``, or a folder further up for a worktree), and this tool
runs only where that folder exists. It
executes the seed as is (its one project import stubbed) for each
configuration below and writes, per configuration, the inputs it was given and
the exact override list it returned. tests/compiler/pipeline/test_seed_parity.py
compares tutorrl's compile output against those files, so the suite passes in
a bare clone and a change in the seed shows up here as drift.

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parent.parent
SEED_NAME = "000_a545e9dd78b5ccb1.txt"


def _find_seed() -> Path:
    """``shared/seeds/<name>`` in the nearest folder above the checkout that has it
    (beside the main checkout, or above a worktree kept in a sub-folder)."""
    for folder in REPO.parents:
        candidate = folder / "shared" / "seeds" / SEED_NAME
        if candidate.is_file():
            return candidate
    return REPO.parent / "shared" / "seeds" / SEED_NAME

GOLDEN = REPO / "tests" / "compiler" / "golden" / "seed"
SCHEMA = 1

# The team's chess-tutor run (RLConfig / RewardConfig fields the seed reads).
TRAINING = {
    "playground_train": "data/chess/playground_train.parquet",
    "playground_val": "data/chess/playground_val.parquet",
    "actor_sft_base": "models/tutor-sft-merged",
    "output_dir": "checkpoints/chess-tutor/grpo",
    "train_batch_size": 56, "ppo_mini_batch_size": 28, "ppo_micro_batch_size_per_gpu": 4,
    "advantage_estimator": "grpo", "use_kl_in_reward": False, "use_kl_loss": True,
    "kl_loss_type": "low_var_kl", "kl_loss_coef": 0.001, "entropy_coeff": 0.0,
    "actor_learning_rate": 1e-6, "rollout_engine": "sglang", "rollouts_per_prompt": 8,
    "rollout_temperature": 1.0, "rollout_top_p": 1.0, "rollout_top_k": -1,
    "max_prompt_length": 1024, "max_response_length": 512,
    "actor_lora_rank": 0, "actor_lora_alpha": 64, "actor_lora_target_modules": ["q_proj", "v_proj"],
    "total_steps": 200, "save_freq": 20, "test_freq": 20, "seed": 7,
    "gpu_layout": {"n_trainer_gpus": 7, "n_reward_sim_gpus": 1},
}
REWARD = {
    "student_model": None, "reward_table_path": "data/chess/reward_table.json",
    "mate_clip_cp": 1000, "scale_cp": 400.0, "illegal_reward": -1.0,
    "reward_simulator_path": "models/student-sim/adapter",
    "heads_checkpoint_path": "models/student-sim/heads.pt",
    "heads_metrics_path": "models/student-sim/heads_metrics.json",
    "reward_device": "cuda:7", "alpha_style": 0.5, "alpha_perception": 0.3, "style_gate_preferred": None,
}
ATTN_TRAP = "actor_rollout_ref.model.override_config.attn_implementation=sdpa"

# name -> (what the parity test builds its spec from, changes to TRAINING, changes to REWARD, extra_overrides)
CONFIGS: dict[str, tuple[dict, dict, dict, list[str]]] = {
    "simulator": ({"lora_rank": 0, "student_model": None, "attn": None}, {}, {}, []),
    "lora": ({"lora_rank": 32, "student_model": None, "attn": None}, {"actor_lora_rank": 32}, {}, []),
    "prompted": ({"lora_rank": 0, "student_model": "Qwen/Qwen2.5-7B-Instruct", "attn": None},
                 {"gpu_layout": {"n_trainer_gpus": 7, "n_reward_sim_gpus": 0}},
                 {"student_model": "Qwen/Qwen2.5-7B-Instruct"}, []),
    # The seed's own advice for a box without FlashAttention, as its docstring spells it.
    "attn_sdpa": ({"lora_rank": 0, "student_model": None, "attn": "sdpa"}, {}, {}, [ATTN_TRAP]),
}


def _namespace(value):
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespace(v) for v in value]
    return value


def load_seed(path: Path) -> types.ModuleType:
    """The seed's module, executed with its one project import stubbed."""
    source = path.read_text(encoding="utf-8").split("\n", 1)[1]  # the first line is the file's name
    stub = types.ModuleType("studentsim.tutor_rl.rl_config")
    stub.RewardConfig = stub.RLConfig = object
    saved = {name: sys.modules.get(name) for name in
             ("studentsim", "studentsim.tutor_rl", "studentsim.tutor_rl.rl_config", "seed_verl_runner")}
    try:
        sys.modules["studentsim"] = types.ModuleType("studentsim")
        sys.modules["studentsim.tutor_rl"] = types.ModuleType("studentsim.tutor_rl")
        sys.modules["studentsim.tutor_rl.rl_config"] = stub
        module = types.ModuleType("seed_verl_runner")
        sys.modules[module.__name__] = module  # dataclasses looks its module up
        exec(compile(source, str(path), "exec"), module.__dict__)
        return module
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def record(seed: types.ModuleType, name: str) -> dict:
    case, training_changes, reward_changes, extra = CONFIGS[name]
    training = {**TRAINING, **training_changes}
    reward = {**REWARD, **reward_changes}
    argv = list(seed.build_verl_command(training=_namespace(training), reward=_namespace(reward),
                                        extra_overrides=list(extra)).argv)
    return {
        "schema": SCHEMA,
        "source": f"shared/seeds/{SEED_NAME}: build_verl_command(training, reward, extra_overrides)",
        "regenerate": "python tools/seed_golden.py",
        "config": name,
        "case": case,
        "inputs": {"training": training, "reward": reward, "extra_overrides": list(extra)},
        "argv": argv,
    }


def encode(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any golden file differs")
    parser.add_argument("--seed", type=Path, default=None,
                        help="the seed launcher (default: shared/seeds/%s above the checkout)" % SEED_NAME)
    args = parser.parse_args(argv)
    args.seed = args.seed or _find_seed()

    if not args.seed.is_file():
        print(f"seed_golden: no seed launcher at {args.seed}; this tool runs only in a checkout with the "
              "project's shared folder beside it (the golden files in the repo are what the tests use)",
              file=sys.stderr)
        return 2
    seed = load_seed(args.seed)
    drift = []
    for name in CONFIGS:
        text = encode(record(seed, name))
        path = GOLDEN / f"{name}.json"
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old == text:
            continue
        if args.check:
            drift.append(f"{path.relative_to(REPO)}: {'missing' if old is None else 'differs from the seed'}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    stray = sorted(p.name for p in GOLDEN.glob("*.json") if p.stem not in CONFIGS) if GOLDEN.is_dir() else []
    drift += [f"{(GOLDEN / s).relative_to(REPO)}: no such configuration in this tool" for s in stray]
    if drift:
        print("seed_golden: drift (run `python tools/seed_golden.py` and review the diff):", file=sys.stderr)
        for line in drift:
            print(f"  {line}", file=sys.stderr)
        return 1
    if args.check:
        print(f"seed_golden: {len(CONFIGS)} golden files match the seed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
