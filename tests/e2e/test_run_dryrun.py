"""Every example spec, compiled for real and dry-run through a real Ray job with
the real verl (CPU install): verl's own Hydra composition validates every
override. One Ray head, started by this module, serves all of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray, pytest.mark.needs_verl]

ROOT = Path(__file__).resolve().parents[2]
# The examples for verl 0.9.1, this environment's verl. The CPU training specs are left out: they run
# for real, each in its own environment with its CPU plug-in on PYTHONPATH (tests/e2e/test_real_training.py
# for 0.5.0, test_real_training_091.py for 0.9.1, whose bundle env names a module only that plug-in has).
SPECS = [s for s in sorted((ROOT / "specs").glob("*.toml"))
         if 'verl = "0.9.1"' in s.read_text() and not s.name.startswith("tiny_cpu_")]
TUTORRL = [sys.executable, "-m", "tutorrl"]


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def head():
    from tutorrl.runtime.head import EmbeddedHead

    h = EmbeddedHead(run_id="tutorrl-e2e-dryrun", num_gpus=0)
    try:
        h.start()
        yield h
    finally:
        h.stop()


def _compile(spec: Path, out: Path) -> Path:
    proc = subprocess.run([*TUTORRL, "compile", str(spec), "--out", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip().splitlines()[-1])


def _prepare_cwd(bundle: Path, cwd: Path) -> dict[str, str]:
    """Placeholders for the spec's local data/model paths (a dry run reads none of
    them, but preflight insists they exist), and values for passthrough names."""
    from tutorrl.compiler import verify_bundle
    from tutorrl.runtime.preflight import split_verl_list

    loaded = verify_bundle(bundle, trust_digests=True)  # read for its spec; `run` judges the bundle
    for item in split_verl_list(loaded.spec.data.train) + split_verl_list(loaded.spec.data.val):
        if "://" not in item and not os.path.isabs(item):
            (cwd / item).parent.mkdir(parents=True, exist_ok=True)
            (cwd / item).write_bytes(b"")
    model = loaded.spec.model.path
    if "://" not in model and not os.path.isabs(model):
        (cwd / model).mkdir(parents=True, exist_ok=True)
    names = loaded.job["metadata"].get("tutorrl_passthrough", "")
    return {n: f"dummy-{n.lower()}" for n in names.split(",") if n}


def _dry_run(bundle: Path, cwd: Path, head, extra_env: dict[str, str]):
    return subprocess.run([*TUTORRL, "run", str(bundle), "--address", head.url, "--dry-run"], cwd=cwd,
                          env=_env(RAY_AUTH_TOKEN=head.token, **extra_env), capture_output=True, text=True,
                          timeout=300)


def _summary(proc, bundle: Path, record: dict, standin_python, cwd: Path, env: dict | None = None) -> Path:
    """The dry run's three-line summary, checked against what launch.sh really passes verl."""
    # After -m <entry module> --config-name NAME; Hydra's own settings (an entry point's hydra.searchpath)
    # are not the task's overrides verl reports.
    overrides = [o for o in standin_python.argv(bundle, env=env)[4:] if not o.startswith("hydra.")]
    assert len(overrides) > 20
    run_dir = bundle / "runs" / record["run_id"]
    assert (f"dry run succeeded: verl 0.9.1 (the bundle's target release) composed its config and "
            f"accepted all {len(overrides)} overrides") in proc.stderr
    lines = proc.stderr.splitlines()
    (first,) = [i for i, line in enumerate(lines) if "dry run succeeded" in line]
    # Then what it proved and what it did not, the config's path and the log's; an embedded
    # head is stopped after all of it is said.
    assert lines[first + 1].startswith("tutorrl: proved: ") and lines[first + 2].startswith("tutorrl: not proved")
    assert f"composed its config with all {len(overrides)} overrides" in lines[first + 1]
    shown = dict(line.removeprefix("tutorrl: ").split(": ", 1) for line in lines[first + 3:first + 5])
    assert (cwd / shown["full composed config"]).resolve() == (run_dir / "verl-config.yaml").resolve()
    assert (cwd / shown["job log"]).resolve() == (run_dir / "job.log").resolve()
    # verl's config is in the record, not on the terminal.
    config = (run_dir / "verl-config.yaml").read_text()
    assert "actor_rollout_ref:" in config and "\ntrainer:" in config and "\nhydra:" not in config
    assert "actor_rollout_ref:" not in proc.stdout and len(proc.stdout.splitlines()) < 20
    return run_dir / "verl-config.yaml"


