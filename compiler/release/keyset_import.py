"""Extract a verl release's key sets from its wheel (``tutorrl keys import``).

For one release this

1. downloads the release's wheel with pip (``pip download --no-deps``) into a
   wheel cache, or reuses the wheel already there;
2. extracts only ``verl/trainer/config/**`` from it into a temporary folder;
3. composes the trainer config with Hydra's compose API, exactly as
   ``python -m verl.trainer.main_ppo`` would with no overrides -- once for the
   FSDP variant (``ppo_trainer``) and once for Megatron (``ppo_megatron_trainer``
   in releases without a ``model_engine/megatron.yaml`` group option,
   ``ppo_trainer`` + ``model_engine=megatron`` in those with one). Every
   release from 0.2.0.post2 to 0.9.1 composes this way from its own config
   folder alone (no Hydra search path; both trainer configs shipped);
4. flattens the composed config to dotted keys (see :mod:`tutorrl.compiler.release.keysets`)
   and writes ``verl-<release>-<variant>.json``, byte-for-byte deterministic,
   one key per line so that a review diff shows one line per changed key.

Hydra and OmegaConf are the optional extra ``keys`` and are imported lazily:
nothing on the compile path imports this module.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

from tutorrl import _files
from tutorrl.compiler.release.keysets import (KeyInfo, KeySet, SCHEMA, VARIANTS, available_keysets, keyset_name,
                                               load_keyset)
from tutorrl.errors import KeysetImportError  # its home; importable from here too

CONFIG_PREFIX = "verl/trainer/config/"
FSDP_CONFIG = "ppo_trainer"
LEGACY_MEGATRON_CONFIG = "ppo_megatron_trainer"
from tutorrl.contract import WHEEL_CACHE_ENV  # noqa: E402

# A PEP 440-ish release string; anything else never reaches pip's argv.
_RELEASE_RE = re.compile(r"^[0-9]+(\.[0-9]+)*([._-]?(a|b|rc|post|dev)[0-9]*)*$")


# ---------------------------------------------------------------------------
# Composing and flattening


def _require_hydra():
    try:
        import hydra  # noqa: F401
        import omegaconf  # noqa: F401
    except ImportError as exc:
        raise KeysetImportError(
            f"extracting verl key sets needs Hydra and OmegaConf ({exc}); "
            "install them with: pip install 'tutorrl[keys]'"
        ) from None


def variant_recipe(config_dir: Path, variant: str) -> tuple[str, list[str]]:
    """The (config name, overrides) that compose ``variant`` from ``config_dir``.

    Decided by the files the release ships, not by its version number.
    """
    config_dir = Path(config_dir)
    if variant == "fsdp":
        if (config_dir / f"{FSDP_CONFIG}.yaml").is_file():
            return FSDP_CONFIG, []
    elif variant == "megatron":
        # From 0.8.0 Megatron is a config-group choice of ppo_trainer
        # (model_engine=megatron); ppo_megatron_trainer.yaml stays only as a
        # deprecated shim. Before, it is a config of its own.
        if (config_dir / "model_engine" / "megatron.yaml").is_file() and (
            config_dir / f"{FSDP_CONFIG}.yaml"
        ).is_file():
            return FSDP_CONFIG, ["model_engine=megatron"]
        if (config_dir / f"{LEGACY_MEGATRON_CONFIG}.yaml").is_file():
            return LEGACY_MEGATRON_CONFIG, []
    else:
        raise KeysetImportError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    raise KeysetImportError(f"{config_dir} has no trainer config for the {variant} variant")


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    raise KeysetImportError(f"unexpected value of type {type(value).__name__} in a composed config: {value!r}")


def _resolve(cfg: Any, key: str, raw: str) -> tuple[Any, str]:
    """The resolved value of the interpolation at ``key``, or the raw text."""
    from omegaconf import Container, OmegaConf

    if "oc.env" in raw:  # machine-dependent: never bake into committed data
        return raw, "str"
    try:
        value = OmegaConf.select(cfg, key, throw_on_resolution_failure=True, throw_on_missing=True)
        if isinstance(value, Container):
            value = OmegaConf.to_container(value, resolve=True)
        return value, _type_of(value)
    except Exception:  # noqa: BLE001 - any resolution failure: keep the raw text
        return raw, "str"


def flatten_config(cfg: Any) -> dict[str, KeyInfo]:
    """Flatten a composed DictConfig: non-empty dicts recurse; lists and empty dicts are leaves."""
    from omegaconf import DictConfig, OmegaConf

    out: dict[str, KeyInfo] = {}

    def walk(node: DictConfig, plain: dict, prefix: str) -> None:
        for name, value in plain.items():
            name = str(name)
            if "." in name:
                raise KeysetImportError(f"config key {prefix + name!r} contains a dot; it cannot be addressed")
            key = prefix + name
            if isinstance(value, dict) and value and not OmegaConf.is_interpolation(node, name):
                walk(node[name], value, key + ".")
                continue
            if isinstance(value, str) and OmegaConf.is_interpolation(node, name):
                default, kind = _resolve(cfg, key, value)
                out[key] = KeyInfo(default=default, type=kind, interpolation=value)
            elif isinstance(value, str) and value == "???" and OmegaConf.is_missing(node, name):
                out[key] = KeyInfo(default=None, type="missing")
            else:
                kind = _type_of(value)
                out[key] = KeyInfo(default=value, type=kind, open=(kind == "dict" and not value))

    plain = OmegaConf.to_container(cfg, resolve=False)
    walk(cfg, plain, "")
    return dict(sorted(out.items()))


def _compose(config_dir: Path, config_name: str, overrides: list[str], what: str):
    _require_hydra()
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            return compose(config_name=config_name, overrides=list(overrides))
    except Exception as exc:  # noqa: BLE001 - Hydra raises many kinds
        raise KeysetImportError(f"composing {what} config ({config_name} {' '.join(overrides)}) failed: {exc}") from exc


def compose_keyset(config_dir: Path, release: str, variant: str) -> KeySet:
    """Compose ``variant`` of the trainer config in ``config_dir`` and flatten it."""
    _require_hydra()
    config_dir = Path(config_dir).resolve()
    config_name, overrides = variant_recipe(config_dir, variant)
    cfg = _compose(config_dir, config_name, overrides, f"verl {release} {variant}")
    return KeySet(
        schema=SCHEMA,
        release=release,
        variant=variant,
        config_name=config_name,
        overrides=list(overrides),
        keys=flatten_config(cfg),
    )


def compose_entry_keyset(root: Path, release: str, variant: str, entry, config_root: Path | None = None) -> KeySet:
    """Compose entry point ``entry``'s ``variant`` config from a wheel extracted at ``root``
    (:func:`extract_config`), as ``python -m <entry.module> --config-name <its config>`` composes it.

    The entry's yaml reaches verl's trainer config through its own search path
    (``pkg://verl.trainer.config``, or ``file://verl/trainer/config`` relative to
    a source checkout); here the search path is the extracted trainer config
    alone, so neither an installed verl nor the working folder can lend it keys. An entry with no search
    path (a recipe whose folder holds its own copy of verl's trainer config) composes from its folder alone.
    ``config_root``: where ``entry.config_dir`` is, for a recipe outside the wheel (a checkout of its
    repository)."""
    root = Path(root).resolve()
    config_name = entry.config_name(variant)
    trainer = root / CONFIG_PREFIX.rstrip("/")
    searchpath = [f"hydra.searchpath=[file://{trainer}]"] if entry.searchpath else []
    cfg = _compose(Path(config_root or root).resolve() / entry.config_dir, config_name, searchpath,
                   f"verl {release} {variant} entry point {entry.name}")
    return KeySet(
        schema=SCHEMA,
        release=release,
        variant=variant,
        config_name=config_name,
        overrides=[],
        keys=flatten_config(cfg),
        entry=entry.name,
    )


def encode_keyset(keyset: KeySet) -> bytes:
    """Stable JSON: header fields, then one sorted key per line; newline at the end."""
    enc = msgspec.json.Encoder(order="deterministic")
    lines = ["{"]
    for field in ("schema", "release", "variant", "config_name", "overrides") + (("entry",) if keyset.entry != "ppo" else ()):
        lines.append(f"  {enc.encode(field).decode()}: {enc.encode(getattr(keyset, field)).decode()},")
    lines.append('  "keys": {')
    items = sorted(keyset.keys.items())
    for i, (key, info) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(f"    {enc.encode(key).decode()}: {enc.encode(info).decode()}{comma}")
    lines.append("  }")
    lines.append("}")
    return ("\n".join(lines) + "\n").encode()


# ---------------------------------------------------------------------------
# Wheels


def default_wheel_cache() -> Path:
    env = os.environ.get(WHEEL_CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tutorrl" / "wheels"


def _check_release(release: str) -> None:
    if not _RELEASE_RE.match(release):
        raise KeysetImportError(f"{release!r} is not a verl release number (expected e.g. 0.9.1)")


def _cached_wheel(release: str, cache: Path) -> Path | None:
    if not cache.is_dir():
        return None
    found = sorted(p for p in cache.glob(f"verl-{release}-*.whl") if p.is_file())
    return found[0] if found else None


def fetch_wheel(release: str, cache: Path | None = None) -> Path:
    """The wheel of verl ``release``: from the cache, else downloaded into it by pip."""
    _check_release(release)
    cache = Path(cache) if cache is not None else default_wheel_cache()
    wheel = _cached_wheel(release, cache)
    if wheel is not None:
        return wheel
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
        f"verl=={release}", "-d", str(cache),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheel = _cached_wheel(release, cache)
    if proc.returncode != 0 or wheel is None:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise KeysetImportError(
            f"verl {release} could not be downloaded (pip download exit {proc.returncode}):\n{tail}"
        )
    return wheel


def extract_config(wheel: Path, dest: Path) -> Path:
    """Extract ``verl/trainer/config/**`` from ``wheel`` under ``dest``, with every known entry point's
    module and config folder (:func:`wheel_entries` reads them there); return the trainer config dir."""
    from tutorrl.compiler.release.entries import load_entries

    dest = Path(dest)
    extra = [e for e in load_entries().values() if not e.default and e.source == "wheel"]
    wanted = tuple(f"{e.config_dir}/" for e in extra)
    modules = {e.module.replace(".", "/") + ".py" for e in extra}
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.infolist() if m.filename.startswith(CONFIG_PREFIX) and not m.is_dir()]
            others = [m for m in zf.infolist() if not m.is_dir() and not m.filename.startswith(CONFIG_PREFIX)
                      and ((bool(wanted) and m.filename.startswith(wanted)) or m.filename in modules)]
            for m in members + others:
                parts = Path(m.filename).parts
                if m.filename.startswith("/") or ".." in parts:
                    raise KeysetImportError(f"{wheel.name} has an unsafe member name {m.filename!r}")
                target = dest.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(m) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
    except zipfile.BadZipFile as exc:
        raise KeysetImportError(f"{wheel} is not a readable wheel ({exc}); delete it and retry") from None
    if not members:
        raise KeysetImportError(f"{wheel.name} has no {CONFIG_PREFIX} folder")
    return dest / CONFIG_PREFIX.rstrip("/")


def wheel_entries(root: Path) -> list:
    """The known entry points (other than ``ppo``) a wheel extracted at ``root`` ships: its module
    and its config for every variant. (0.7.1's wheel has the configs without the modules: none there.)"""
    from tutorrl.compiler.release.entries import load_entries

    root = Path(root)
    return [e for e in load_entries().values()
            if not e.default and e.source == "wheel" and (root / (e.module.replace(".", "/") + ".py")).is_file()
            and all((root / e.config_dir / f"{e.config_name(v)}.yaml").is_file() for v in VARIANTS)]


def entry_keysets(root: Path, release: str) -> list[KeySet]:
    """Every variant's key set of every entry point the wheel extracted at ``root`` ships."""
    return [compose_entry_keyset(root, release, variant, entry)
            for entry in wheel_entries(root) for variant in VARIANTS]


def keysets_from_config_dir(config_dir: Path, release: str) -> list[KeySet]:
    """Every variant's key set of the config in ``config_dir``."""
    return [compose_keyset(config_dir, release, variant) for variant in VARIANTS]


def write_keysets(keysets: Sequence[KeySet], dest_dir: Path) -> list[Path]:
    written = []
    for ks in keysets:
        path = Path(dest_dir) / keyset_name(ks.release, ks.variant, ks.entry)
        _files.replace_atomic(path, encode_keyset(ks))
        written.append(path)
    return written


def import_release(release: str, dest_dir: Path, wheel_cache: Path | None = None) -> list[Path]:
    """Download (or reuse) verl ``release``'s wheel and write its key sets into ``dest_dir``."""
    _require_hydra()
    wheel = fetch_wheel(release, wheel_cache)
    with tempfile.TemporaryDirectory(prefix="tutorrl-keys-") as tmp:
        config_dir = extract_config(wheel, Path(tmp))
        keysets = keysets_from_config_dir(config_dir, release) + entry_keysets(Path(tmp), release)
    return write_keysets(keysets, dest_dir)


def packaged_keyset_dir() -> Path:
    """The package's own ``keysets/`` folder (the source tree in an editable install)."""
    return Path(str(resources.files("tutorrl.compiler.release").joinpath("keysets")))


# ---------------------------------------------------------------------------
# Command line


class ImportedKeySet(msgspec.Struct, frozen=True):
    """One key set ``tutorrl keys import`` wrote: where, how many keys, and the recipe composed."""

    path: str
    keys: int
    recipe: str


def import_keysets(releases: list[str], dest: str | None = None, wheel_cache: str | None = None) -> list[ImportedKeySet]:
    """Each release's key sets extracted from its wheel and written under ``dest`` (default: the packaged folder)."""
    folder = Path(dest) if dest else packaged_keyset_dir()
    cache = Path(wheel_cache) if wheel_cache else None
    out = []
    for release in releases:
        for path in import_release(release, folder, cache):
            ks = msgspec.json.decode(path.read_bytes(), type=KeySet)
            out.append(ImportedKeySet(str(path), len(ks.keys), " ".join([ks.config_name, *ks.overrides])))
    return out


class KeySetRow(msgspec.Struct, frozen=True, omit_defaults=True):
    """One key set ``tutorrl keys list`` shows; ``added`` is the user's folder of a release ``keys add`` added."""

    release: str
    variant: str
    keys: int
    config_name: str
    overrides: list[str]
    added: str | None = None


class KeySets(msgspec.Struct, frozen=True):
    rows: list[KeySetRow]
    #: Releases added by the user that now ship with tutorrl (the package's data is used): (release, folder).
    shadowed: list[tuple[str, str]]


def list_keysets() -> KeySets:
    """Every key set there is: packaged, and added with ``tutorrl keys add``."""
    from tutorrl import _overlay
    from tutorrl.compiler.release.added import shadowed, user_releases

    rows = []
    for release, variant in available_keysets():
        ks = load_keyset(release, variant)
        rows.append(KeySetRow(release, variant, len(ks.keys), ks.config_name, list(ks.overrides),
                              str(_overlay.release_dir(release)) if release in user_releases() else None))
    return KeySets(rows, [(release, str(_overlay.release_dir(release))) for release in shadowed()])
    for r in rows:
        recipe = " ".join([r["config_name"], *r["overrides"]])
        added = f"  (added: {r['added']})" if "added" in r else ""
        print(f"{r['release']:<12} {r['variant']:<9} {r['keys']:>5} keys  {recipe}{added}")
    return 0
