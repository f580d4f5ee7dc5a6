"""`tutorrl import` of launches of verl's other entry points (fully_async, one_step_off).

Scripts written for these tests in the shape of verl's experimental launches
(tests/importer/scripts/): each becomes a spec naming its entry
(`[experiment] entry`), proven by composing both launches with that entry's own
Hydra config from the release's wheel (not main_ppo's: its `async_training.*`
and `rollout.nnodes` exist nowhere else), compiled into a launch.sh that starts
the same module; a module tutorrl has no entry for is refused by name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tutorrl.compiler import compile_spec, write_bundle
from tutorrl.errors import SpecError

# Each import composes with the release's config, from its wheel.
pytestmark = pytest.mark.wheels

SCRIPTS = Path(__file__).parent / "scripts"
FAKE_HOME = "/home/user"

CASES = {
    "fully_async_grpo": ("fully_async", "verl.experimental.fully_async_policy.fully_async_main",
                         "fully_async_ppo_trainer",
                         ["async_training.staleness_threshold=0.5", "async_training.trigger_parameter_sync_step=4",
                          "rollout.nnodes=1", "rollout.n_gpus_per_node=4", "actor_rollout_ref.hybrid_engine=False"]),
    "one_step_off_grpo": ("one_step_off", "verl.experimental.one_step_off_policy.main_ppo",
                          "one_step_off_ppo_trainer",
                          ["rollout.nnodes=1", "rollout.n_gpus_per_node=4", "actor_rollout_ref.hybrid_engine=False"]),
}


def _import(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": FAKE_HOME}
    return subprocess.run([sys.executable, "-m", "tutorrl", "import", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, check=False)


def _imported(script: str, tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    spec = tmp_path / f"{script}.toml"
    return _import(str(SCRIPTS / f"{script}.sh"), *extra, "-o", str(spec), cwd=tmp_path), spec


@pytest.mark.parametrize("script", sorted(CASES))
def test_an_entry_launch_imports_exact_and_compiles_into_a_launch_of_the_same_module(script, tmp_path):
    entry, module, config, keys = CASES[script]
    proc, spec = _imported(script, tmp_path, "--verl", "0.9.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "round trip: exact (the spec composes to the identical verl 0.9.1 config)" in proc.stdout
    text = spec.read_text()
    assert f'\nentry = "{entry}"\n' in text and 'config_name' not in text and "config_path" not in text
    bundle = write_bundle(compile_spec(spec), tmp_path / "bundles")
    launch = (bundle.path / "launch.sh").read_text()
    assert f'exec "$python_bin" -m {module} --config-name {config} "$@"' in launch
    assert "'hydra.searchpath=[pkg://verl.trainer.config]'" in launch
    lines = {line.strip().removesuffix("\\").strip() for line in launch.splitlines()}
    for key in keys:  # the entry's own keys reach the launch as the script wrote them ([verl] extra_overrides)
        assert key in lines, key


@pytest.mark.parametrize("script", sorted(CASES))
def test_without_verl_the_release_is_one_that_ships_the_entry(script, tmp_path):
    entry = CASES[script][0]
    proc, spec = _imported(script, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    release = proc.stdout.split(" -> verl ", 1)[1].split(" ", 1)[0]
    assert release in ("0.8.0", "0.9.0", "0.9.1") and "round trip: exact" in proc.stdout
    assert f'\nentry = "{entry}"\n' in spec.read_text()


def test_a_release_without_the_entry_is_refused_naming_the_ones_with_it(tmp_path):
    proc, spec = _imported("fully_async_grpo", tmp_path, "--verl", "0.7.1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "verl 0.7.1 is not supported with entry point fully_async" in proc.stderr
    assert "0.8.0, 0.9.0, 0.9.1" in proc.stderr and not spec.exists()


def test_a_module_tutorrl_does_not_know_is_refused_by_name_saying_how_to_add_it(tmp_path):
    proc, spec = _imported("unknown_entry", tmp_path, "--verl", "0.9.1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "recipe.entropy.main_entropy" in proc.stderr and "compiler/release/keymap/entries.toml" in proc.stderr
    # A module measured and recorded as no entry (entries.toml's not_entry) is refused saying why.
    assert ("python3 -m recipe.fault_recover.main_ppo (not an entry point: fault_recover has no Hydra config of its "
            "own to key") in proc.stderr
    assert not spec.exists()


@pytest.mark.slow
@pytest.mark.needs_verl
def test_the_imported_fully_async_launch_starts_verls_module_with_the_scripts_values(tmp_path):
    """The compiled launch.sh run by real bash with the test environment's verl 0.9.1: the module's own
    @hydra.main composes the launch and prints it (`--cfg all`), nothing trains."""
    proc, spec = _imported("fully_async_grpo", tmp_path, "--verl", "0.9.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bundle = write_bundle(compile_spec(spec), tmp_path / "bundles")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TUTORRL_PYTHON": sys.executable}
    ran = subprocess.run(["bash", str(bundle.path / "launch.sh"), "--cfg", "all"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "\nasync_training:\n  staleness_threshold: 0.5\n  trigger_parameter_sync_step: 4\n  require_batches: 4\n" \
        in ran.stdout
    assert "\nrollout:\n  nnodes: 1\n  n_gpus_per_node: 4\n" in ran.stdout
    assert "    name: fully_async_main\n" in ran.stdout and "    config_name: fully_async_ppo_trainer\n" in ran.stdout


# -- a recipe's launch (DAPO): its config from the checkout given with --recipe ----------------------------------------


def _dapo_checkout(root: Path) -> Path:
    """A checkout of this test's own in DAPO's layout (recipe/dapo/config), its config DAPO's shape: verl's
    trainer config with DAPO's own keys (data.gen_batch_size, algorithm.filter_groups.*) -- not DAPO's code:
    the suite never needs verl-recipe."""
    config = root / "recipe" / "dapo" / "config"
    config.mkdir(parents=True)
    for name, base in (("dapo_trainer", "ppo_trainer"), ("dapo_megatron_trainer", "ppo_megatron_trainer")):
        (config / f"{name}.yaml").write_text(
            f"hydra:\n  searchpath:\n    - file://verl/trainer/config\n\ndefaults:\n  - {base}\n  - _self_\n\n"
            "data:\n  gen_batch_size: ${data.train_batch_size}\n\n"
            "algorithm:\n  filter_groups:\n    enable: False\n    metric: null\n    max_num_gen_batches: 0\n"
            "reward:\n  reward_kwargs:\n    overlong_buffer_cfg:\n      enable: False\n      len: 0\n"
            "      penalty_factor: 0.0\n      log: False\n    max_resp_len: null\n")
    (root / "recipe" / "dapo" / "main_dapo.py").write_text("# stands for the module's place\n")
    return root / "recipe"


def test_a_recipe_launch_imports_with_its_checkout_exact_and_compiles_into_a_pinned_launch_of_its_module(tmp_path):
    checkout = _dapo_checkout(tmp_path / "code")
    proc, spec = _imported("recipe_dapo_groups", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # DAPO's key sets are at 0.7.1, 0.8.0 and 0.9.0, its code starts at 0.7.1 and 0.8.0 (entries.toml's stops):
    # the newest of those reading as many keys, 0.8.0, is chosen, and both launches composed with the checkout's config.
    assert "round trip: exact (the spec composes to the identical verl 0.8.0 config)" in proc.stdout
    text = spec.read_text()
    assert '\nentry = "dapo"\n' in text
    assert ('[experiment.recipe]\npath = "$RECIPE_ROOT/recipe"\ngit = "https://github.com/verl-project/verl-recipe"'
            in text)
    assert f'RECIPE_ROOT = {{ default = "{tmp_path / "code"}" }}' in text
    assert '"algorithm.filter_groups.enable=True"' in text and '"data.gen_batch_size=24"' in text
    bundle = write_bundle(compile_spec(spec), tmp_path / "bundles")
    launch = (bundle.path / "launch.sh").read_text()
    assert 'exec "$python_bin" -m recipe.dapo.main_dapo --config-name dapo_trainer "$@"' in launch
    # The checkout's files are pinned into the bundle (each by its path inside the folder).
    assert '"dapo/config/dapo_trainer.yaml"' in (bundle.path / "spec.toml").read_text()


def test_a_recipe_launch_given_a_folder_that_cannot_be_its_checkout_is_refused_naming_what_it_needs(tmp_path):
    checkout = _dapo_checkout(tmp_path / "code")
    wrong = tmp_path / "verl-recipe"
    checkout.rename(wrong)
    proc, spec = _imported("recipe_dapo_groups", tmp_path, "--recipe", str(wrong))
    assert proc.returncode == 2 and not spec.exists() and "Traceback" not in proc.stderr
    assert "recipe.dapo.main_dapo is imported from a folder named 'recipe'" in proc.stderr
    (wrong / "dapo" / "config" / "dapo_trainer.yaml").unlink()
    wrong.rename(checkout)
    proc, spec = _imported("recipe_dapo_groups", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 2 and "no dapo/config/dapo_trainer.yaml there (dapo's config)" in proc.stderr


def test_a_recipe_launch_of_keys_its_config_moved_is_carried_to_where_its_code_reads_them(tmp_path):
    """verl-recipe moved DAPO's overlong buffer (entries.toml's ``moved``): verl refuses the launch as written;
    the import writes what it meant, the compiler takes it, and refuses the old keys naming the new ones."""
    checkout = _dapo_checkout(tmp_path / "code")
    proc, spec = _imported("recipe_dapo_overlong", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = spec.read_text()
    assert "[reward.manager_kwargs.overlong_buffer_cfg]\nenable = true\nlen = 512\npenalty_factor = 1.0\n" in text
    assert "reward_model.overlong_buffer" not in text
    # Before the move DAPO's code passed data.max_response_length to the reward manager itself.
    assert '"reward.reward_kwargs.max_resp_len=${data.max_response_length}"' in text
    assert "carried from 'reward_model.overlong_buffer.enable'" in proc.stdout
    bundle = write_bundle(compile_spec(spec), tmp_path / "bundles")
    written = "".join(p.read_text() for p in bundle.path.iterdir() if p.is_file())
    assert "reward.reward_kwargs.overlong_buffer_cfg.len=512" in written and "reward_model.overlong_buffer" not in written
    assert "round trip: exact" in proc.stdout and "as the launch so carried" in proc.stdout

    # A spec holding an old key is refused, naming where DAPO's config reads it now.
    spec.write_text(text.replace('"data.gen_batch_size=24",', '"data.gen_batch_size=24", "reward_model.overlong_buffer.len=512",'))
    with pytest.raises(SpecError) as refused:
        compile_spec(spec)
    said = "; ".join(p.render() for p in refused.value.problems)
    assert "has no key 'reward_model.overlong_buffer.len'" in said
    assert "set 'reward.reward_kwargs.overlong_buffer_cfg.len'" in said


def test_a_recipe_launch_setting_a_key_only_07x_has_is_imported_at_071_where_its_code_starts(tmp_path):
    """trainer.use_legacy_worker_impl is gone at 0.8.0: DAPO's code starts at 0.7.1 too (measured, entries.toml),
    so the launch is imported there, exact, instead of at 0.8.0 losing the key."""
    checkout = _dapo_checkout(tmp_path / "code")
    proc, spec = _imported("recipe_dapo_legacy", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "round trip: exact (the spec composes to the identical verl 0.7.1 config)" in proc.stdout
    text = spec.read_text()
    assert '\nentry = "dapo"\n' in text and '"0.7.1"' in text
    bundle = write_bundle(compile_spec(spec), tmp_path / "bundles")
    launch = (bundle.path / "launch.sh").read_text()
    assert 'exec "$python_bin" -m recipe.dapo.main_dapo --config-name dapo_trainer "$@"' in launch
    assert "trainer.use_legacy_worker_impl=disable" in launch


def _entropy_checkout(root: Path) -> Path:
    """A checkout of this test's own in Entropy's layout (recipe/entropy/config): verl's trainer config, whose
    actor.policy_loss.* its clip-cov and kl-cov losses read -- not the recipe's code."""
    config = root / "recipe" / "entropy" / "config"
    config.mkdir(parents=True)
    (config / "entropy_trainer.yaml").write_text(
        "hydra:\n  searchpath:\n    - file://verl/trainer/config\n\ndefaults:\n  - ppo_trainer\n  - _self_\n\n"
        "data:\n  gen_batch_size: ${data.train_batch_size}\n")
    (root / "recipe" / "entropy" / "main_entropy.py").write_text("# stands for the module's place\n")
    return root / "recipe"


