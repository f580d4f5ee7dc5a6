"""Is an imported spec the same launch? Compose both with the release's real config and compare.

Both launches go through Hydra's ``compose`` against the trainer config of the
target release, taken from that release's own wheel (cached under
``~/.cache/tutorrl/configs``), exactly as verl's ``main_ppo`` would compose
them; the composed configs are compared key by key, interpolations unresolved
(so ``${actor_rollout_ref.actor.ppo_mini_batch_size}`` stays a reference and a
changed source shows where it was set). This is the library function the
import command, the corpus tool and the tests all use.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import msgspec


# The name the imported spec is compiled under while it is proven; its refusals are placed in it.
CHECKED_AS = "imported.toml"


class Difference(msgspec.Struct, frozen=True, omit_defaults=True):
    key: str
    original: Any = None
    imported: Any = None
    only_in: str = ""  # "original" | "imported" when the key exists on one side only


class Composed(msgspec.Struct, frozen=True):
    config: dict | None
    error: str | None


def config_root(release: str, cache: Path | None = None, entry: str = "") -> Path:
    """A folder holding ``verl/trainer/config`` of ``release`` (extracted once from its wheel), and the
    config folder of entry point ``entry`` where the release ships it."""
    from tutorrl.compiler.release import extract_config, fetch_wheel

    root = (cache or Path.home() / ".cache" / "tutorrl" / "configs") / release
    done = root / ".complete"
    found = _entry(entry)
    # A folder extracted before tutorrl knew the entry points lacks their config: extracted again.
    if not done.exists() or (found is not None and found.source == "wheel" and not (root / found.config_dir).is_dir()):
        extract_config(fetch_wheel(release), root)
        done.touch()
    return root


def _entry(name: str | None):
    """The entry point ``name`` names (entries.toml), None for main_ppo (its config is verl/trainer's)."""
    from tutorrl.compiler.release import find_entry

    found = find_entry(name) if name and name != "ppo" else None
    return found if found is not None and not found.default else None


@contextlib.contextmanager
def working_dir(path: Path):
    """Run the body in ``path`` (Hydra resolves verl's file:// search paths against it)."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def compose(root: Path, config_name: str, overrides: list[str], config_path: str | None = None,
            base: Path | None = None, cache: Path | None = None, entry: str = "",
            recipe: Path | None = None) -> Composed:
    """verl's config for a launch, as a plain dict with interpolations kept; or Hydra's error.

    ``config_path`` (a launch's own ``--config-path``) is taken as Hydra takes
    it for ``python -m verl.trainer.main_ppo``: relative to the entry module's
    folder (``verl/trainer/`` under ``root``, so ``config`` and ``./config``
    name verl's own config folder), unless ``base`` is given (a launch of a
    ``main_ppo.py`` file: that file's folder); verl's own configs that a custom
    one extends are found under ``root`` (the run folder).

    The overrides go onto the config composed without them, kept in ``cache``
    (default: the user's cache dir) -- the same result, without reading the
    release's YAML tree again (``composecache``).

    ``entry``: the entry point launched (a name of entries.toml; "" for
    main_ppo). Its config is its own folder in the wheel (``config_dir``, where
    a relative ``config_path`` starts from its module's folder), found with the
    search path its launch sets; the release's trainer config under ``root``
    stands in for that search path's ``pkg://verl.trainer.config``, which would
    name the verl installed here, not the release composed. A recipe entry's config and module folder are
    in ``recipe`` (its checkout), not the wheel.
    """
    from tutorrl.importer import composecache

    found = _entry(entry)
    trainer = root / "verl" / "trainer" / "config"
    home = root
    if found is not None and found.source == "recipe":
        if recipe is None:
            return Composed(None, f"entry point '{found.name}' is a recipe's: its config needs the recipe checkout")
        home = Path(recipe)
    config_dir = home / found.config_dir if found is not None and not found.trainer_config else trainer
    module_dir = home / found.module_dir() if found is not None else trainer.parent
    searchpath = [f"hydra.searchpath=[file://{trainer.resolve()}]"] if found is not None and found.searchpath else []
    if config_path is not None:
        custom = Path(config_path)
        if not custom.is_absolute():
            custom = (base or module_dir) / custom
        config_dir = custom
    folders = list(dict.fromkeys([config_dir.resolve(), trainer.resolve()]))
    with composecache.c_yaml():
        if not any(composecache.names_a_group(o, folders) for o in overrides):
            kept = composecache.base_config(lambda: _compose(root, config_dir, config_name, searchpath).config,
                                            config_name, folders, cache or composecache.default_cache())
            quick = composecache.apply(kept, overrides) if kept is not None else None
            if quick is not None:
                return Composed(quick, None)
        return _compose(root, config_dir, config_name, searchpath + list(overrides))


def _compose(root: Path, config_dir: Path, config_name: str, overrides: list[str]) -> Composed:
    """Hydra's compose of ``config_name`` in ``config_dir``, run in ``root``."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    GlobalHydra.instance().clear()
    try:
        with working_dir(root), initialize_config_dir(config_dir=str(config_dir.resolve()), version_base=None):
            cfg = hydra_compose(config_name=config_name.removesuffix(".yaml"), overrides=list(overrides))
        return Composed(OmegaConf.to_container(cfg, resolve=False), None)
    except Exception as exc:  # noqa: BLE001 - Hydra and OmegaConf raise many kinds; reported, not hidden
        return Composed(None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
    finally:
        GlobalHydra.instance().clear()


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def _same(a: Any, b: Any) -> bool:
    # Hydra types 1e-6 and 0.000001 alike; TOML cannot write an int into a
    # float field, so 5 and 5.0 are the same setting for verl's dataclasses.
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return float(a) == float(b)
    return a == b and type(a) is type(b)


def differences(original: dict, imported: dict) -> list[Difference]:
    a, b = flatten(original), flatten(imported)
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in b:
            out.append(Difference(key, original=a[key], only_in="original"))
        elif key not in a:
            out.append(Difference(key, imported=b[key], only_in="imported"))
        elif not _same(a[key], b[key]):
            out.append(Difference(key, a[key], b[key]))
    return out


class RoundTrip(msgspec.Struct, frozen=True):
    exact: bool
    differences: list[Difference]
    original_error: str | None = None
    imported_error: str | None = None
    imported_argv: list[str] = []
    # The compiler's warnings for the imported spec (e.g. settings the release never reads).
    warnings: list[str] = []
    # What the compiler refuses in the spec (its rules; overrides verl would refuse), each rendered with its
    # place: the launch compared is the spec's as written, so the round trip is proven all the same.
    refusals: list[str] = []


def round_trip(spec_text: str, original: list[str], *, config_name: str, config_path: str | None = None,
               root: Path | None = None, base: Path | None = None, entry: str = "") -> RoundTrip:
    """Compile ``spec_text`` and compare its composed config with the original launch's.

    A spec the compiler refuses (a rule verl also checks at start, an override
    verl would stop on) is still compared, as written, its refusals listed:
    the translation is proven, and what to change is named. A spec that is not
    well formed raises :class:`SpecError`. ``entry``: the entry point the original
    launch starts (entries.toml's name, "" for main_ppo); the spec's own is its lock's."""
    from tutorrl.compiler.pipeline import resolve_bytes
    from tutorrl.compiler.pipeline import expand, references

    refusals: list = []
    spec, lock, resolved, found = resolve_bytes(spec_text.encode(), CHECKED_AS, refusals=refusals)
    refused = [p.render() for p in refusals]
    warnings = [f"{w.key}: {w.message}" if w.key else w.message for w in found]
    root = root or config_root(lock.release, entry=entry or lock.entry or "")
    argv = []
    defaults = {name: r.default for name, r in spec.roots.items() if r.default}
    for o in resolved.overrides:
        if o.runtime:
            raise ValueError("an imported spec never uses a run-time spelling")
        if defaults and o.raw is None and isinstance(o.value, (str, list)) and references(o.value):
            # A root is the job's value, launch.sh puts in; here, its default (the machine imported on).
            value = ([expand(v, defaults) if isinstance(v, str) else v for v in o.value]
                     if isinstance(o.value, list) else expand(o.value, defaults))
            o = msgspec.structs.replace(o, value=value)
        argv.append(o.text)
    # A recipe spec's checkout, where the compile found it (its root's default here): both launches' config.
    recipe = spec.experiment.recipe
    folder = expand(recipe.path, defaults) if recipe is not None else None
    home = Path(folder) if folder else None
    first = compose(root, config_name, original, config_path, base, entry=entry, recipe=home)
    second = compose(root, resolved.config_name, argv, resolved.config_path, base, entry=lock.entry or "",
                     recipe=home)
    if first.error or second.error:
        return RoundTrip(False, [], first.error, second.error, argv, warnings, refused)
    diffs = differences(first.config, second.config)
    return RoundTrip(not diffs, diffs, imported_argv=argv, warnings=warnings, refusals=refused)
