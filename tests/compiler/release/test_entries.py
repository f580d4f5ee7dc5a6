"""Entry points other than main_ppo: each is checked against its own config, per release.

Real key sets (composed from each release's wheel), real locks, the real compiler.
"""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

import msgspec
import pytest

import support
from tutorrl.compiler import compile_spec
from tutorrl.compiler.pipeline.compile import compile_bytes
from tutorrl.compiler.release import keyset_import as ki, keysets as ks
from tutorrl.compiler.release.entries import DEFAULT, find_entry, load_entries
from tutorrl.compiler.release.keymap import LOCK_SCHEMA, Lock, entry_at, load_lock, lock_path, supported_releases
from tutorrl.errors import SpecError

KEYSET_DIR = Path(ks.__file__).parent / "keysets"
FA = "verl.experimental.fully_async_policy.fully_async_main"
OSO = "verl.experimental.one_step_off_policy.main_ppo"


def spec(entry: str | None = None, verl: str = "0.9.1", extra: tuple[str, ...] = (), strategy: str | None = None) -> str:
    lines = ["[experiment]", 'name = "e"', f'verl = "{verl}"']
    if entry is not None:
        lines.append(f'entry = "{entry}"')
    lines += ["", "[data]", 'train = "t.parquet"', 'val = "v.parquet"', "", "[trainer]", 'loggers = ["console"]']
    if strategy:
        lines += ["", "[actor]", f'strategy = "{strategy}"']
    if extra:
        lines += ["", "[verl]", "extra_overrides = ["] + [f'  "{e}",' for e in extra] + ["]"]
    return "\n".join(lines) + "\n"


def compiled(text: str):
    return compile_bytes(text.encode(), "s.toml")