def test_a_recipe_launch_spelling_its_loss_keys_where_no_config_has_them_is_carried_once(tmp_path):
    """Entropy's launches set each loss key at actor.policy_loss.* and again at actor.*, which verl refuses:
    the second spelling of a value already set is left out, one set only there is carried (entries.toml)."""
    checkout = _entropy_checkout(tmp_path / "code")
    proc, spec = _imported("recipe_entropy_cov", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "round trip: exact (the spec composes to the identical verl 0.7.0 config as the launch so carried)" \
        in proc.stdout
    assert ("actor_rollout_ref.actor.loss_mode=kl_cov  (left out: the launch sets "
            "'actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov' too") in proc.stdout
    assert "carried from 'actor_rollout_ref.actor.clip_cov_ratio'" in proc.stdout
    text = spec.read_text()
    assert text.count("\"kl_cov\"") == 1 and "actor_rollout_ref.actor.loss_mode" not in text
    assert '"actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.0004"' in text
    launch = (write_bundle(compile_spec(spec), tmp_path / "bundles").path / "launch.sh").read_text()
    assert "-m recipe.entropy.main_entropy --config-name entropy_trainer" in launch


def _grpo_mindspeed_mm_checkout(root: Path) -> Path:
    """A checkout of this test's own in grpo_mindspeed_mm's layout: its module's place, no config (it reads verl's)."""
    (root / "recipe" / "grpo_mindspeed_mm").mkdir(parents=True)
    (root / "recipe" / "grpo_mindspeed_mm" / "main_ppo.py").write_text("# stands for the module's place\n")
    return root / "recipe"


def test_a_recipe_launch_reading_verls_own_trainer_config_imports_exact_and_starts_with_the_installed_one(tmp_path):
    """recipe.grpo_mindspeed_mm.main_ppo reads ../../verl/trainer/config (a verl source tree beside the recipe):
    composed with the release's trainer config, compiled into a launch giving the job's verl's as --config-path."""
    checkout = _grpo_mindspeed_mm_checkout(tmp_path / "code")
    proc, spec = _imported("recipe_grpo_mindspeed_mm", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # trainer.use_legacy_worker_impl=auto is read at 0.7.1 only; the module starts at 0.7.1 and 0.8.0.
    assert "round trip: exact (the spec composes to the identical verl 0.7.1 config)" in proc.stdout
    text = spec.read_text()
    assert '\nentry = "grpo_mindspeed_mm"\n' in text and "[experiment.recipe]" in text
    assert "update_weights_bucket_megabytes = 8192" in text
    launch = (write_bundle(compile_spec(spec), tmp_path / "bundles").path / "launch.sh").read_text()
    assert ('exec "$python_bin" -m recipe.grpo_mindspeed_mm.main_ppo --config-path "$verl_trainer_config" '
            '--config-name ppo_trainer "$@"') in launch
    assert "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=8192" in launch


def test_a_checkout_without_the_modules_file_is_refused_naming_it(tmp_path):
    checkout = _grpo_mindspeed_mm_checkout(tmp_path / "code")
    (checkout / "grpo_mindspeed_mm" / "main_ppo.py").unlink()
    proc, spec = _imported("recipe_grpo_mindspeed_mm", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 2 and not spec.exists() and "Traceback" not in proc.stderr
    assert "no grpo_mindspeed_mm/main_ppo.py there (grpo_mindspeed_mm's module)" in proc.stderr


# -- a recipe whose checkout is its import root (rep_exp): started as a top-level package from inside it -------------


def _rep_exp_checkout(root: Path) -> Path:
    """A checkout of this test's own in rep_exp's layout, named anything: rep_exp/ inside it, whose config folder
    holds a copy of verl's trainer config (here verl 0.7.0's, from its wheel) that rep_exp_trainer extends with no
    search path, and a stand-in module that says where it was imported from and what it was given."""
    import shutil
    import tempfile

    from tutorrl.compiler.release import keyset_import as ki

    package = root / "rep_exp"
    with tempfile.TemporaryDirectory() as tmp:
        ki.extract_config(ki.fetch_wheel("0.7.0"), Path(tmp))
        shutil.copytree(Path(tmp) / "verl" / "trainer" / "config", package / "config")
    (package / "config" / "rep_exp_trainer.yaml").write_text(
        "defaults:\n  - ppo_trainer\n  - _self_\n\nreward_model:\n  elliptical:\n    enable: True\n    lamb: 0.01\n"
        "    sparse_dim: 512\n  reward_kwargs:\n    elliptical:\n      alpha: 1.0\n      beta: 1.0\n")
    (package / "__init__.py").write_text("")
    (package / "main_rep_exp.py").write_text(
        "import os, sys\n"
        "home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"
        "print('rep_exp.main_rep_exp from', home)\n"
        "print('on PYTHONPATH:', home in os.environ.get('PYTHONPATH', '').split(os.pathsep))\n"
        "print('argv:', *sys.argv[1:])\n")
    return root


def test_a_launch_of_a_package_inside_the_checkout_imports_exact_and_its_launch_starts_it_from_the_checkout(tmp_path):
    checkout = _rep_exp_checkout(tmp_path / "code" / "verl-recipe-main")
    proc, spec = _imported("recipe_rep_exp", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # rep_exp is keyed at 0.7.0 only, where its code starts; both launches composed with the checkout's own copy.
    assert "round trip: exact (the spec composes to the identical verl 0.7.0 config)" in proc.stdout
    text = spec.read_text()
    assert '\nentry = "rep_exp"\n' in text
    assert '[experiment.recipe]\npath = "$RECIPE_ROOT/verl-recipe-main"\n' in text
    assert f'RECIPE_ROOT = {{ default = "{tmp_path / "code"}" }}' in text
    assert '"reward_model.elliptical.sparse_dim=32"' in text
    bundle = write_bundle(compile_spec(spec), tmp_path / "bundles")
    launch = (bundle.path / "launch.sh").read_text()
    assert 'export PYTHONPATH="$(cd "$recipe_dir" && pwd)${PYTHONPATH:+:$PYTHONPATH}"' in launch
    assert 'exec "$python_bin" -m rep_exp.main_rep_exp --config-name rep_exp_trainer "$@"' in launch
    assert "hydra.searchpath" not in launch
    assert '"rep_exp/config/rep_exp_trainer.yaml"' in (bundle.path / "spec.toml").read_text()

    # Real bash runs launch.sh from another folder, with a Python whose verl says 0.7.0 (its metadata only): the
    # recipe check passes and the stand-in module starts from the checkout itself, with the launch's overrides.
    fake = tmp_path / "site"
    (fake / "verl-0.7.0.dist-info").mkdir(parents=True)
    (fake / "verl-0.7.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: verl\nVersion: 0.7.0\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TUTORRL_PYTHON": sys.executable, "PYTHONPATH": str(fake)}
    ran = subprocess.run(["bash", str(bundle.path / "launch.sh")], capture_output=True, text=True, env=env,
                         cwd=tmp_path / "bundles", timeout=120, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert f"rep_exp.main_rep_exp from {checkout}\non PYTHONPATH: True\n" in ran.stdout
    assert "--config-name rep_exp_trainer" in ran.stdout and "reward_model.elliptical.sparse_dim=32" in ran.stdout


def test_a_package_inside_the_checkout_given_a_folder_without_it_is_refused_naming_what_it_needs(tmp_path):
    checkout = _rep_exp_checkout(tmp_path / "code" / "verl-recipe")
    # Its package folder, not the checkout holding it.
    proc, spec = _imported("recipe_rep_exp", tmp_path, "--recipe", str(checkout / "rep_exp"))
    assert proc.returncode == 2 and not spec.exists() and "Traceback" not in proc.stderr
    assert (f"--recipe {checkout / 'rep_exp'}: no rep_exp/main_rep_exp.py there: rep_exp.main_rep_exp is imported "
            "from the folder holding rep_exp/ (launch.sh puts that folder itself on PYTHONPATH)") in proc.stderr
    # Without one, the refusal says what to give.
    proc, spec = _imported("recipe_rep_exp", tmp_path)
    assert proc.returncode == 2 and not spec.exists()
    assert "give --recipe PATH, a checkout of https://github.com/verl-project/verl-recipe at e7f889574b83 holding " \
           "rep_exp/" in proc.stderr
    (checkout / "rep_exp" / "config" / "rep_exp_trainer.yaml").unlink()
    proc, spec = _imported("recipe_rep_exp", tmp_path, "--recipe", str(checkout))
    assert proc.returncode == 2 and "no rep_exp/config/rep_exp_trainer.yaml there (rep_exp's config)" in proc.stderr
