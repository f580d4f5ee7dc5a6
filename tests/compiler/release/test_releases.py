"""Every supported verl release: the key map checked against the release's own
key set, and example specs compiled, launched through the real launch.sh (real
bash, a stand-in `python` that records its argv) and composed with Hydra
against the release's real trainer config from its wheel.

Wheels come from pip into ~/.cache/tutorrl/wheels (or $TUTORRL_WHEEL_CACHE)
and are reused; only verl/trainer/config is extracted.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings as hsettings, strategies as st

import support
from compiler_helpers import CHESS, FSDP_CUSTOM, spec_at
from tutorrl.compiler.bundle.store import write_bundle
from tutorrl.compiler.pipeline.assemble import spec_settings
from tutorrl.compiler.pipeline.compile import compile_bytes
from tutorrl.compiler.pipeline.resolve import resolve
from tutorrl.compiler.release import keyset_import as ki
from tutorrl.compiler.release.keymap import (
    VARIANTS,
    build_lock,
    encode_lock,
    in_range,
    load_keymap,
    load_lock,
    lock_path,
    release_tuple,
)
from tutorrl.compiler.release.keysets import available_keysets, load_keyset
from tutorrl.compiler.spec.flat import NOT_SETTINGS, variant_of
from tutorrl.compiler.spec.load import parse_spec
from tutorrl.compiler.spec.normal_form import normalize
from tutorrl.errors import SpecError

RELEASES = load_keymap().releases
PAIRS = [(r, v) for r in RELEASES for v in VARIANTS]


def test_every_release_with_a_key_set_is_mapped():
    assert sorted(RELEASES, key=release_tuple) == RELEASES
    assert set(PAIRS) == set(available_keysets())


@pytest.mark.parametrize("release,variant", PAIRS)
def test_committed_lock_is_what_the_map_and_key_set_derive(release, variant):
    assert lock_path(release, variant).read_bytes() == encode_lock(build_lock(release, variant))


@pytest.mark.parametrize("release,variant", PAIRS)
def test_every_locked_key_is_read_by_its_release(release, variant):
    """Plain keys are declared; `+` keys are not, and each has a reason verl reads it."""
    keymap = load_keymap()
    keyset = load_keyset(release, variant)
    lock = load_lock(release, variant)
    assert (lock.config_name, list(lock.select)) == (keyset.config_name, keyset.overrides)
    undeclared = {f.key for f in keymap.facts.undeclared if f.holds(release, variant)}
    for setting, target in lock.targets.items():
        assert lock.ignored_by(target.key) is None, (setting, target.key)
        if target.kind == "table":
            for sub in target.declared:
                assert keyset.has(f"{target.key}.{sub}")
            assert target.passthrough or target.open or target.declared or keyset.has(target.key), setting
            continue
        if not target.plus:
            assert keyset.has(target.key) and not keyset.keys[target.key].open, (setting, target.key)
            continue
        assert not keyset.has(target.key), f"{setting}: {target.key} exists in verl {release}; no '+'"
        entry = keymap.setting[setting].at(release, variant)
        assert (target.key in undeclared or entry.undeclared or keyset.open_parent(target.key)
                or lock.passthrough_above(target.key)), f"{setting}: +{target.key} is read by nothing in {release}"


@pytest.mark.parametrize("release,variant", PAIRS)
def test_ignored_keys_are_declared_where_they_are_ignored(release, variant):
    keyset = load_keyset(release, variant)
    for ignored in load_lock(release, variant).ignored:
        assert any(ignored.match(k) for k in keyset.keys), ignored


def test_each_retired_key_is_gone_where_it_is_retired_and_took_its_value_just_before():
    """A [[retired]] fact holds only where the release's key set lacks the key, and the release before its
    range declared it (so a launch written for that release could set it)."""
    keymap = load_keymap()
    assert keymap.retired
    for fact in keymap.retired:
        within = [r for r in keymap.packaged() if in_range(r, fact.releases)]
        first = min(within, key=release_tuple)
        before = max((r for r in keymap.packaged() if release_tuple(r) < release_tuple(first)), key=release_tuple)
        for variant in fact.variants:
            assert all(not load_keyset(r, variant).has(fact.key) for r in within), (fact.key, variant)
            assert load_keyset(before, variant).has(fact.key), (fact.key, before, variant)
            assert keymap.retired_at(fact.key, first, variant) is fact
            assert keymap.retired_at(fact.key, before, variant) is None


def test_the_map_and_the_spec_name_the_same_settings():
    fields = {s for s in spec_settings() if not any(s == n or s.startswith(n + ".") for n in NOT_SETTINGS)}
    assert fields == set(load_keymap().setting)


def test_table_settings_are_exactly_the_dict_fields():
    import typing

    from tutorrl.compiler.spec.load import _unwrap
    from tutorrl.compiler.spec.structs import Spec

    def annotation(path: str):
        cls = Spec
        *parents, leaf = path.split(".")
        for part in parents:
            from tutorrl.compiler.spec.load import struct_in

            cls = struct_in(cls.__annotations__[part])
        return cls.__annotations__[leaf]

    def is_dict(hint) -> bool:
        hint = _unwrap(hint)
        return typing.get_origin(hint) is dict or any(typing.get_origin(_unwrap(a)) is dict
                                                      for a in typing.get_args(hint))

    tables = {name for name, s in load_keymap().setting.items() if s.kind == "table"}
    assert tables == {name for name in load_keymap().setting if is_dict(annotation(name))}
    assert "actor.megatron.transformer_overrides" in tables and "reward.kwargs" in tables


def test_a_release_that_moves_nothing_needs_only_the_release_list():
    """The map's shape: a copy of the newest release's key set under a new name, added to
    `releases`, locks with every setting where it was (open-ended since entries)."""
    import msgspec

    keymap = load_keymap()
    newest = keymap.releases[-1]
    for variant in VARIANTS:
        keyset = load_keyset(newest, variant)
        future = msgspec.structs.replace(keyset, release="9.9.9")
        grown = msgspec.structs.replace(keymap, releases=keymap.releases + ["9.9.9"])
        a, b = build_lock(newest, variant, keymap), build_lock("9.9.9", variant, grown, future)
        assert a.targets == b.targets and a.passthrough == b.passthrough


# -- example specs ---------------------------------------------------------


MEGATRON = support.spec_doc(CHESS, actor={"strategy": "megatron", "megatron": {"tensor_parallel": 1,
                                                                              "pipeline_parallel": 1}})


EXAMPLES = {"chess": CHESS, "megatron": MEGATRON, "custom": FSDP_CUSTOM}


def _spec(text: str):
    spec, _ = parse_spec(text.encode(), "t.toml")
    return normalize(spec)


# -- the real config of each release ---------------------------------------


@pytest.fixture(scope="session")
def config_dirs(tmp_path_factory):
    found = {}

    def get(release):
        if release not in found:
            try:
                wheel = ki.fetch_wheel(release)
            except ki.KeysetImportError as exc:  # no network and no cached wheel
                pytest.fail(f"verl {release} wheel unavailable (the test needs the package index or a cached wheel): {exc}")
            found[release] = ki.extract_config(wheel, tmp_path_factory.mktemp(f"verl-{release}"))
        return found[release]

    return get


@pytest.fixture(scope="session")
def launcher(tmp_path_factory):
    """Runs a bundle's launch.sh with a stand-in python; returns the argv verl would get."""
    root = tmp_path_factory.mktemp("launcher")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "python"
    stand_in.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, sys
        args = sys.argv[1:]
        if args[:1] == ["-c"] and "importlib.metadata" in args[1]:
            print(os.environ["STANDIN_VERL"])
        elif args[:1] == ["-c"]:
            os.execv({sys.executable!r}, [{sys.executable!r}, *args])
        else:
            with open(os.environ["STANDIN_ARGV"], "w") as fh:
                json.dump(args, fh)
        """))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    # The chess default reward entry and the custom module, importable by the job.
    site = root / "site"
    for module in ("studentsim/tutor_rl/_reward_entry", "tutorrl_test_reward/rewards"):
        path = site / (module + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(site).parents:
            if str(parent) != ".":
                (site / parent / "__init__.py").touch()
        path.write_text("def compute_score(*a, **k):\n    return 0.0\n")

    def run(bundle: Path, release: str, site_dir: Path = site, extra_env: dict[str, str] | None = None):
        argv_file = root / "argv.json"
        argv_file.unlink(missing_ok=True)
        env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "STANDIN_VERL": release,
               "STANDIN_ARGV": str(argv_file), "WANDB_API_KEY": "x", "PYTHONPATH": str(site_dir),
               "HOME": os.environ.get("HOME", "/tmp"), **(extra_env or {})}
        proc = subprocess.run(["bash", str(bundle / "launch.sh")], env=env, capture_output=True, text=True,
                              cwd=root, check=False)
        argv = json.loads(argv_file.read_text()) if argv_file.exists() else None
        return proc, argv

    run.site = site
    return run


def compose(config_dir: Path, argv: list[str]):
    """The config the launch's module composes: main_ppo's from the release's trainer config; another
    entry point's from its own config folder in the same extracted wheel, its search path (which launch.sh
    gives as pkg://verl.trainer.config, the installed verl's) pointed at that release's trainer config."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tutorrl.compiler.release import find_entry

    assert argv[0] == "-m" and argv[2] == "--config-name", argv
    entry = find_entry(argv[1])
    assert entry is not None and entry.source == "wheel", argv[1]
    overrides = argv[4:]
    if not entry.default:
        root = Path(config_dir).parents[2]  # <dest>/verl/trainer/config -> <dest>
        config_dir = root / entry.config_dir
        searchpath = [o for o in overrides if o.startswith("hydra.searchpath=")]
        assert searchpath == entry.hydra_args(), overrides
        overrides = [o for o in overrides if not o.startswith("hydra.searchpath=")] + [
            f"hydra.searchpath=[file://{root / 'verl' / 'trainer' / 'config'}]"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra_compose(config_name=argv[3], overrides=overrides)


def _expected(spec, release, site: Path):
    """(key, value) the composed config must hold, from the resolver's own overrides."""

    lock = load_lock(release, variant_of(spec), spec.experiment.entry)
    resolved, findings = resolve(spec, lock, load_keyset(release, lock.variant, lock.entry))
    assert not findings
    for o in resolved.overrides:
        if o.raw is not None:
            continue
        if o.runtime:
            yield o.key, str(site / (o.value.replace(".", "/") + ".py"))
        else:
            # The launcher's environment sets no root: launch.sh puts in each default.
            yield o.key, support.as_launched(spec, o.value)


def _check_composed(cfg, expected):
    from omegaconf import OmegaConf

    for key, value in expected:
        got = OmegaConf.select(cfg, key, throw_on_missing=True)
        if hasattr(got, "_metadata"):
            got = OmegaConf.to_container(got)
        assert got == value, f"{key}: composed {got!r}, intended {value!r}"


@pytest.mark.wheels
@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_launches_and_composes(release, example, config_dirs, launcher, tmp_path):
    text = spec_at(release, EXAMPLES[example])
    if release_tuple(release) < (0, 4, 0, 0):
        # verl 0.2/0.3 pass no keyword arguments to a reward function (and 0.2
        # loads none from the command line): refused, naming where it exists.
        with pytest.raises(SpecError) as err:
            compile_bytes(text.encode(), "t.toml")
        assert all(re.search(r"(exists|declared) (from|in|up to|only in) verl \d", p.message)
                   for p in err.value.problems), \
            err.value.render()
        return
    compiled = compile_bytes(text.encode(), "t.toml")
    bundle = write_bundle(compiled, tmp_path).path
    proc, argv = launcher(bundle, release)
    assert proc.returncode == 0 and argv is not None, proc.stderr
    assert "--config-name" in argv
    cfg = compose(config_dirs(release), argv)
    _check_composed(cfg, _expected(_spec(text), release, launcher.site))
    # The spec's reward module lands where this release reads it.
    key = "custom_reward_function" if release_tuple(release) < (0, 7, 1, 0) else "reward.custom_reward_function"
    from omegaconf import OmegaConf

    path = OmegaConf.select(cfg, key + ".path")
    assert path.endswith("_reward_entry.py") or path.endswith("rewards.py") or path.startswith("pkg://")


def test_attn_implementation_is_refused_where_verl_ignores_it():
    text = spec_at("0.5.0", CHESS, model={"attn_implementation": "sdpa"})
    with pytest.raises(SpecError) as err:
        compile_bytes(text.encode(), "t.toml")
    rendered = err.value.render()
    assert "'model.attn_implementation' exists from verl 0.6.1 (fsdp); this spec targets 0.5.0" in rendered
    assert "flash_attention_2" in rendered
    text = spec_at("0.7.1", MEGATRON, model={"attn_implementation": "sdpa"})
    with pytest.raises(SpecError, match="exists from verl 0.8.0 \\(megatron\\)"):
        compile_bytes(text.encode(), "t.toml")


def test_chess_plugin_sizes_reward_workers_only_where_verl_has_a_pool():
    for release in ("0.4.1", "0.5.0", "0.6.1", "0.7.0"):
        launch = compile_bytes(spec_at(release, CHESS).encode(), "t.toml").files["launch.sh"].decode()
        assert "num_workers" not in launch
    launch = compile_bytes(spec_at("0.7.1", CHESS).encode(), "t.toml").files["launch.sh"].decode()
    assert "reward.num_workers=1" in launch


def test_unimportable_reward_module_stops_launch_with_a_clear_message(launcher, tmp_path):
    compiled = compile_bytes(spec_at("0.6.1", CHESS).encode(), "t.toml")
    bundle = write_bundle(compiled, tmp_path).path
    empty = tmp_path / "empty"
    empty.mkdir()
    proc, argv = launcher(bundle, "0.6.1", site_dir=empty)
    assert proc.returncode == 3 and argv is None
    assert "reward module studentsim.tutor_rl._reward_entry is not importable by the job Python" in proc.stderr
    assert "verl 0.6.1 loads the reward function from a file" in proc.stderr


# Folder names a reward module may live under: everything a file name can hold
# that Hydra or OmegaConf treat specially.
_DIR_NAMES = st.text(st.sampled_from(list("ab $'\"\\{}=,[]#~é")), min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..") and not s.startswith("-"))


@pytest.mark.wheels
@hsettings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dirname=_DIR_NAMES)
def test_module_file_is_quoted_exactly_as_the_compiler_quotes(dirname, launcher, config_dirs, tmp_path_factory):
    from omegaconf import OmegaConf

    site = tmp_path_factory.mktemp("site") / dirname
    (site / "tutorrl_test_reward").mkdir(parents=True)
    (site / "tutorrl_test_reward" / "__init__.py").touch()
    (site / "tutorrl_test_reward" / "rewards.py").write_text("")
    compiled = compile_bytes(spec_at("0.6.1", FSDP_CUSTOM).encode(), "t.toml")
    bundle = write_bundle(compiled, tmp_path_factory.mktemp("b")).path
    proc, argv = launcher(bundle, "0.6.1", site_dir=site)
    assert proc.returncode == 0, proc.stderr
    from tutorrl.compiler.release.hydra import quote_string

    path = str(site / "tutorrl_test_reward" / "rewards.py")
    assert f"custom_reward_function.path={quote_string(path)}" in argv
    cfg = compose(config_dirs("0.6.1"), argv)
    assert OmegaConf.select(cfg, "custom_reward_function.path") == path


# -- random valid specs x random release -------------------------------------

_TEXT = st.text(st.sampled_from(list("ab Z09 $'\"\\{},=#~é/")), min_size=1, max_size=10)


@st.composite
def random_specs(draw):
    # Reward keyword arguments exist from 0.4.0; older releases are covered by the examples' refusals.
    release = draw(st.sampled_from([r for r in RELEASES if release_tuple(r) >= (0, 4, 0, 0)]))
    strategy = draw(st.sampled_from(["fsdp", "fsdp2", "megatron"]))
    lines = [
        "[experiment]", f'name = "{draw(st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True))}"',
        f'verl = "{release}"',
        "[data]", f"train = {json.dumps(draw(_TEXT))}", f"val = {json.dumps(draw(_TEXT))}",
        f"seed = {draw(st.integers(0, 99))}", "train_batch_size = 8",
        "[model]", f"path = {json.dumps(draw(_TEXT))}",
    ]
    attn = draw(st.sampled_from([None, "sdpa", "eager"]))
    if attn:
        lines.append(f'attn_implementation = "{attn}"')
    if strategy != "megatron" and draw(st.booleans()):
        lines.append(f"lora = {{ rank = {draw(st.integers(1, 64))}, alpha = 32 }}")
    lines += ["[algorithm]", f"use_kl_in_reward = {str(draw(st.booleans())).lower()}",
              "[actor]", f'strategy = "{strategy}"', "ppo_mini_batch_size = 4",
              f"lr = {draw(st.floats(1e-7, 1e-3))!r}", f"use_kl_loss = {str(draw(st.booleans())).lower()}"]
    if strategy == "megatron":
        lines += ["[actor.megatron]", "tensor_parallel = 1"]
    lines += ["[rollout]", f'engine = "{draw(st.sampled_from(["sglang", "vllm"]))}"', "n = 2",
              f"temperature = {draw(st.floats(0.1, 2.0))!r}",
              "[trainer]", "total_steps = 2", f'resume_mode = {json.dumps(draw(st.sampled_from(["auto", "disable"])))}',
              "[resources]", "trainer_gpus_per_node = 2",
              "[reward]", 'module = "tutorrl_test_reward.rewards"',
              f"kwargs = {{ k = {json.dumps(draw(_TEXT))}, n = {draw(st.integers(-5, 5))} }}"]
    return release, "\n".join(lines) + "\n", attn


@pytest.mark.wheels
@hsettings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=random_specs())
# Found by the search: a "$NAME" the spec declares no root for is text verl receives as is.
@example(case=("0.4.0", '[experiment]\nname = "a"\nverl = "0.4.0"\n[data]\ntrain = "0"\nval = "0"\nseed = 0\n'
               'train_batch_size = 8\n[model]\npath = "0"\n[algorithm]\nuse_kl_in_reward = false\n[actor]\n'
               'strategy = "fsdp"\nppo_mini_batch_size = 4\nlr = 0.0002627479628184836\nuse_kl_loss = false\n'
               '[rollout]\nengine = "sglang"\nn = 2\ntemperature = 1.0\n[trainer]\ntotal_steps = 2\n'
               'resume_mode = "auto"\n[resources]\ntrainer_gpus_per_node = 2\n[reward]\n'
               'module = "tutorrl_test_reward.rewards"\nkwargs = { k = "$Z", n = 0 }\n', None))
