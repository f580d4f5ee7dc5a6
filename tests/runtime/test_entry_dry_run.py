"""`tutorrl run --dry-run` of bundles whose entry point is not main_ppo: the real entry's Hydra composes them.

Real tutorrl (the command), a real embedded Ray head, the real launch.sh and the
real verl 0.9.1 of the test environment: each job starts the bundle's module
(`python -m verl.experimental...`), whose Hydra composes its own config with the
bundle's overrides and prints it (`--cfg all`). What the printed config holds
(the entry-only keys with the spec's values, Hydra's job named by the entry's
module file) could only come from that module.
"""

from __future__ import annotations

import sys

import pytest

import support
from runtime_helpers import clean_env, records_of, run_tutorrl
from tutorrl.compiler import compile_spec, write_bundle

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray, pytest.mark.needs_verl]


def test_a_fully_async_and_a_one_step_off_bundle_dry_run_against_their_own_entry_points(tmp_path):
    bundles = {name: write_bundle(compile_spec(support.SPECS / f"{name}_example.toml"), tmp_path / "bundles").path
               for name in ("fully_async", "one_step_off")}
    env = clean_env(TUTORRL_EMBEDDED_NUM_GPUS="0", TUTORRL_PYTHON=sys.executable, TUTORRL_TRUST_DIGESTS="0")
    proc = run_tutorrl(["run", *map(str, bundles.values()), "--dry-run"], tmp_path, env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    composed = {}
    for name, bundle in bundles.items():
        (record,) = records_of(bundle)
        assert record["status"] == "succeeded" and record["dry_run"] is True, record
        (run_dir,) = bundle.glob("runs/*/")
        composed[name] = ((run_dir / "verl-config.yaml").read_text(), (run_dir / "hydra-cfg-all.yaml").read_text())
    verl, hydra = composed["fully_async"]
    assert "\nasync_training:\n  staleness_threshold: 0.5\n  trigger_parameter_sync_step: 4\n  require_batches: 4\n" in verl
    assert "\nrollout:\n  nnodes: 1\n  n_gpus_per_node: 4\n" in verl
    assert "    name: fully_async_main\n" in hydra and "    config_name: fully_async_ppo_trainer\n" in hydra
    verl, hydra = composed["one_step_off"]
    assert "\nrollout:\n  nnodes: 1\n  n_gpus_per_node: 2\n" in verl and "\nasync_training:" not in verl
    assert "    config_name: one_step_off_ppo_trainer\n" in hydra
    assert "verl/experimental/one_step_off_policy/config" in hydra
