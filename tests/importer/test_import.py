"""`tutorrl import`: launches nobody here wrote become specs that compose to the identical verl config.

Golden imports of scripts written for these tests (tests/importer/scripts/), the
command's refusals, and a property: random override lists drawn from a
release's own key set import and round-trip exactly (composed by Hydra against
the release's real config, both sides).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

import support
from tutorrl.compiler.release.hydra import render_value
from tutorrl.compiler.release.keysets import load_keyset
from tutorrl.importer.roundtrip import config_root, round_trip
from tutorrl.importer.translate import render_spec, translate, validate

# `tutorrl import` proves each launch by composing it with the release's trainer config, from its wheel.
pytestmark = pytest.mark.wheels

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts"
GOLDEN = HERE / "golden"
# A fixed HOME: the scripts read $HOME, and the spec must not depend on who runs the test.
FAKE_HOME = "/home/user"


def _import(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": FAKE_HOME}
    return subprocess.run([sys.executable, "-m", "tutorrl", "import", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, check=False)


@pytest.mark.parametrize("script,release,extra", [
    ("grpo_fsdp_lists", "0.7.0", []),
    ("ppo_critic_rm", "0.6.1", []),
    ("megatron_moe_dapo", "0.7.0", ["--var", "SLURM_JOB_NUM_NODES=4"]),
    ("grpo_fsdp_lists", "0.9.1", []),
])
def test_golden_import_round_trips_exactly(script, release, extra, tmp_path):
    out = tmp_path / "spec.toml"
    proc = _import(str(SCRIPTS / f"{script}.sh"), "--verl", release, "-o", str(out), *extra, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"round trip: exact (the spec composes to the identical verl {release} config)" in proc.stdout
    text = out.read_text().replace(str(SCRIPTS), "SCRIPTS")
    golden = GOLDEN / f"{script}-{release}.toml"
    if os.environ.get("TUTORRL_REGEN_GOLDEN") == "1":
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden.name} differs; rerun with TUTORRL_REGEN_GOLDEN=1 and review"
    # The imported spec is a spec like any other: it compiles.
    assert support.cli("compile", str(out), "--out", str(tmp_path / "b")).returncode == 0


def test_file_lists_stay_lists(tmp_path):
    out = tmp_path / "spec.toml"
    assert _import(str(SCRIPTS / "grpo_fsdp_lists.sh"), "--verl", "0.7.0", "-o", str(out)).returncode == 0
    import tomllib

    spec = tomllib.loads(out.read_text())
    # Under $HOME: a root, its default the importing user's folder (issue 20).
    assert spec["data"]["train"] == ["$HOME_DATA/gsm8k/train.parquet", "$HOME_DATA/math/train.parquet"]
    assert spec["roots"] == {"HOME_DATA": {"default": f"{FAKE_HOME}/data"}}


def test_unset_variable_becomes_a_placeholder_the_compiler_refuses(tmp_path):
    out = tmp_path / "spec.toml"
    proc = _import(str(SCRIPTS / "megatron_moe_dapo.sh"), "--verl", "0.7.0", "-o", str(out))
    assert "SLURM_JOB_NUM_NODES -> __UNSET_SLURM_JOB_NUM_NODES__" in proc.stdout
    # The placeholder stands for the same value in both launches; the rest is proven (issue 20).
    assert "round trip: exact" in proc.stdout and proc.returncode == 0, proc.stdout + proc.stderr
    assert "__UNSET_SLURM_JOB_NUM_NODES__ = " in proc.stdout
    compiled = support.cli("compile", str(out), "--out", str(tmp_path / "b"))
    assert compiled.returncode == 2
    assert "placeholder for the shell variable SLURM_JOB_NUM_NODES" in compiled.stderr
    assert not (tmp_path / "b").exists()


def test_wrapper_commands_are_recorded_not_run(tmp_path):
    proc = _import(str(SCRIPTS / "ppo_critic_rm.sh"), "--verl", "0.6.1", "-o", str(tmp_path / "s.toml"))
    assert proc.returncode == 0, proc.stderr
    # `ray job submit ... -- python3 -m verl.trainer.main_ppo` yields the launch itself.
    assert "overrides: 30 to spec fields" in proc.stdout


@pytest.mark.parametrize("script,words", [
    ("two_launches", "2 launches of verl.trainer.main_ppo (#1: 1 overrides; #2: 1 overrides); give -o DIR/"),
    ("no_launch", "no launch of verl.trainer.main_ppo found (the script ran: huggingface-cli download"),
    # The module it did start is named, and how another entry point is chosen (issue 40, D3).
    # A recipe's launch needs its code (issue 40): the module, the entry and what to give.
    ("recipe_dapo", "the launch starts recipe.dapo.main_dapo (the recipe entry point 'dapo'), whose code and Hydra "
                    "config are outside verl's wheel: give --recipe PATH, a checkout of "
                    "https://github.com/verl-project/verl-recipe at e7f889574b83 named 'recipe'"),
    ("unknown_entry", "no launch tutorrl imports found: the script started python3 -m recipe.fault_recover.main_ppo "
                      "(not an entry point: fault_recover has no Hydra config of its own to key"),
    ("unknown_entry", "`tutorrl import` reads launches of verl.trainer.main_ppo, of the entry points in verl's "
                      "wheel (fully_async, one_step_off) and of the recipes it has key sets for, with --recipe PATH "
                      "(dapo (recipe.dapo.main_dapo), entropy (recipe.entropy.main_entropy), prime "
                      "(recipe.prime.main_prime), spin (recipe.spin.main_spin), flowrl (recipe.flowrl.main_flowrl), "
                      "gvpo (recipe.gvpo.gvpo_main_ppo), spo (recipe.spo.spo_main_ppo), sppo (recipe.sppo.main_sppo), "
                      "grpo_mindspeed_mm (recipe.grpo_mindspeed_mm.main_ppo), rep_exp (rep_exp.main_rep_exp))"),
])
def test_scripts_with_several_launches_or_none_are_refused(script, words, tmp_path):
    proc = _import(str(SCRIPTS / f"{script}.sh"), "--verl", "0.9.1", "-o", str(tmp_path / "s.toml"))
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "s.toml").exists()
    if script == "unknown_entry":
        # What a module tutorrl does not know needs, step by step.
        assert ("a module tutorrl does not know is added as a table of compiler/release/keymap/entries.toml"
                in proc.stderr and "tools/recipe_keysets.py" in proc.stderr and "`tutorrl keys lock`" in proc.stderr)


def test_override_list_keys_verl_ignores_are_kept_as_written_and_named(tmp_path):
    proc = _import("--verl", "0.9.1", "--format", "json", "-o", str(tmp_path / "s.toml"), "--",
                   "algorithm.adv_estimator=grpo", "custom_reward_function.path=x.py", "actor_rollout_ref.rollout.n=8")
    report = json.loads(proc.stdout)
    # The spec keeps the key verl declares and never reads ([verl] unread_overrides): the composed
    # configs are identical, and the report says verl ignores it and which key it reads (issue 20).
    assert proc.returncode == 0 and report["exact"] is True and report["differences"] == []
    unread = [m for m in report["mapped"] if m["how"] == "unread"]
    assert len(unread) == 1 and "use 'reward.custom_reward_function.path'" in unread[0]["note"]
    assert any("never reads custom_reward_function.path: the launch as written runs with them ignored" in n
               for n in report["notes"])
    assert 'unread_overrides = [\n    "custom_reward_function.path=x.py",\n]' in (tmp_path / "s.toml").read_text()


def test_release_is_chosen_from_the_keys_when_not_given():
    # rollout.update_weights_bucket_megabytes is a key of verl 0.5.0 to 0.7.0 only.
    proc = _import("--format", "json", "--", "actor_rollout_ref.rollout.update_weights_bucket_megabytes=512",
                   "actor_rollout_ref.rollout.n=4")
    report = json.loads(proc.stdout)
    assert report["release"] == "0.7.0" and "the newest of those" in report["release_reason"]
    assert report["exact"] is True


def test_keys_of_another_release_are_named_with_migrate():
    proc = _import("--verl", "0.9.1", "--", "actor_rollout_ref.rollout.update_weights_bucket_megabytes=512",
                   "actor_rollout_ref.rollout.n=4")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "import with --verl 0.7.0, then `tutorrl migrate SPEC --to 0.9.1`" in out
    # The setting still lands in its field, and the spec says it for 0.9.1 under the new key.
    assert "the key moved: verl 0.9.1 calls it 'actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes'" in out
    assert "update_weights_bucket_megabytes = 512" in out
    assert "round trip: not checked: the original launch does not compose at verl 0.9.1" in out


# -- property: random launches from a release's key set --------------------------

# Keys the compiler's cross-field rules read (batch sizes, GPU layout) are left
# out: random values there are launches verl itself refuses at start.
# The actor's strategy is left out too: it chooses the variant (the config
# itself), so a random value makes the launch another config altogether.
_RULED = ("data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size", "trainer.n_gpus_per_node",
          "trainer.nnodes", "actor_rollout_ref.rollout.n", "actor_rollout_ref.actor.use_dynamic_bsz",
          "actor_rollout_ref.actor.ppo_micro_batch_size", "actor_rollout_ref.rollout.tensor_model_parallel_size",
          "actor_rollout_ref.actor.strategy")
_TEXT = st.text(st.sampled_from(list("ab Z09 $'\"\\{},=#~é/:-")), min_size=1, max_size=12)
# (release, variant, config, examples): Megatron's config composes slower.
CASES = [("0.9.1", "fsdp", "ppo_trainer", 20), ("0.7.0", "megatron", "ppo_megatron_trainer", 6)]


def _scalars(release: str, variant: str) -> tuple:
    keyset = load_keyset(release, variant)
    return keyset, sorted(k for k, info in keyset.keys.items()
                          if info.type in ("int", "float", "bool", "str") and not info.interpolation and not info.open
                          and not k.startswith(("hydra.", "defaults")) and "_target_" not in k and k not in _RULED
                          # a top-level name is a config-group choice (model_engine=...), not a value
                          and "." in k
                          and not k.endswith(("micro_batch_size", "parallel_size")))


def _value(info):
    if info.type == "bool":
        return st.booleans()
    if info.type == "int":
        return st.integers(0, 10**6)
    if info.type == "float":
        return st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    return _TEXT


@pytest.mark.parametrize("release,variant,config_name,examples", CASES)
def test_random_launches_import_and_round_trip_exactly(release, variant, config_name, examples):
    keyset, scalars = _scalars(release, variant)
    root = config_root(release)

    @hsettings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def check(data):
        keys = data.draw(st.lists(st.sampled_from(scalars), min_size=1, max_size=8, unique=True))
        overrides = [f"{k}={render_value(data.draw(_value(keyset.keys[k])))}" for k in keys]
        translation = validate(translate(overrides, release, config_name=config_name, variant=variant))
        text = render_spec(translation, "random")
        result = round_trip(text, overrides, config_name=config_name, root=root)
        assert result.original_error is None
        ignored = {m.override.split("=", 1)[0] for m in translation.mapped if m.how == "dropped"}
        assert result.imported_error is None, (text, result.imported_error)
        assert [d for d in result.differences if d.key not in ignored] == [], text

    check()


def test_the_report_says_what_compiling_the_spec_warns():
    proc = _import("--verl", "0.9.1", "--format", "json", "--", "algorithm.adv_estimator=gae",
                   "trainer.balance_batch=False", "critic.model.path=c")
    report = json.loads(proc.stdout)
    assert report["exact"] is True
    assert any(w.startswith("trainer.balance_batch: has no effect in verl 0.9.1") for w in report["warnings"])


def test_an_import_runs_without_the_collector_and_frees_each_launch_before_the_next(tmp_path):
    # tutorrl.cli.entry runs `import` with the collector off (Hydra's imports make ~120
    # collections that free nothing); the command collects once between two launches.
    code = ("import gc, sys; full = []; "
            "gc.callbacks.append(lambda phase, info: full.append(gc.isenabled()) "
            "if phase == 'stop' and info['generation'] == 2 else None); "
            "import atexit; atexit.register(lambda: print('full collections', full)); "
            "sys.argv = ['tutorrl', *sys.argv[1:]]; import tutorrl.cli as c; c.entry()")
    proc = subprocess.run([sys.executable, "-c", code, "import", str(SCRIPTS / "two_launches.sh"), "--verl",
                           "0.9.1", "-o", f"{tmp_path}/"], capture_output=True, text=True,
                          env={**os.environ, "HOME": FAKE_HOME}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("round trip: exact") == 2
    assert proc.stdout.strip().splitlines()[-1] == "full collections [False]"


@pytest.mark.parametrize("engine, how", [("sglang", "extra"), ("hf", "unread"), (None, "unread")])
def test_an_engines_own_sampling_field_is_kept_only_for_that_engine(engine, how):
    # verl 0.5.0's SGLang rollout reads max_new_tokens; its HF rollout and its default (vLLM) do not.
    from tutorrl.importer.translate import translate, validate

    overrides = ([f"actor_rollout_ref.rollout.name={engine}"] if engine else []) + [
        "+actor_rollout_ref.rollout.max_new_tokens=64"]
    mapped = validate(translate(overrides, "0.5.0", variant="fsdp")).mapped[-1]
    assert mapped.how == how
    if how == "unread":
        assert "only with rollout.name=sglang" in mapped.note


def test_terminal_escapes_from_a_script_are_shown_escaped_in_the_report():
    from tutorrl.importer.launch import ImportReport
    from tutorrl.importer.text import report_text

    hostile = "tool \x1b[2J\x1b]0;owned\x07 \u202eevil\nsecond line"
    report = ImportReport(source="s\x1b[31m.sh", release="0.9.1", variant="fsdp", release_reason="given",
                          spec_path=None, mapped=[], unset={"HOST\x1b[1m": "v\x1b[0m"}, placeholders=[],
                          other_commands=[hostile], exact=True)
    text = report_text(report)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "  tool \\x1b[2J\\x1b]0;owned\\x07 \\u202eevil\\nsecond line" in text.splitlines()
    assert text.startswith("import: s\\x1b[31m.sh -> verl 0.9.1 (fsdp); given")


def test_an_imported_scripts_escapes_never_reach_the_terminal(tmp_path):
    script = tmp_path / "launch.sh"
    script.write_text("#!/usr/bin/env bash\nmy_tool $'\\e[2J\\e]0;owned\\a'\n"
                      "python3 -m verl.trainer.main_ppo trainer.total_epochs=1\n")
    proc = _import(str(script), "--verl", "0.9.1", "-o", str(tmp_path / "s.toml"))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr
    assert "my_tool \\x1b[2J\\x1b]0;owned\\x07" in proc.stdout, proc.stdout


def test_a_spoiled_compose_cache_entry_is_composed_again_and_said(tmp_path):
    env = {**os.environ, "HOME": FAKE_HOME, "XDG_CACHE_HOME": str(tmp_path / "xdg")}

    def run():
        return subprocess.run([sys.executable, "-m", "tutorrl", "import", str(SCRIPTS / "ppo_critic_rm.sh"), "--verl",
                               "0.6.1", "-o", str(tmp_path / "s.toml")], capture_output=True, text=True, env=env)

    first = run()
    assert first.returncode == 0, first.stderr
    assert "compose cache" not in first.stdout
    (entry,) = (tmp_path / "xdg" / "tutorrl" / "composed").glob("*/*.msgpack")
    entry.write_bytes(entry.read_bytes()[:-1] + b"\x00")
    second = run()
    assert second.returncode == 0, second.stderr
    assert f"note: the compose cache entry {entry} does not match its digest; composed again" in second.stdout
    assert "round trip: exact" in second.stdout


def test_a_megatron_launch_with_actor_and_ref_transformer_overrides_imports_exactly(tmp_path):
    # verl's own examples write these '++' (the ref's table interpolates the actor's); the spec's
    # compiled launch was refused by Hydra until the compiler wrote the ref's entries '++' too (issue 40, D1).
    actor = "actor_rollout_ref.actor.megatron.override_transformer_config"
    ref = "actor_rollout_ref.ref.megatron.override_transformer_config"
    proc = _import("--verl", "0.9.1", "--format", "json", "-o", str(tmp_path / "s.toml"), "--",
                   "model_engine=megatron", "actor_rollout_ref.actor.use_kl_loss=True",
                   f"++{actor}.gradient_accumulation_fusion=False", f"++{ref}.gradient_accumulation_fusion=False",
                   f"++{ref}.recompute_method=uniform")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["exact"] is True, proc.stdout + proc.stderr
    assert report["does_not_compile"] == []
    spec = (tmp_path / "s.toml").read_text()
    assert "[ref.megatron.transformer_overrides]" in spec and "[actor.megatron.transformer_overrides]" in spec
    compiled = support.cli("compile", str(tmp_path / "s.toml"), "--out", str(tmp_path / "b"))
    assert compiled.returncode == 0, compiled.stderr
    launch = next((tmp_path / "b").glob("*/launch.sh")).read_text()
    assert f"'++{ref}.recompute_method=\"uniform\"'" in launch


def test_keys_the_release_never_reads_stay_as_written_wherever_their_spec_home_is(tmp_path):
    # verl 0.9.0 never reads the legacy reward_model block (its main_ppo stopped migrating it), so a DAPO
    # launch's reward_manager and reward_kwargs both run ignored. Moving the kwargs into [reward.manager_kwargs]
    # (read at 0.9.0) while keeping the manager unread switched the overlong penalty on under the default
    # manager: neither the launch nor what it meant. Both stay as written; both homes are offered (issue 40, D2).
    kwargs = ["+reward_model.reward_kwargs.overlong_buffer_cfg.enable=True",
              "+reward_model.reward_kwargs.max_resp_len=2048"]
    proc = _import("--verl", "0.9.0", "--format", "json", "-o", str(tmp_path / "s.toml"), "--",
                   "algorithm.adv_estimator=grpo", "reward_model.reward_manager=dapo", *kwargs)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["exact"] is True, proc.stdout + proc.stderr
    how = {m["override"]: m["how"] for m in report["mapped"]}
    assert [how[k] for k in kwargs] == ["unread", "unread"]
    spec = (tmp_path / "s.toml").read_text()
    import tomllib

    parsed = tomllib.loads(spec)
    assert "manager_kwargs" not in parsed.get("reward", {})
    assert parsed["verl"]["unread_overrides"] == ["reward_model.reward_manager=dapo", *kwargs]
    # What they meant, offered where 0.9.0 reads it (a comment: the spec is the launch as verl runs it).
    assert '#   [reward] manager = "dapo"' in spec
    assert "#   [reward] manager_kwargs.max_resp_len = 2048    (for +reward_model.reward_kwargs.max_resp_len=2048)" \
        in spec


def test_a_launch_of_an_engine_tutorrl_has_no_key_set_for_is_kept_as_written(tmp_path):
    # verl 0.9's MindSpeed engine (model_engine=mindspeed) builds its own actor config, which declares
    # mcore_kwargs; the FSDP config's dataclass does not, and the import used to leave the '+' keys out as
    # "would stop verl": a false reason and a spec that was not the launch. Kept as written now, the round
    # trip is exact and the compiler says what it cannot check (issue 40).
    proc = _import("--verl", "0.9.0", "--format", "json", "-o", str(tmp_path / "s.toml"), "--",
                   "model_engine=mindspeed", "+actor_rollout_ref.actor.mindspeed.mcore_kwargs.num_query_groups=8")
    report = json.loads(proc.stdout)
    # Exit 1: exact, and a spec the compiler refuses until changed (the command's contract).
    assert proc.returncode == 1 and report["exact"] is True, proc.stdout + proc.stderr
    (kept,) = [m for m in report["mapped"] if "mcore_kwargs" in m["override"]]
    assert kept["how"] == "extra" and "selects verl's mindspeed engine (model_engine=mindspeed)" in kept["note"]
    assert report["does_not_compile"]  # tutorrl's fsdp key set has no such key: said, not hidden


def test_a_plus_on_a_key_the_release_declares_is_dropped_in_a_raw_override_and_said():
    # fully_async's config declares algorithm.filter_groups.* at 0.9.0; a launch written before (verl-recipe's
    # low_precision async DAPO) appends them with '+', which Hydra refuses there. The spec sets them.
    from tutorrl.importer.translate import translate, validate

    translation = validate(translate(["+algorithm.filter_groups.enable=True", "+algorithm.filter_groups.metric=acc"],
                                     "0.9.0", variant="fsdp", entry="fully_async"))
    extra = translation.spec["verl"]["extra_overrides"]
    # metric is declared null: Hydra takes '+' there, so it stays as written.
    assert extra == ["algorithm.filter_groups.enable=True", "+algorithm.filter_groups.metric=acc"]
    assert "the '+' is dropped: verl 0.9.0 declares 'algorithm.filter_groups.enable'" in translation.mapped[0].note
    from tutorrl.compiler.pipeline.resolve import check_extra
    from tutorrl.compiler.release import load_keyset, load_lock

    lock, keyset = load_lock("0.9.0", "fsdp", "fully_async"), load_keyset("0.9.0", "fsdp", "fully_async")
    assert check_extra(extra[0], lock, keyset, {})[1] is None
    assert "already exists" in check_extra("+" + extra[0], lock, keyset, {})[1][0]


def test_a_key_the_release_retired_set_to_what_it_always_does_is_left_out_and_said(tmp_path):
    # verl 0.8.0 removed trainer.use_legacy_worker_impl with the legacy workers: it always runs the engine
    # workers, which 'disable' chose. verl refuses the key there; without it, 0.8.0 runs what the launch asked.
    spec = tmp_path / "spec.toml"
    proc = _import("--verl", "0.8.0", "-o", str(spec), "--", "trainer.use_legacy_worker_impl=disable",
                   "actor_rollout_ref.rollout.n=2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "trainer.use_legacy_worker_impl=disable  (left out: verl 0.8.0 removed the legacy workers" in proc.stdout
    assert "1 dropped" in proc.stdout and "round trip: exact" in proc.stdout and "as the launch so carried" in proc.stdout
    assert "use_legacy_worker_impl" not in spec.read_text()
    # Where the release still declares the key, the override is the launch's, kept as written.
    kept = validate(translate(["trainer.use_legacy_worker_impl=disable"], "0.7.1", variant="fsdp"))
    assert kept.spec["verl"]["extra_overrides"] == ["trainer.use_legacy_worker_impl=disable"] and not kept.carried


@pytest.mark.parametrize("override,release,stays", [
    ("trainer.use_legacy_worker_impl=auto", "0.8.0", "which 'disable' chose"),
    ("algorithm.rollout_correction.rollout_token_veto_threshold=1e-4", "0.7.1", "per-token veto"),
    # Hydra reads a quoted 'null' as the string, not as None: not what 0.7.1 always does.
    ("algorithm.rollout_correction.rollout_rs_threshold_lower='null'", "0.7.1", "LOWER_UPPER"),
])
def test_a_retired_key_set_to_another_value_stays_and_the_compiler_names_why(override, release, stays):
    from tutorrl.compiler.pipeline.resolve import check_extra
    from tutorrl.compiler.release import load_lock

    translation = validate(translate([override], release, variant="fsdp"))
    assert translation.spec["verl"]["extra_overrides"] == [override] and not translation.carried
    problem = check_extra(override, load_lock(release, "fsdp"), load_keyset(release, "fsdp"), {})[1]
    assert "has no key" in problem[0] and stays in problem[1] and "leave it out" in problem[1]


def test_a_retired_key_set_to_null_is_left_out_where_null_is_what_the_release_does():
    translation = validate(translate(["algorithm.rollout_correction.rollout_is=token",
                                      "algorithm.rollout_correction.rollout_rs_threshold_lower=null",
                                      "algorithm.rollout_correction.rollout_token_veto_threshold=null"],
                                     "0.7.1", variant="fsdp"))
    assert translation.launch == ["algorithm.rollout_correction.rollout_is=token"]
    assert sorted(m.override.split("=")[0] for m in translation.mapped if m.how == "dropped") == [
        "algorithm.rollout_correction.rollout_rs_threshold_lower", "algorithm.rollout_correction.rollout_token_veto_threshold"]
    assert "per-token veto" in translation.carried["algorithm.rollout_correction.rollout_token_veto_threshold=null"]


def _positional(tmp_path: Path, name: str, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    """A launch naming its run from the script's positional parameters (as rep_exp's scripts do), imported at
    0.9.1 with ``args``; the report and the spec."""
    script = tmp_path / "positional.sh"
    script.write_text(f'python3 -m verl.trainer.main_ppo trainer.experiment_name="{name}" data.train_batch_size=256\n')
    out = tmp_path / "spec.toml"
    return _import(str(script), "--verl", "0.9.1", *args, "-o", str(out)), out


def test_a_placeholder_followed_by_an_underscore_names_its_own_variable(tmp_path):
    # rep_exp's scripts name runs "${1}_..." from positional parameters: the stand-in is followed by '_'.
    proc, out = _positional(tmp_path, "${1}_run")
    assert "  1 -> __UNSET_ARG1__" in proc.stdout, proc.stdout + proc.stderr
    assert '"__UNSET_ARG1___run"' in out.read_text()
    compiled = support.cli("compile", str(out), "--out", str(tmp_path / "b"))
    assert compiled.returncode == 2 and "placeholder for the shell variable ARG1," in compiled.stderr, compiled.stderr
    assert "'__UNSET_ARG1__' is a placeholder" in compiled.stderr and "variable ARG1_" not in compiled.stderr
    # Said once: the name's pattern is judged when the placeholder is filled in.
    assert compiled.stderr.count("error:") == 1 and "expected a name" not in compiled.stderr


def test_a_scripts_positional_arguments_are_given_with_arg_in_order(tmp_path):
    # rep_exp's scripts take their task and model as $1, $2: the report says how to give them, and --arg does.
    unset, out = _positional(tmp_path, "${1}_${2}")
    assert "a positional parameter N, $N, with the Nth --arg VALUE" in unset.stdout, unset.stdout + unset.stderr
    given, out = _positional(tmp_path, "${1}_${2}", "--arg", "math", "--arg", "32")
    assert given.returncode == 0 and "never set" not in given.stdout, given.stdout + given.stderr
    assert 'name = "math_32"' in out.read_text()