def refused(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        compiled(text)
    return [p.render() for p in info.value.problems]


# -- which entry a spec names ---------------------------------------------------------------------------------------


def test_an_entry_is_named_by_its_name_or_its_module_and_unset_is_main_ppo():
    assert find_entry(None).name == DEFAULT and find_entry(None).module == "verl.trainer.main_ppo"
    assert find_entry("fully_async").module == FA
    assert find_entry(FA).name == "fully_async" and find_entry(OSO).name == "one_step_off"
    assert find_entry("verl.trainer.main_ppo").name == DEFAULT
    assert find_entry("recipe.nothing.main") is None


def test_main_ppo_is_found_without_reading_entries_toml_and_is_its_table():
    # find_entry answers ppo from the code (a compile of a main_ppo spec reads no entries.toml): the same entry.
    assert find_entry(None) == find_entry(DEFAULT) == load_entries()[DEFAULT]
    assert next(iter(load_entries())) == DEFAULT


def test_the_module_path_and_the_name_compile_to_one_bundle_and_ppo_to_main_ppos():
    by_name, by_module = compiled(spec("fully_async")), compiled(spec(FA))
    assert by_name.files == by_module.files
    # Saying main_ppo changes no byte: main_ppo's bundles are what they were.
    assert compiled(spec("ppo")).files == compiled(spec(None)).files == compiled(spec("verl.trainer.main_ppo")).files
    plain = compiled(spec(None))
    assert b"entry" not in plain.files["manifest.json"] and b"entry" not in plain.files["spec.toml"]
    assert b"tutorrl_entry" not in plain.files["ray-job.json"]


def test_the_bundle_starts_the_entrys_module_with_its_own_config_and_says_so():
    fa = compiled(spec("fully_async"))
    launch = fa.files["launch.sh"].decode()
    assert f'exec "$python_bin" -m {FA} --config-name fully_async_ppo_trainer "$@"' in launch
    # The entry's yaml finds verl's trainer config from the installed wheel, and Hydra takes the
    # search path only among the overrides (after "$@": `--cfg job`).
    assert "\\\n  'hydra.searchpath=[pkg://verl.trainer.config]' \\\n" in launch
    assert fa.manifest.entry == "fully_async" and b'"entry": "fully_async"' in fa.files["manifest.json"]
    assert 'entry = "fully_async"' in fa.files["spec.toml"].decode()
    assert b'"tutorrl_entry": "fully_async"' in fa.files["ray-job.json"]
    mega = compiled(spec("one_step_off", strategy="megatron")).files["launch.sh"].decode()
    assert f"-m {OSO} --config-name one_step_off_ppo_megatron_trainer " in mega
    plain = compiled(spec(None)).files["launch.sh"].decode()
    assert 'exec "$python_bin" -m verl.trainer.main_ppo --config-name ppo_trainer "$@"' in plain
    assert "hydra.searchpath" not in plain


def test_an_unknown_entry_is_located_and_names_the_known_ones():
    (problem,) = refused(spec("recipe.nothing.main_nothing"))
    assert problem.startswith("s.toml:4:1: experiment.entry: tutorrl knows no verl entry point 'recipe.nothing.main_nothing'")
    for entry in load_entries().values():
        assert f"{entry.name} ({entry.module})" in problem
    assert "entries.toml" in problem


def test_an_entry_a_release_lacks_is_located_and_names_the_releases_where_it_exists():
    (problem,) = refused(spec("fully_async", verl="0.7.1"))
    assert problem.startswith("s.toml:4:1: experiment.entry: entry point 'fully_async' "
                              f"({FA}) exists from verl 0.8.0; this spec targets verl 0.7.1"), problem
    assert "target one of those releases in experiment.verl" in problem
    with pytest.raises(SpecError):
        entry_at("one_step_off", "0.2.0.post2")
    assert entry_at("one_step_off", "0.8.0").name == "one_step_off"


# -- checked as strictly as main_ppo, against the entry's own config -------------------------------------------------


def test_an_entry_only_key_is_read_with_its_entry_and_refused_without_it():
    text = ("async_training.staleness_threshold=0.5", "rollout.nnodes=1", "rollout.n_gpus_per_node=4")
    launch = compiled(spec("fully_async", extra=text)).files["launch.sh"].decode()
    assert "async_training.staleness_threshold=0.5" in launch and "rollout.n_gpus_per_node=4" in launch
    # one_step_off has rollout.nnodes but no async_training; main_ppo has neither.
    problems = refused(spec("one_step_off", extra=text))
    assert len(problems) == 1 and "verl 0.9.1's one_step_off (fsdp) has no key 'async_training.staleness_threshold'" \
        in problems[0]
    problems = refused(spec(None, extra=text))
    assert len(problems) == 3 and all("verl 0.9.1 (fsdp) has no key" in p for p in problems)


def test_an_unknown_key_in_a_fully_async_spec_is_located_with_did_you_mean():
    (problem,) = refused(spec("fully_async", extra=("async_training.stalenes_threshold=0.5",)))
    assert problem == ("s.toml:15:3: verl.extra_overrides.0: verl 0.9.1's fully_async (fsdp) has no key "
                       "'async_training.stalenes_threshold' (did you mean 'async_training.staleness_threshold'?)"), problem


@pytest.mark.parametrize("entry", ["fully_async", "one_step_off"])
def test_keys_verl_takes_and_never_reads_are_refused_per_entry(entry):
    # A key the release's facts say verl accepts and ignores (the entry's workers are main_ppo's).
    (ignored,) = refused(spec(entry, extra=("actor_rollout_ref.actor.grad_clip=1.0",)))
    assert "would be accepted and ignored by verl 0.9.1" in ignored
    # A '+' key under a section verl builds into a dataclass stops verl: the entry's own built/ data.
    (built,) = refused(spec(entry, extra=("+actor_rollout_ref.actor.my_new_knob=1",)))
    assert f"verl 0.9.1's {entry} (fsdp) builds" in built and "would stop verl" in built
    # A '+' key nothing reads, with no open table above it.
    (unread,) = refused(spec(entry, extra=("+trainer.my_new_knob=1",)))
    assert "verl would accept it and never read it" in unread


def test_a_setting_keeps_the_entrys_own_default_in_the_bundle():
    # one_step_off's config turns free_cache_engine off; the bundle states that entry's default.
    assert load_lock("0.9.1", "fsdp", "one_step_off").targets["rollout.free_cache_engine"].default is False
    assert load_lock("0.9.1", "fsdp").targets["rollout.free_cache_engine"].default is True
    text = compiled(spec("one_step_off")).files["spec.toml"].decode()
    assert "# rollout.free_cache_engine = false" in text


def test_retargeting_an_entry_spec_across_releases():
    for release in ("0.8.0", "0.9.0", "0.9.1"):
        for strategy in (None, "megatron"):
            assert compiled(spec("fully_async", verl=release, strategy=strategy,
                                 extra=("async_training.require_batches=2",))).manifest.verl == release


# -- the data: every entry, every release it exists at, every variant ------------------------------------------------


def test_every_entry_release_and_variant_has_its_key_set_and_lock_and_nothing_else():
    entries = [e for e in load_entries().values() if not e.default]
    assert {e.name for e in entries} >= {"fully_async", "one_step_off", "dapo", "entropy", "prime", "spin", "flowrl",
                                         "gvpo", "grpo_mindspeed_mm", "rep_exp"}
    want = {ks.keyset_name(r, v, e.name) for e in entries for r in e.releases for v in e.variants}
    have = {p.name for p in KEYSET_DIR.glob("verl-*@*.json")}
    assert have == want
    locks = {p.name for p in lock_path("0.9.1", "fsdp").parent.glob("verl-*@*.json")}
    assert locks == want
    for e in entries:
        assert set(e.releases) <= set(supported_releases())
        for r in e.releases:
            for v in e.variants:
                # Read from its file: a recipe entry's lock is not loaded for a compile yet (refused).
                keyset, lock = ks.load_keyset(r, v, e.name), msgspec.json.decode(
                    lock_path(r, v, e.name).read_bytes(), type=Lock)
                if e.trainer_config:
                    # verl's own trainer config: main_ppo's key set, variant choice and lock, under its name.
                    ppo, ppo_lock = ks.load_keyset(r, v), load_lock(r, v)
                    assert (keyset.entry, keyset.config_name, keyset.overrides, keyset.keys) == (
                        e.name, ppo.config_name, ppo.overrides, ppo.keys)
                    assert (lock.entry, lock.config_name, lock.select, lock.targets, lock.absent) == (
                        e.name, ppo_lock.config_name, ppo_lock.select, ppo_lock.targets, ppo_lock.absent)
                    continue
                assert (keyset.entry, keyset.config_name, keyset.overrides) == (e.name, e.config_name(v), [])
                assert (lock.schema, lock.entry, lock.config_name, lock.select) == (LOCK_SCHEMA, e.name,
                                                                                   e.config_name(v), ())
                # The entry's config extends main_ppo's: every key of that release's main_ppo is there. One with
                # no search path extends its own copy of verl's trainer config instead (rep_exp's, older).
                assert (set(ks.load_keyset(r, v).keys) <= set(keyset.keys)) == bool(e.searchpath), (r, v, e.name)


def test_main_ppos_locks_and_key_sets_do_not_name_an_entry():
    for release in supported_releases():
        for variant in ks.VARIANTS:
            assert b'"entry"' not in lock_path(release, variant).read_bytes()
            assert b'"entry"' not in (KEYSET_DIR / ks.keyset_name(release, variant)).read_bytes()


# -- re-derived from the wheels ---------------------------------------------------------------------------------------


@pytest.mark.wheels
@pytest.mark.parametrize("release", supported_releases())
def test_entry_key_sets_are_rederived_from_the_wheel_and_exist_where_the_wheel_ships_the_module(release):
    try:
        wheel = ki.fetch_wheel(release)
    except ki.KeysetImportError as exc:
        pytest.fail(f"verl {release} wheel unavailable (needs the package index or a cached wheel): {exc}")
    with tempfile.TemporaryDirectory() as tmp:
        ki.extract_config(wheel, Path(tmp))
        shipped = {e.name for e in ki.wheel_entries(Path(tmp))}
        assert shipped == {e.name for e in load_entries().values()
                           if e.source == "wheel" and not e.default and release in e.releases}
        for keyset in ki.entry_keysets(Path(tmp), release):
            committed = KEYSET_DIR / ks.keyset_name(release, keyset.variant, keyset.entry)
            assert ki.encode_keyset(keyset) == committed.read_bytes(), f"{committed.name} is not what the wheel composes"
    if release == "0.7.1":
        # The configs are in 0.7.1's wheel, the modules are not: no entry there.
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
        assert "verl/experimental/fully_async_policy/config/fully_async_ppo_trainer.yaml" in names
        assert "verl/experimental/fully_async_policy/fully_async_main.py" not in names


def test_the_example_specs_of_each_entry_compile():
    for name, entry in (("fully_async_example.toml", "fully_async"), ("one_step_off_example.toml", "one_step_off")):
        assert compile_spec(support.SPECS / name).manifest.entry == entry


def test_migrate_says_the_entry_and_that_a_release_without_it_stops_the_compile(tmp_path):
    from tutorrl.compiler.pipeline.migrate import Migrated, migrate_spec
    from tutorrl.compiler.text import migration_text
    from tutorrl.compiler.spec import parse_spec
    from tutorrl.compiler.spec.normal_form import normalize

    as_written, locate = parse_spec(spec("fully_async", extra=("async_training.require_batches=2",)).encode(), "s.toml")
    normal = normalize(as_written)
    ok = migrate_spec(normal, "0.9.1", "0.8.0", as_written=as_written, locate=locate)
    assert ok.compiles and ok.selection_after.config_name == "fully_async_ppo_trainer"
    assert "entry point: fully_async (python -m " + FA + ")" in migration_text(Migrated(ok, "s.toml", normal.experiment.entry))
    stopped = migrate_spec(normal, "0.9.1", "0.7.1", as_written=as_written, locate=locate)
    assert not stopped.compiles
    assert [b.spec_field for b in stopped.blockers] == ["experiment.entry"]
    assert "exists from verl 0.8.0; this spec targets verl 0.7.1" in stopped.blockers[0].message


# -- a recipe outside the wheel (DAPO) ------------------------------------------------------------------------------


def test_a_recipe_entry_needs_its_code_named_and_exists_only_where_its_key_sets_do():
    (problem,) = refused(spec("dapo", verl="0.9.0"))
    assert problem.startswith("s.toml:4:1: experiment.entry: entry point 'dapo' (recipe.dapo.main_dapo) runs a "
                              "recipe's code from outside verl's wheel; the spec must say where that code is"), problem
    assert "https://github.com/verl-project/verl-recipe at e7f889574b83" in problem
    (problem,) = refused(spec("dapo", verl="0.9.1"))
    assert "exists in verl 0.7.1 to 0.9.0" in problem
    # Measured: its code starts at 0.7.1 and 0.8.0, stops at import at 0.9.0 (keyed: that tree pins the commit) and
    # at 0.7.0 (not keyed).
    dapo = find_entry("dapo")
    assert [r for r in ("0.7.0", "0.7.1", "0.8.0", "0.9.0") if dapo.runs_at(r)] == ["0.7.1", "0.8.0"]
    assert dapo.exists_at("0.9.0") and not dapo.exists_at("0.7.0")
    # Its key sets are the recipe's own config: DAPO's reward kwargs exist only there.
    assert ks.load_keyset("0.9.0", "fsdp", "dapo").has("reward.reward_kwargs.overlong_buffer_cfg.len")
    assert not ks.load_keyset("0.9.0", "fsdp").has("reward.reward_kwargs.overlong_buffer_cfg.len")


def test_entropy_is_keyed_from_its_own_fsdp_config_and_a_megatron_spec_of_it_is_refused_by_name():
    entropy = find_entry("recipe.entropy.main_entropy")
    assert (entropy.name, entropy.source, entropy.variants) == ("entropy", "recipe", ("fsdp",))
    # Its code starts at 0.7.0 only (the newest wheel with compute_reward); 0.9.0 is keyed, as that tree pins it.
    assert [r for r in ("0.7.0", "0.7.1", "0.8.0", "0.9.0") if entropy.runs_at(r)] == ["0.7.0"]
    assert "reward_model.overlong_buffer.len" in ks.load_keyset("0.7.0", "fsdp", "entropy").keys
    # The recipe's own keys (its overlong buffer under reward_model) are in its key set, not main_ppo's.
    own = set(ks.load_keyset("0.9.0", "fsdp", "entropy").keys) - set(ks.load_keyset("0.9.0", "fsdp").keys)
    assert "reward_model.overlong_buffer.len" in own and len(own) == 5
    assert not (KEYSET_DIR / ks.keyset_name("0.9.0", "megatron", "entropy")).exists()
    with pytest.raises(SpecError) as info:
        load_lock("0.9.0", "megatron", "entropy")
    (problem,) = info.value.problems
    assert problem.key == "experiment.entry"
    assert problem.message == ("entry point 'entropy' (recipe.entropy.main_entropy) has no megatron config: its own "
                               "Hydra config is for fsdp (entropy_trainer) only")
    (located,) = refused(spec("entropy", verl="0.9.0", strategy="megatron"))
    assert located.startswith("s.toml:4:1: experiment.entry: entry point 'entropy'") and "no megatron config" in located


def _recipe(root: Path) -> Path:
    """A small recipe of this test's own: a config extending verl's trainer config by one table."""
    config = root / "dapo" / "config"
    config.mkdir(parents=True)
    for name in ("dapo_trainer", "dapo_megatron_trainer"):
        base = "ppo_trainer" if name == "dapo_trainer" else "ppo_megatron_trainer"
        (config / f"{name}.yaml").write_text(
            f"hydra:\n  searchpath:\n    - file://verl/trainer/config\n\ndefaults:\n  - {base}\n  - _self_\n\n"
            "my_recipe:\n  knob: 3\n  name: tiny\n")
    return root


@pytest.mark.needs_verl
def test_a_recipe_config_composes_from_its_own_folder_over_the_releases_trainer_config(tmp_path):
    site = Path(support.verl_config_dir()).parents[2]
    recipe = _recipe(tmp_path / "recipe")
    keyset = ki.compose_entry_keyset(site, "0.9.1", "fsdp", find_entry("dapo"), recipe)
    assert (keyset.entry, keyset.config_name) == ("dapo", "dapo_trainer")
    assert keyset.keys["my_recipe.knob"].default == 3 and keyset.keys["my_recipe.name"].default == "tiny"
    assert set(ks.load_keyset("0.9.1", "fsdp").keys) | {"my_recipe.knob", "my_recipe.name"} == set(keyset.keys)


def test_the_recipe_key_set_tool_refuses_to_run_without_the_recipes_source(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(support.REPO / "tools" / "recipe_keysets.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "has no dapo/config/dapo_trainer.yaml, dapo/config/dapo_megatron_trainer.yaml" in proc.stderr
    assert "check out https://github.com/verl-project/verl-recipe at e7f889574b8301cc0f0fc1d57c6d67f31ffeb689" \
        in proc.stderr
    # An entry reading verl's own trainer config needs only its module's file from the checkout.
    proc = subprocess.run([sys.executable, str(support.REPO / "tools" / "recipe_keysets.py"), str(tmp_path),
                           "--entry", "grpo_mindspeed_mm", "--check"], capture_output=True, text=True)
    assert proc.returncode == 2 and "has no grpo_mindspeed_mm/main_ppo.py: check out" in proc.stderr, proc.stderr


@pytest.mark.parametrize("entry,trainer", [("fully_async", "FullyAsyncTrainer"), ("one_step_off", "RayPPOTrainer")])
def test_the_evidence_callback_is_refused_for_an_entry_whose_trainer_never_calls_it(entry, trainer):
    text = spec(entry).replace('loggers = ["console"]', 'loggers = ["console"]\nevidence_callback = true')
    (problem,) = refused(text)
    assert problem.startswith(f"s.toml:12:1: trainer.evidence_callback: verl 0.9.1's entry point '{entry}' ("), problem
    assert "never reads trainer.checkpoint_callback_class" in problem and trainer in problem
    assert "leave trainer.evidence_callback unset for this entry point" in problem
    # The fact is the entry's data, not main_ppo's: main_ppo takes the same spec; off writes nothing and compiles.
    assert "trainer.checkpoint_callback_class" in find_entry(entry).never_reads
    assert compiled(text.replace(f'entry = "{entry}"\n', "")).manifest.entry in ("", "ppo", None)
    compiled(text.replace("evidence_callback = true", "evidence_callback = false"))


@pytest.mark.parametrize("entry,own", [("prime", "data.filter_accuracy"), ("spin", "actor_rollout_ref.actor.dpo_beta"),
                                       ("gvpo", "actor_rollout_ref.actor.gvpo_beta"), ("spo", "trainer.spo.enable"),
                                       ("sppo", "actor_rollout_ref.actor.sppo_eta")])
def test_each_recipe_entry_is_keyed_from_its_own_config_where_its_code_starts(entry, own):
    e = find_entry(entry)
    assert (e.source, e.variants, e.stops) == ("recipe", ("fsdp",), {})
    for release in e.releases:
        assert ks.load_keyset(release, "fsdp", entry).has(own) and not ks.load_keyset(release, "fsdp").has(own)
    # A spec of it needs its code named, as DAPO's does; a release it is not keyed at names the ones it is.
    (problem,) = refused(spec(entry, verl=e.releases[-1]))
    assert "runs a recipe's code from outside verl's wheel" in problem, problem
    (problem,) = refused(spec(entry, verl="0.9.1"))
    assert f"entry point '{entry}' ({e.module})" in problem and "0.9.1" in problem, problem


def test_a_module_that_is_not_an_entry_says_why_and_names_no_entry():
    from tutorrl.compiler.release import not_entry

    modules = {e.module for e in load_entries().values()}
    gkd = not_entry("main_gkd")
    assert gkd is not None and "recipe.gkd.ray_trainer" in gkd.why and gkd.starts == ()
    dance = not_entry("recipe.dance_grpo.dance_grpo_mindspeed_mm.main_dance")
    assert dance.starts == ("0.7.1", "0.8.0") and "what tutorrl knows of how a key is read" in dance.why
    # grpo_mindspeed_mm reads verl's own trainer config: an entry now, no longer a not_entry row.
    assert not_entry(GMM) is None and find_entry(GMM).name == "grpo_mindspeed_mm"
    assert not_entry("recipe.prime.main_prime") is None and "recipe.prime.main_prime" in modules
    for module in ("main_gkd", "recipe.fault_recover.main_ppo"):
        assert module not in modules and not_entry(module).why
    # rep_exp, started as a top-level package from inside the checkout, is an entry (import_root), no longer a row.
    assert not_entry("rep_exp.main_rep_exp") is None and find_entry("rep_exp.main_rep_exp").name == "rep_exp"
    # SPO and SPPO start at 0.7.0 only (compute_reward): entries keyed there, no longer not_entry rows.
    for module in ("recipe.spo.spo_main_ppo", "recipe.sppo.main_sppo"):
        assert not_entry(module) is None and find_entry(module).releases == ("0.7.0",)


# -- a recipe reading verl's own trainer config (grpo_mindspeed_mm) -------------------------------------------------

GMM = "recipe.grpo_mindspeed_mm.main_ppo"


def _gmm_spec(root: Path, verl: str, strategy: str | None = None) -> str:
    """A spec of grpo_mindspeed_mm with a stand-in checkout of this test's own (its module's place only)."""
    (root / "recipe" / "grpo_mindspeed_mm").mkdir(parents=True, exist_ok=True)
    (root / "recipe" / "grpo_mindspeed_mm" / "main_ppo.py").write_text("# stands for the module's place\n")
    text = spec("grpo_mindspeed_mm", verl=verl, strategy=strategy)
    return text.replace("\n\n[data]", f'\n\n[experiment.recipe]\npath = "{root / "recipe"}"\n\n[data]', 1)


def test_grpo_mindspeed_mm_is_keyed_as_main_ppo_where_its_code_starts():
    e = find_entry(GMM)
    assert (e.name, e.source, e.trainer_config, e.variants) == ("grpo_mindspeed_mm", "recipe", True, ("fsdp", "megatron"))
    # Measured: its code starts at 0.7.1 and 0.8.0 (0.9.0 and 0.7.0 stop at import): keyed there only.
    assert e.releases == ("0.7.1", "0.8.0") and all(e.runs_at(r) for r in e.releases)
    assert not e.exists_at("0.9.0") and not e.hydra_args()
    (problem,) = refused(spec("grpo_mindspeed_mm", verl="0.9.1"))
    assert f"entry point 'grpo_mindspeed_mm' ({GMM}) exists in verl 0.7.1 to 0.8.0" in problem, problem


@pytest.mark.parametrize("verl,strategy", [("0.7.1", None), ("0.8.0", None), ("0.8.0", "megatron")])
def test_grpo_mindspeed_mm_starts_its_module_with_the_installed_verls_trainer_config(tmp_path, verl, strategy):
    bundle = compiled(_gmm_spec(tmp_path, verl, strategy))
    assert bundle.manifest.entry == "grpo_mindspeed_mm"
    launch = bundle.files["launch.sh"].decode()
    ppo = compiled(spec(None, verl=verl, strategy=strategy)).files["launch.sh"].decode()
    # main_ppo's config name and overrides (the variant's config-group choice included), its module and folder.
    head = f'-m {GMM} --config-path "$verl_trainer_config" --config-name '
    assert launch.count(head) == 1
    assert launch.split(head)[1] == ppo.split("-m verl.trainer.main_ppo --config-name ")[1]
    # The folder is the job's own verl's, found without importing it, and checked to hold the config.
    found = launch.split('verl_trainer_config="$(')[1]
    # (Read as text here: this test needs no verl; the one below runs the program.)
    assert "importlib.util.find_spec(" in found and '"verl"' in found and '"trainer", "config"' in found
    assert "ppo_trainer.yaml" in found and found.index("|| exit 3") < found.index("exec ")
    assert "verl_trainer_config" not in ppo
    # A spec naming its own config folder keeps it (nothing computed).
    own = compiled(_gmm_spec(tmp_path, verl).replace('name = "e"', 'name = "e"\nconfig_path = "/cfg"'))
    assert '--config-path /cfg --config-name' in own.files["launch.sh"].decode()
    assert "verl_trainer_config" not in own.files["launch.sh"].decode()


@pytest.mark.needs_verl
def test_the_launchs_config_folder_program_names_the_installed_verls_trainer_config(tmp_path):
    import subprocess
    import sys

    launch = compiled(_gmm_spec(tmp_path, "0.8.0")).files["launch.sh"].decode()
    program = launch.split("verl_trainer_config=\"$(\"$python_bin\" -c '")[1].split("')\" || exit 3")[0]
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert Path(proc.stdout.strip()) == Path(support.verl_config_dir())
    (tmp_path / "verl").mkdir()
    (tmp_path / "verl" / "__init__.py").write_text("")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 1 and "has no verl/trainer/config/ppo_trainer.yaml beside its verl" in proc.stderr


# -- a recipe whose checkout is its import root (rep_exp) -------------------------------------------------------------


def _rep_exp_checkout(root: Path) -> Path:
    """A checkout of this test's own in rep_exp's layout: the package rep_exp/ inside it (its module's file, its
    config folder), the checkout named anything."""
    (root / "rep_exp" / "config").mkdir(parents=True)
    (root / "rep_exp" / "main_rep_exp.py").write_text("# stands for the module's place\n")
    (root / "rep_exp" / "config" / "rep_exp_trainer.yaml").write_text("defaults:\n  - _self_\n")
    return root


def test_rep_exp_is_an_entry_whose_checkout_is_its_import_root_keyed_from_its_own_copy_of_verls_config():
    e = find_entry("rep_exp.main_rep_exp")
    assert (e.name, e.source, e.import_root, e.variants, e.releases, e.searchpath) == (
        "rep_exp", "recipe", "checkout", ("fsdp",), ("0.7.0",), ())
    assert (e.module_dir(), e.module_file()) == ("rep_exp", "rep_exp/main_rep_exp.py")
    assert find_entry("dapo").module_dir() == "dapo" and find_entry("dapo").checkout_is_package
    # Its own keys (the elliptical reward) are in its key set only; its copy of verl's config is older than 0.7.0's.
    own = ks.load_keyset("0.7.0", "fsdp", "rep_exp")
    assert own.has("reward_model.elliptical.sparse_dim") and not ks.load_keyset("0.7.0", "fsdp").has(
        "reward_model.elliptical.sparse_dim")
    assert not own.has("reward_model.use_reward_loop") and ks.load_keyset("0.7.0", "fsdp").has(
        "reward_model.use_reward_loop")
    # A setting whose key that copy lacks has no home in its lock, and the refusal says whose config lacks it.
    assert "a copy of verl's trainer config in its own folder" in load_lock("0.7.0", "fsdp", "rep_exp").absent[
        "reward.model.use_reward_loop"]
    # Without its code named, the hint is the checkout holding rep_exp/, not a folder named after it.
    (problem,) = refused(spec("rep_exp", verl="0.7.0"))
    assert 'add [experiment.recipe] path = "<checkout>"' in problem and "the folder holding rep_exp/" in problem
    assert not (KEYSET_DIR / ks.keyset_name("0.7.0", "megatron", "rep_exp")).exists()


def test_a_rep_exp_spec_puts_its_checkout_itself_on_pythonpath_and_refuses_a_folder_without_its_package(tmp_path):
    checkout = _rep_exp_checkout(tmp_path / "any-name")
    text = spec("rep_exp", verl="0.7.0").replace('entry = "rep_exp"\n',
                                                  f'entry = "rep_exp"\n\n[experiment.recipe]\npath = "{checkout}"\n')
    launch = compiled(text).files["launch.sh"].decode()
    assert 'export PYTHONPATH="$(cd "$recipe_dir" && pwd)${PYTHONPATH:+:$PYTHONPATH}"' in launch
    assert 'exec "$python_bin" -m rep_exp.main_rep_exp --config-name rep_exp_trainer "$@"' in launch
    assert "hydra.searchpath" not in launch
    # Its package folder is not its checkout: refused, naming the file it looked for and what to name instead.
    (problem,) = refused(text.replace(f'path = "{checkout}"', f'path = "{checkout / "rep_exp"}"'))
    assert f"experiment.recipe.path: the recipe folder '{checkout / 'rep_exp'}' has no rep_exp/main_rep_exp.py: " \
           "rep_exp.main_rep_exp is imported from the folder holding rep_exp/" in problem, problem
    assert "not a folder inside it" in problem
    (problem,) = refused(text + "\n[reward.model]\nuse_reward_loop = true\n")
    assert problem.startswith("s.toml:17:1: reward.model.use_reward_loop: 'reward.model.use_reward_loop' has no key "
                              "in verl 0.7.0's rep_exp (fsdp)"), problem
    assert "declares no 'reward_model.use_reward_loop'" in problem


def test_a_recipe_whose_folder_is_its_top_package_still_puts_the_folder_above_it_on_pythonpath(tmp_path):
    checkout = tmp_path / "recipe"
    (checkout / "spo").mkdir(parents=True)
    (checkout / "spo" / "spo_main_ppo.py").write_text("# stands for the module's place\n")
    text = spec("spo", verl="0.7.0").replace('entry = "spo"\n', f'entry = "spo"\n\n[experiment.recipe]\npath = "{checkout}"\n')
    launch = compiled(text).files["launch.sh"].decode()
    assert 'export PYTHONPATH="$(cd "$recipe_dir/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"' in launch


def test_the_recipe_key_set_of_an_entry_without_a_search_path_composes_from_its_folder_alone(tmp_path):
    """rep_exp's config names ppo_trainer in its own folder: composed with no release trainer config beside it
    (an empty wheel folder), where an entry with a search path would need one."""
    checkout = tmp_path / "checkout"
    config = checkout / "rep_exp" / "config"
    config.mkdir(parents=True)
    (config / "rep_exp_trainer.yaml").write_text("defaults:\n  - ppo_trainer\n  - _self_\n\nreward_model:\n"
                                                "  elliptical:\n    sparse_dim: 512\n")
    (config / "ppo_trainer.yaml").write_text("trainer:\n  total_epochs: 30\nreward_model:\n  enable: false\n")
    (tmp_path / "wheel").mkdir()
    keyset = ki.compose_entry_keyset(tmp_path / "wheel", "0.7.0", "fsdp", find_entry("rep_exp"), checkout)
    assert (keyset.entry, keyset.config_name) == ("rep_exp", "rep_exp_trainer")
    assert set(keyset.keys) == {"trainer.total_epochs", "reward_model.enable", "reward_model.elliptical.sparse_dim"}
