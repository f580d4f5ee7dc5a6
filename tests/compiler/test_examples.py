"""The example specs compile, and their committed bundles are current."""

from __future__ import annotations

import pytest

import support
from tutorrl.compiler import compile_bytes, verify_bundle
from tutorrl.contract import CONTENT_FILES


def test_the_issue_asks_for_these_examples():
    names = {p.stem for p in support.example_specs()}
    assert {"chess_tutor_grpo", "chess_tutor_prompted", "chess_tutor_lora", "chess_tutor_megatron_tp",
            "chess_tutor_wandb"} <= names


@pytest.mark.parametrize("spec", support.example_specs(), ids=lambda p: p.stem)
def test_committed_bundle_is_current(spec):
    compiled = compile_bytes(spec.read_bytes(), spec.name)
    committed = support.BUNDLES / compiled.id
    assert committed.is_dir(), f"{spec.name} has no committed bundle: run `tutorrl compile specs/{spec.name}`"
    loaded = verify_bundle(committed)
    for name in CONTENT_FILES:
        assert (committed / name).read_bytes() == compiled.files[name], \
            f"bundles/{compiled.id}/{name} is stale: run `tutorrl compile specs/{spec.name}`"
    assert loaded.manifest.experiment == compiled.manifest.experiment


# Families of launches (docs/sweeps.md): specs that extend an example and sweep it.
FAMILIES = sorted((support.SPECS / "families").glob("*.toml"))


def _family_ids() -> set[str]:
    from tutorrl.compiler.pipeline.family import compile_family

    return {launch.bundle.id for spec in FAMILIES for launch in compile_family(str(spec))}


@pytest.mark.parametrize("spec", FAMILIES, ids=lambda p: p.stem)
def test_committed_family_bundles_are_current(spec):
    from tutorrl.compiler.pipeline.family import compile_family

    launches = compile_family(str(spec))
    assert len(launches) > 1 and all(launch.point is not None for launch in launches)
    for launch in launches:
        committed = support.BUNDLES / launch.bundle.id
        assert committed.is_dir(), f"{spec.name} has no committed bundle for {launch.point.label}"
        verify_bundle(committed)
        # Every file, the manifest (with its sources and point) included.
        for name, data in launch.bundle.files.items():
            assert (committed / name).read_bytes() == data, f"bundles/{launch.bundle.id}/{name} is stale"


def test_no_orphan_bundles():
    expected = {compile_bytes(p.read_bytes(), p.name).id for p in support.example_specs()} | _family_ids()
    present = {p.name for p in support.BUNDLES.iterdir() if p.is_dir()}
    assert present == expected, f"orphans: {sorted(present - expected)}; missing: {sorted(expected - present)}"


def test_seed_layout_example_reserves_the_simulator_gpu():
    spec = (support.SPECS / "chess_tutor_grpo.toml").read_bytes()
    compiled = compile_bytes(spec, "g.toml")
    launch = compiled.files["launch.sh"].decode()
    assert "trainer.n_gpus_per_node=7 \\" in launch and "  reward.num_workers=1\n" in launch
    assert "'+reward.custom_reward_function.reward_kwargs.device=\"cuda:7\"'" in launch
    # The plug-in's GPU policy: Ray must leave the reserved card visible to the reward workers.
    assert "export RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES=1" in compiled.files["bundle.env"].decode()
    assert b'RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES = "1"' in compiled.files["spec.toml"]
