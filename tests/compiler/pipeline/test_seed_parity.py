"""Parity with the team's launcher (shared/seeds/000_*.txt, `build_verl_command`).

The seed is not part of the project. What it emits for each configuration is
recorded in golden/seed/<config>.json -- the configuration's inputs and the
seed's exact override list -- by `python tools/seed_golden.py`, which runs the
seed where the shared folder is available (`--check` reports drift). For verl
0.9.1, a spec equivalent to a seed configuration must give the same settings,
compared as the values Hydra's own parser reads -- except where the seed is
wrong; each such difference is named below with its reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import support
from tutorrl.compiler import compile_bytes, write_bundle

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "seed"  # tests/compiler/golden: tools/seed_golden.py writes it

# Every key the chess spec sets that the seed leaves to verl's defaults -- the
# spec says each one; nothing else is added (a spec emits only what it says).
EXPLICIT = {
    "trainer.project_name": "the spec names the tracker project instead of verl's 'verl_examples'",
    "trainer.experiment_name": "the spec names the run instead of verl's 'gsm8k'",
    "trainer.checkpoint_callback_class": "tutorrl's checkpoint evidence hook (the seed records no evidence)",
    # The seed is wrong here: it leaves rollout tensor parallelism at verl's
    # default of 2, which cannot divide its own 7 trainer GPUs.
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "seed leaves verl's default 2, which does not divide 7 GPUs",
}


def _golden(config: str) -> dict:
    path = GOLDEN / f"{config}.json"
    assert path.is_file(), f"{path} is missing; `python tools/seed_golden.py` writes it where the seed is available"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema"] == 1 and data["config"] == config
    assert data["argv"][:3] == ["python", "-m", "verl.trainer.main_ppo"]
    return data


def _spec_text(lora_rank: int = 0, student_model: str | None = None, attn: str | None = None) -> bytes:
    doc = support.spec_doc(support.example_spec("chess_tutor_grpo.toml"), env=support.Whole())
    if lora_rank:
        doc = support.spec_doc(doc, model={"lora": support.Whole(rank=lora_rank, alpha=64,
                                                                 target_modules=["q_proj", "v_proj"])})
    if attn:
        doc = support.spec_doc(doc, model={"attn_implementation": attn})
    if student_model:
        doc = support.spec_doc(doc, reward=support.Whole(plugin="chess-prompted", options={
            "table": "data/chess/reward_table.json", "student_model": student_model}),
            resources={"reward_gpus": 0, "trainer_gpus_per_node": 7})
    return support.spec_toml(doc).encode()


def _parsed(overrides: list[str]) -> dict[str, tuple[str, object]]:
    out = {}
    for text in overrides:
        kind, key, value = support.parse_override(text)
        assert key not in out, f"{key} set twice"
        out[key] = (kind, support.unescape_interpolation(value))
    return out


def _compare(seed_argv, ours_argv):
    seed, ours = _parsed(seed_argv), _parsed(ours_argv)
    for key, (kind, value) in seed.items():
        assert key in ours, f"the seed sets {key}; tutorrl does not"
        assert ours[key] == (kind, value), (key, ours[key], (kind, value))
    assert set(ours) - set(seed) == set(EXPLICIT), sorted(set(ours) - set(seed))
    return seed, ours


@pytest.mark.parametrize("config", ["simulator", "lora", "prompted"])
def test_same_settings_as_the_seed(config, tmp_path, standin_python):
    seed = _golden(config)
    assert not seed["inputs"]["extra_overrides"]
    bundle = write_bundle(compile_bytes(_spec_text(**seed["case"]), "parity.toml"), tmp_path).path
    ours_argv = standin_python.argv(bundle)
    _compare(seed["argv"][3:], ours_argv[4:])
    # The seed's runner puts this in the driver's environment only; tutorrl
    # sends it to the workers (runtime_env), where the simulator runs.
    env_vars = json.loads((bundle / "ray-job.json").read_text())["runtime_env"]["env_vars"]
    reward_sim_gpus = seed["inputs"]["training"]["gpu_layout"]["n_reward_sim_gpus"]
    assert ("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES" in env_vars) == (reward_sim_gpus > 0)


@pytest.mark.needs_verl
def test_seed_attn_override_is_wrong_and_tutorrl_is_right(tmp_path, standin_python):
    """The seed documents `...override_config.attn_implementation=sdpa`; verl 0.9.1 needs `+` there."""
    from hydra.errors import ConfigCompositionException

    seed = _golden("attn_sdpa")
    trap = "actor_rollout_ref.model.override_config.attn_implementation=sdpa"
    assert seed["inputs"]["extra_overrides"] == [trap] and seed["argv"][-1] == trap
    seed_argv = seed["argv"][3:]
    bundle = write_bundle(compile_bytes(_spec_text(**seed["case"]), "parity.toml"), tmp_path).path
    ours_argv = standin_python.argv(bundle)[4:]
    key = "actor_rollout_ref.model.override_config.attn_implementation"
    seed_parsed, ours_parsed = _parsed(seed_argv), _parsed(ours_argv)
    assert seed_parsed[key] == ("CHANGE", "sdpa") and ours_parsed[key] == ("ADD", "sdpa")
    with pytest.raises(ConfigCompositionException, match="To append to your config use"):
        support.compose_verl("ppo_trainer", seed_argv)
    config = support.compose_verl("ppo_trainer", ours_argv)
    assert support.lookup(config, key) == "sdpa"


def test_golden_files_are_the_tools_configurations():
    """Every golden file is one the tool writes, and its inputs match the spec the test builds."""
    names = sorted(p.stem for p in GOLDEN.glob("*.json"))
    assert names == ["attn_sdpa", "lora", "prompted", "simulator"]
    for name in names:
        data = _golden(name)
        case, training = data["case"], data["inputs"]["training"]
        assert training["actor_lora_rank"] == case["lora_rank"]
        assert (training["actor_lora_alpha"], training["actor_lora_target_modules"]) == (64, ["q_proj", "v_proj"])
        assert data["inputs"]["reward"]["student_model"] == case["student_model"]


def test_the_golden_tool_says_when_the_seed_is_not_there(tmp_path):
    import subprocess
    import sys

    tool = support.REPO / "tools" / "seed_golden.py"
    proc = subprocess.run([sys.executable, str(tool), "--check", "--seed", str(tmp_path / "none.txt")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no seed launcher at" in proc.stderr
