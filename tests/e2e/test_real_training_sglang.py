"""Publication proven for real: verl 0.9.1 trains with an SGLang rollout, and every push is checked.

No stand-in trainer and no stand-in engine. `tutorrl compile` of
specs/tiny_cpu_grpo_sglang.toml, then `tutorrl run --num-gpus 1` on the
embedded head: the job is the bundle's launch.sh running verl 0.9.1's
`main_ppo` -- the v1 trainer, the FSDP2 actor, the agent loop, and an SGLang
0.5.14 server that verl's own `SGLangHttpServer` actor starts on the CPU --
in the environment `tools/dev.sh test` builds (TUTORRL_TRAIN_SGLANG_PYTHON:
verl 0.9.1, sglang 0.5.14 without its CUDA packages, the CPU torch, tutorrl)
on the tiny head_dim-32 model (TUTORRL_TINY_DIR). After every update verl
pushes the actor's weights into SGLang through its own code
(`ServerAdapter.update_weights` -> `/update_weights_from_tensor`), and
tutorrl's in-run callback reads SGLang's `/weights_checker` right after each
push. The CPU plug-ins (tools/cpu_training/verl091_sglang, sglang_cpu,
verl091) answer what only a GPU build would; their docstrings say what that
does and does not prove.

What is checked here, independently of tutorrl's own code where it can be:
the checksums the engine served after each push, read from the server by a
witness in verl's worker (`publication_probe.py`, plain urllib), equal the
checksums this test derives from the FSDP shard verl saved at that step
(every tensor, fused as SGLang serves it, in its bf16 dtype, hashed as
SGLang hashes a CPU tensor); tutorrl's records carry the digest of exactly
those checksums and say `pass` for every publication check that one engine
and this run can make. A second run corrupts one served tensor right after
verl's push of step 2: its record fails naming that tensor, and training
stops at that push (`tutorrl run` exits 5). Neither run leaves a process.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import support
from training_helpers import ANSI, metrics, training_env, tutorrl

# The trained side, derived from verl's shard with torch alone (no tutorrl code): the demo's table uses it too.
sys.path.insert(0, str(support.REPO / "tools" / "cpu_training"))
from publication_table import checksums_root, served_from_shard, statement  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray, pytest.mark.needs_verl,
              pytest.mark.needs_train_env("TUTORRL_TRAIN_SGLANG_PYTHON", "TUTORRL_TINY_DIR")]

PLUGINS = ":".join(str(support.REPO / "tools" / "cpu_training" / d) for d in ("verl091_sglang", "sglang_cpu", "verl091"))
SPEC = support.SPECS / "tiny_cpu_grpo_sglang.toml"
STEPS = 3
CORRUPT_STEP, CORRUPT_TENSOR = 2, "model.layers.1.mlp.down_proj.weight"
# What a one-engine, no-base-model, no-control run cannot check, and why each record says so.
SKIPPED_ALWAYS = {"publication.replicas_agree", "publication.changed_from_base", "publication.control"}
SKIPPED_FIRST = {"publication.roster_stable", "publication.changed_since_previous"}
PASS_ALWAYS = {"publication.engines_answered", "publication.tp_coverage", "publication.weight_version",
               "publication.matches_checkpoint", "publication.checkpoint_coverage", "publication.engines_stable",
               "publication.version_step", "publication.changed_from_bootstrap"}


def _checks(path: Path) -> dict[str, dict]:
    return {c["id"]: c for c in statement(path)["predicate"]["verdict"]["checks"]}


class Run:
    """One real run of the SGLang spec (about two minutes on two cores): `tutorrl run` itself, or the
    README's `bash tools/dev.sh demo --publication`, which compiles and runs it and shows the proof."""

    def __init__(self, root: Path, *, corrupt: str | None = None, demo: bool = False):
        python, tiny = training_env("TUTORRL_TRAIN_SGLANG_PYTHON", "tiny-qwen2-hd32/model.safetensors",
                                    "the verl 0.9.1 + SGLang CPU training environment")
        self.root, self.served_log = root, root / "served.jsonl"
        state = root / "state"
        # Every process the run starts inherits this: what finds any that outlives it.
        self.mark = uuid.uuid4().hex
        probe = {"CPU_PLUGIN_SERVED_LOG": str(self.served_log), "CPU_PLUGIN_RUN_MARK": self.mark,
                 **({"CPU_PLUGIN_CORRUPT": corrupt} if corrupt else {})}
        self.env = {"TINY_ROOT": str(tiny), "PYTHONPATH": PLUGINS, "TUTORRL_PYTHON": python,
                    "XDG_STATE_HOME": str(state), "TUTORRL_STATE_HOME": str(state / "tutorrl")}
        if demo:
            # Set-up skipped: the suite's virtualenv and the training environment are built.
            out = root / "demo" / "publication"
            env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TUTORRL_"))}
            env.update(probe, TUTORRL_DEV_SETUP="skip", TUTORRL_VENV=sys.prefix, PYTHON=sys.executable,
                       TUTORRL_TRAIN_SGLANG_VENV=str(Path(python).parent.parent), TUTORRL_TINY_DIR=str(tiny),
                       TUTORRL_DEMO_DIR=str(root / "demo"), XDG_STATE_HOME=str(state))
            self.run = subprocess.run(["bash", str(support.REPO / "tools" / "dev.sh"), "demo", "--publication"],
                                      env=env, capture_output=True, text=True, timeout=900)
            self.ckpt = out / "checkpoints"
            (self.bundle,) = (out / "bundles").iterdir()
        else:
            self.ckpt = root / "ckpt"
            compiled = tutorrl("compile", str(SPEC), "--out", str(root / "bundles"), cwd=root)
            assert compiled.returncode == 0, compiled.stderr
            self.bundle = root / compiled.stdout.strip()
            self.run = tutorrl("run", str(self.bundle), "--num-gpus", "1", cwd=root,
                               env={**self.env, **probe, "CKPT_ROOT": str(self.ckpt)})
        # Read at once: what is still alive when the run has returned was not ended by it.
        self.left = support.procs_with_env("CPU_PLUGIN_RUN_MARK", self.mark)
        (self.run_dir,) = sorted((self.bundle / "runs").iterdir())
        self.record = json.loads((self.run_dir / "run.json").read_text())
        self.log = ANSI.sub("", (self.run_dir / "job.log").read_text(errors="replace"))
        self.step_dir = self.ckpt / "tiny-cpu-grpo-sglang"
        self.records = sorted((self.bundle / "evidence").glob("[0-9]*.json"))
        self.served = [json.loads(line) for line in self.served_log.read_text().splitlines()]

    def served_at(self, step: int) -> dict[str, str]:
        (entry,) = [s for s in self.served if s["global_steps"] == step]
        return entry["checksums"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Run:
    return Run(tmp_path_factory.mktemp("train-sglang"), demo=True)


@pytest.fixture(scope="module")
def corrupted(tmp_path_factory) -> Run:
    return Run(tmp_path_factory.mktemp("train-sglang-corrupt"), corrupt=f"{CORRUPT_STEP}:{CORRUPT_TENSOR}")


def test_the_demo_shows_the_proof_push_by_push(trained):
    """`bash tools/dev.sh demo --publication`, as a newcomer runs it: per push, the served root beside the
    trained one, PASS, then the records and verify --rehash."""
    out = trained.run.stdout
    assert trained.run.returncode == 0, out[-3000:] + trained.run.stderr[-3000:]
    rows = re.findall(r"^   step (\d)  served (sha256:[0-9a-f]{12})  trained (sha256:[0-9a-f]{12})  17/17 tensors  PASS$",
                      out, re.M)
    assert [int(r[0]) for r in rows] == list(range(1, STEPS + 1)), out
    assert all(served == mine for _, served, mine in rows)
    for (step, served, _), path in zip(rows, trained.records):
        assert statement(path)["predicate"]["publication"]["served_digest"].startswith(served)
        assert f"step {step}: publication checked after the push in " in out
    assert "SUCCEEDED (exit code 0)" in out and "3 evidence record(s)" in out and "re-hashed and matches" in out
    # verl's own output stays in train.log; what shows is tutorrl's, with no unexplained warning.
    assert "actor_rollout_ref" not in out and "WARNING" not in out + trained.run.stderr, out


def test_verl_trains_three_steps_with_an_sglang_rollout_it_started_itself(trained):
    assert trained.run.returncode == 0, trained.run.stdout[-3000:] + trained.run.stderr[-3000:]
    assert trained.record["status"] == "succeeded" and trained.record["exit_code"] == 0
    assert trained.record["versions"]["verl"] == "0.9.1"
    # verl's own SGLang server actor, in the job's log.
    assert re.search(r"^\(SGLangHttpServer pid=\d+\) ", trained.log, re.M), trained.log[-3000:]
    steps = metrics(trained.log)
    assert sorted(steps) == list(range(1, STEPS + 1)), trained.log[-3000:]
    for step, values in steps.items():
        loss, grad = float(values["actor/pg_loss"]), float(values["actor/grad_norm"])
        assert math.isfinite(loss) and math.isfinite(grad) and grad > 0, (step, values)
        # SGLang sampled with the actor's weights: its log-probs are the ones the actor recomputes.
        diff = float(values["training/rollout_probs_diff_mean"])
        assert math.isfinite(diff) and diff < 0.01, (step, values)
    for step in range(1, STEPS + 1):
        actor = trained.step_dir / f"global_step_{step}" / "actor"
        assert (actor / "model_world_size_1_rank_0.pt").is_file() and (actor / "huggingface" / "model.safetensors").is_file()


def test_what_the_engine_served_after_each_push_is_the_checkpoint_of_that_step(trained):
    """The witness's own readings of the server against this test's own derivation from verl's shards."""
    pushed = [s["global_steps"] for s in trained.served]
    # verl's first sync (global_steps 0: the model as loaded), then one push after every step.
    assert pushed == list(range(0, STEPS + 1)), pushed
    for step in range(1, STEPS + 1):
        served = trained.served_at(step)
        expected = served_from_shard(trained.step_dir / f"global_step_{step}" / "actor" / "model_world_size_1_rank_0.pt")
        assert len(served) == 17 and served == expected, sorted(n for n in served if served[n] != expected.get(n))
    # Training changed what is served at every push.
    for step in range(1, STEPS + 1):
        assert trained.served_at(step) != trained.served_at(step - 1)


def test_every_publication_check_passes_against_the_real_server(trained):
    assert [p.name for p in trained.records] == [f"{n:06d}.json" for n in range(1, STEPS + 1)]
    for step, path in enumerate(trained.records, start=1):
        stmt = statement(path)
        predicate = stmt["predicate"]
        assert predicate["run"]["source"] == "callback" and predicate["checkpoint"]["step"] == step
        checks = _checks(path)
        publication = {cid: c["status"] for cid, c in checks.items() if cid.startswith("publication.")}
        skipped = SKIPPED_ALWAYS | (SKIPPED_FIRST if step == 1 else set())
        passing = PASS_ALWAYS | ({"publication.first_sync_matches_model"} if step == 1 else SKIPPED_FIRST)
        assert publication == {**{c: "pass" for c in passing}, **{c: "skipped" for c in skipped}}, publication
        assert "all 17 served shards" in checks["publication.matches_checkpoint"]["detail"]
        assert "one replica per shard" in checks["publication.replicas_agree"]["detail"]
        assert "no base model" in checks["publication.changed_from_base"]["detail"]
        assert checks["publication.control"]["detail"].startswith("off:")
        pub = predicate["publication"]
        # A real engine, on loopback, hashing on the CPU, and read right after verl's push of this step.
        (engine,) = pub["engines"]
        assert engine["kind"] == "sglang-http (unauthenticated)" and engine["url"].startswith("http://127.0.0.1:")
        assert pub["hash_function"] == "sglang.tensor_hash(cpu)=sha256[:8]"
        assert pub["in_run"]["moment"] == f"after CheckpointEngineManager.update_weights(global_steps={step}) in on_step_end"
        assert [a["global_steps"] for a in pub["in_run"]["after"]] == [step]
        # tutorrl read what the witness read: the same checksums, tensor for tensor.
        (rank,) = engine["ranks"]
        assert rank["tensor_count"] == 17 and rank["checksums_digest"] == checksums_root(trained.served_at(step))
    assert trained.record["evidence_problems"] == [] and trained.record["evidence_exit_code"] is None


def test_verify_rehash_passes(trained):
    ok = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    assert ok.returncode == 0, ok.stderr
    for path in trained.records:
        assert f"{path.name} (step {int(path.stem)}): matches" in ok.stderr


def test_a_corrupted_publication_stops_training_at_its_push(corrupted):
    run = corrupted
    assert run.run.returncode == 5, run.run.stdout[-3000:] + run.run.stderr[-3000:]
    assert "the evidence check stopped training (exit 5)" in run.run.stderr + run.run.stdout
    # The plug-in really corrupted the engine after verl's push of that step, and verl went no further.
    assert f"CPU_PLUGIN_CORRUPT: after verl's push of step {CORRUPT_STEP}, {CORRUPT_TENSOR}" in run.log
    # verl saved step 2, pushed it, and stopped there: its console logs a step's metrics after the push
    # (on_step_end), so step 2's line never came, and no later step began.
    assert sorted(metrics(run.log)) == list(range(1, CORRUPT_STEP)), run.log[-3000:]
    assert (run.step_dir / f"global_step_{CORRUPT_STEP}").is_dir()
    assert not (run.step_dir / f"global_step_{CORRUPT_STEP + 1}").exists()
    # Stopped out of the push itself, with the step and the tensor named.
    stopped = re.search(r"EvidenceStopped: (.*)$", run.log, re.M)
    assert stopped, run.log[-3000:]
    message = stopped.group(1)
    assert f"publication failed at the push of step {CORRUPT_STEP}" in message
    assert "publication.matches_checkpoint" in message and CORRUPT_TENSOR in message
    assert "in on_step_end" in run.log and "update_weights" in run.log
    # Step 1's record passes; step 2's fails on exactly that tensor, and was written before the stop.
    first, second = run.records
    assert _checks(first)["publication.matches_checkpoint"]["status"] == "pass"
    checks = _checks(second)
    failed = {cid for cid, c in checks.items() if c["status"] == "fail"}
    assert failed == {"publication.matches_checkpoint"}, failed
    assert checks["publication.matches_checkpoint"]["detail"].startswith("1 of 17 served shards differ")
    assert statement(second)["predicate"]["publication"]["vs_checkpoint"]["different"] == [CORRUPT_TENSOR]
    # The witness saw the same: the served tensor is not the trained one, every other one is.
    served = run.served_at(CORRUPT_STEP)
    trained_now = served_from_shard(run.step_dir / f"global_step_{CORRUPT_STEP}" / "actor" / "model_world_size_1_rank_0.pt")
    assert sorted(n for n in served if served[n] != trained_now[n]) == [CORRUPT_TENSOR]


@pytest.mark.parametrize("which", ["trained", "corrupted"])
def test_no_process_of_the_run_outlives_it(which, request):
    """The embedded head, verl's actors, SGLang's scheduler and detokenizer: all ended by `tutorrl run`."""
    run = request.getfixturevalue(which)
    assert run.left == [], [Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in run.left
                            if Path(f"/proc/{pid}/cmdline").exists()]