def test_the_examples_are_there():
    assert len(SPECS) >= 5


@pytest.mark.parametrize("spec", SPECS, ids=[s.stem for s in SPECS])
def test_example_spec_dry_runs_with_real_verl(spec, head, tmp_path, standin_python):
    bundle = _compile(spec, tmp_path / "bundles")
    env = _prepare_cwd(bundle, tmp_path)
    proc = _dry_run(bundle, tmp_path, head, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (record,) = [json.loads(p.read_text()) for p in bundle.glob("runs/*/run.json")]
    assert record["status"] == "succeeded" and record["dry_run"] is True
    assert record["message"].startswith("dry run succeeded: verl 0.9.1")
    _summary(proc, bundle, record, standin_python, tmp_path, env)
    assert record["bundle"].startswith("sha256:" + bundle.name)
    for value in env.values():
        assert value not in (bundle / "runs" / record["run_id"] / "run.json").read_text()


def test_verl_rejection_surfaces_as_failed_run(head, tmp_path):
    """A key verl does not have reaches verl. The compiler refuses such keys, so
    the bundle is made bad by hand: one override line is added to launch.sh and
    the bundle re-sealed with the compiler's own `reseal` so that its digests
    hold (a test hook; a real user cannot get here without a tampered bundle,
    and then only with --trust-digests)."""
    from tutorrl.compiler import compile_bytes, write_bundle
    from tutorrl.compiler.bundle.manifest import reseal

    compiled = compile_bytes(SPECS[0].read_bytes(), SPECS[0].name)
    launch = compiled.files["launch.sh"].decode()
    marker = "  trainer.total_training_steps="
    assert marker in launch
    bad_launch = launch.replace(marker, "  trainer.no_such_key_in_verl=1 \\\n" + marker, 1).encode()
    bad = write_bundle(reseal(compiled, launch_sh=bad_launch), tmp_path / "bundles").path

    # Resealed: `run` accepts it only on its digests alone, as a user must ask.
    env = {**_prepare_cwd(bad, tmp_path), "TUTORRL_TRUST_DIGESTS": "1"}
    proc = _dry_run(bad, tmp_path, head, env)
    assert "accepted on its digests alone" in proc.stderr
    assert proc.returncode not in (0, 2), proc.stderr
    assert "no_such_key_in_verl" in proc.stdout  # verl's own message, streamed
    (record,) = [json.loads(p.read_text()) for p in bad.glob("runs/*/run.json")]
    assert record["status"] == "failed" and record["exit_code"] == proc.returncode
    log = (bad / "runs" / record["run_id"] / "job.log").read_text()
    assert "Could not override 'trainer.no_such_key_in_verl'" in log or "no_such_key_in_verl" in log


def test_readme_demo_path_embedded_dry_run_without_data(tmp_path, standin_python):
    """The README's main job: compile the chess tutor spec and dry-run it on an
    embedded head started by tutorrl, on a machine that has none of its data.
    (tests/e2e/test_dev_demo.py runs `tools/dev.sh demo` itself.)"""
    bundle = _compile(ROOT / "specs" / "chess_tutor_grpo.toml", tmp_path / "bundles")
    proc = subprocess.run([*TUTORRL, "run", str(bundle), "--dry-run"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "a dry run reads no data, a real run would be refused" in proc.stderr
    (record,) = [json.loads(p.read_text()) for p in bundle.glob("runs/*/run.json")]
    assert record["address_kind"] == "embedded" and record["status"] == "succeeded" and record["dry_run"] is True
    config = _summary(proc, bundle, record, standin_python, tmp_path)
    assert "checkpoint_callback_class: tutorrl.evidence.callback.EvidenceCallback" in config.read_text()