def test_random_specs_compose_in_random_releases(case, config_dirs, launcher, tmp_path_factory):
    release, text, attn = case
    spec = _spec(text)
    variant = variant_of(spec)
    reads_attn = (variant == "fsdp" and release_tuple(release) >= (0, 6, 1, 0)) or release_tuple(release) >= (0, 8, 0, 0)
    if attn and not reads_attn:
        with pytest.raises(SpecError, match="model.attn_implementation' exists from verl"):
            compile_bytes(text.encode(), "t.toml")
        return
    bundle = write_bundle(compile_bytes(text.encode(), "t.toml"), tmp_path_factory.mktemp("b")).path
    proc, argv = launcher(bundle, release)
    assert proc.returncode == 0, proc.stderr
    _check_composed(compose(config_dirs(release), argv), _expected(spec, release, launcher.site))


# -- the committed example specs x every release ------------------------------

COMMITTED = sorted((Path(__file__).resolve().parents[3] / "specs").glob("*.toml"))


@pytest.mark.wheels
@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("spec_path", COMMITTED, ids=lambda p: p.stem)
def test_committed_example_compiles_and_composes_or_is_refused_clearly(spec_path, release, config_dirs, launcher,
                                                                        tmp_path):
    """Every example in specs/, retargeted: it composes against that release's own
    config with the intended values, or compiling refuses it naming what is missing."""
    own = re.search(r'(?m)^verl = "([^"]*)"', spec_path.read_text()).group(1)
    text = re.sub(r'(?m)^verl = "[^"]*"', f'verl = "{release}"', spec_path.read_text(), count=1)
    assert f'verl = "{release}"' in text
    try:
        compiled = compile_bytes(text.encode(), spec_path.name)
    except SpecError as err:
        for problem in err.problems:
            # The message names the releases where the setting exists.
            assert problem.key and problem.line, problem.render()
            # An entry whose code stops at import there (entries.toml's stops) names where it starts instead.
            stops = problem.key == "experiment.entry" and re.search(r"stops at import with verl \d", problem.message) \
                and re.fullmatch(r"target verl [\d.]+( or [\d.]+)*, where it starts", problem.hint)
            assert stops or re.search(r"(exists|declared) (from|up to|in|only in) verl \d", problem.message), \
                problem.render()
        assert release != own, f"{spec_path.name} is written for verl {own}"
        return
    spec = normalize(parse_spec(text.encode(), spec_path.name)[0])
    site = tmp_path / "site"  # the spec's reward module, importable where the job runs
    site.mkdir()
    if spec.reward.module:  # (a reward given as a file path is a value like any other)
        module = site / (spec.reward.module.replace(".", "/") + ".py")
        module.parent.mkdir(parents=True, exist_ok=True)
        for parent in module.relative_to(site).parents:
            if str(parent) != ".":
                (site / parent / "__init__.py").touch()
        module.write_text(f"def {spec.reward.function}(*a, **k):\n    return 0.0\n")
    from tutorrl.compiler.release import find_entry

    entry = find_entry(spec.experiment.entry)
    # A recipe's code is found where its root says (launch.sh checks it against the bundle's digest).
    recipe_env = {"RECIPE_ROOT": str(spec_path.parent / "recipes")} if entry.source == "recipe" else None
    proc, argv = launcher(write_bundle(compiled, tmp_path / "b").path, release, site_dir=site, extra_env=recipe_env)
    assert proc.returncode == 0 and argv is not None, proc.stderr
    assert argv[:2] == ["-m", entry.module]
    if entry.source == "recipe":
        # Its config is the recipe's, not in verl's wheel: the launch is checked against the key sets composed
        # from the recipe itself (tests/compiler/release/test_entries.py), not composed here.
        return
    cfg = compose(config_dirs(release), argv)
    _check_composed(cfg, _expected(spec, release, site))


def test_megatron_rollout_size_is_refused_where_verls_megatron_worker_asserts_it():
    # 2 does not divide the 7 trainer GPUs. verl's Megatron worker asserts the
    # rollout size divides them from 0.4.0; 0.3's builds its rollout unchecked.
    spec = support.spec_doc(actor={"strategy": "megatron", "megatron": {"tensor_parallel": 1, "pipeline_parallel": 1}},
                            rollout={"tensor_parallel": 2}, resources={"trainer_gpus_per_node": 7})
    with pytest.raises(SpecError) as err:
        compile_bytes(spec_at("0.4.0", spec).encode(), "t.toml")
    assert any(p.key == "rollout.tensor_parallel" and "verl/workers/megatron_workers.py" in p.message
               for p in err.value.problems)
    compiled = compile_bytes(spec_at("0.3.0.post1", spec).encode(), "t.toml")
    assert any(w.key == "rollout.tensor_parallel" and "does not check" in w.hint for w in compiled.warnings)
