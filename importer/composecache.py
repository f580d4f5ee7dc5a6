"""verl's composed config for a launch, without re-reading the release's YAML tree each time.

Hydra's compose of verl's trainer config walks its defaults tree and reads
~27 YAML files with pure-Python PyYAML, an OmegaConf node per value: ~0.4 s
a compose, two per round trip, every `tutorrl import` (issue 26). A launch's
overrides change values, not which files make up the config -- unless one
names a config group. So the config composed with no overrides (the *base*)
is kept, and each launch's overrides are applied to it by Hydra's own parser
(each text parsed once per process, ``overrides.py``) and code
(``ConfigLoaderImpl._apply_overrides_to_config``: what compose does once the
defaults list is merged; Hydra is pinned, 1.3.8). A test holds this equal to
the whole compose on real launches and edge cases.

Where it is kept: a pickle of the OmegaConf container (unpickling it is ~7x
faster than building it from a dict), under the user's cache dir, keyed by
the digest of every config file the compose can read, the config's name and
the OmegaConf and Hydra releases -- so a release, a checkout or an edited
config each get their own. Read back by an unpickler that admits OmegaConf's
classes and plain data only. On disk rather than only in the process:
`tutorrl import` runs once per script, so a cache living in the process would
save one compose of two; on disk every later import for that release starts
warm. (In the process too: the corpus tool imports thousands of launches.)

Not taken (the whole compose runs, so its result and any error are Hydra's
own): an override that names a config group (a folder of the config, e.g.
``data=...``, ``actor@actor_rollout_ref.actor=...``, ``hydra/...``), a
sweep, a base that does not compose, and any error on the short path.

YAML is parsed by libyaml under OmegaConf's own loader class (its
duplicate-key check and number resolvers are Python and stay): OmegaConf's
``get_yaml_loader`` is swapped for it only while tutorrl composes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
from pathlib import Path

# Bumped when what is stored changes shape.
_FORMAT = b"tutorrl composed base 2\n"


def default_cache() -> Path:
    return Path.home() / ".cache" / "tutorrl" / "composed"


@functools.cache
def _c_loader():
    """OmegaConf's loader class on libyaml's parser; None without libyaml."""
    from omegaconf import _utils

    try:
        from yaml.constructor import SafeConstructor
        from yaml.cyaml import CParser
        from yaml.resolver import Resolver
    except ImportError:  # PyYAML built without libyaml
        return None
    base = _ORIGINAL.get(_utils.get_yaml_loader, _utils.get_yaml_loader)()

    class CLoader(CParser, base):  # CParser first: its scanner, parser and composer win
        def __init__(self, stream):
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    return CLoader


_ORIGINAL: dict = {}  # our replacement -> OmegaConf's own, while swapped


@contextlib.contextmanager
def c_yaml():
    """OmegaConf.load parses with libyaml inside the block (OmegaConf's loader semantics kept)."""
    from omegaconf import _utils

    loader = _c_loader()
    if loader is None or _utils.get_yaml_loader in _ORIGINAL:
        yield
        return
    original = _utils.get_yaml_loader

    def get_yaml_loader():
        return loader

    _ORIGINAL[get_yaml_loader] = original
    _utils.get_yaml_loader = get_yaml_loader
    try:
        yield
    finally:
        _utils.get_yaml_loader = original
        del _ORIGINAL[get_yaml_loader]


# A config folder is a few dozen files; one with more (a launch's --config-path
# naming a big tree) is composed the whole way rather than walked and read.
MAX_FILES = 2000


def config_digest(label: str, folders: list[Path]) -> str | None:
    """sha256 over ``label`` and every YAML file (relative path and bytes) under
    ``folders``; None for folders holding more than MAX_FILES files in all."""
    h = hashlib.sha256(_FORMAT + label.encode() + b"\0")
    seen = 0
    for folder in folders:
        h.update(str(folder).encode() + b"\0")
        if not folder.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames.sort()
            seen += len(filenames) + len(dirnames)
            if seen > MAX_FILES:
                return None
            for name in sorted(filenames):
                if name.endswith((".yaml", ".yml")):
                    path = Path(dirpath) / name
                    h.update(str(path.relative_to(folder)).encode() + b"\0")
                    h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def names_a_group(override: str, folders: list[Path]) -> bool:
    """Whether Hydra could read ``override`` as a config group choice rather than a value."""
    key = override.lstrip("~+").split("=", 1)[0]
    if "/" in key or "@" in key or key == "hydra" or key.startswith("hydra."):
        return True
    return any((folder / key).is_dir() for folder in folders if key)


def base_config(compose_whole, config_name: str, folders: list[Path], cache: Path) -> bytes | None:
    """The base (``config_name`` composed with no overrides, as a plain dict by
    ``compose_whole()``, the first time), pickled; None where it does not compose or
    its folders are too big to digest (MAX_FILES).
    Kept in ``cache`` and in this process; a cache folder that cannot be written
    costs the next process one compose, never the import."""
    import hydra
    import omegaconf
    from omegaconf import OmegaConf

    name = config_name.removesuffix(".yaml")
    # The pickle is OmegaConf's, the overrides' reading Hydra's: a new release of either is a new key.
    versions = f"{name}\0omegaconf {omegaconf.__version__}\0hydra {hydra.__version__}"
    digest = config_digest(versions, folders)
    if digest is None:
        return None
    target = cache / digest / f"{name}.pickle"
    if target in _KEPT:
        return _KEPT[target]
    try:
        _KEPT[target] = target.read_bytes()
        return _KEPT[target]
    except OSError:
        pass
    config = compose_whole()
    if config is None:
        return None
    cfg = OmegaConf.create(config)
    OmegaConf.set_struct(cfg, True)  # as Hydra leaves its root before applying overrides
    data = _KEPT[target] = pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, target)  # whole or absent, for a concurrent import
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
    return data


_KEPT: dict[Path, bytes] = {}


class _OmegaConfOnly(pickle.Unpickler):
    """Unpickles OmegaConf containers and nothing else: the file is read from a cache
    folder, so no other class (and no callable) may be named by it."""

    _PLAIN = {("builtins", n) for n in ("dict", "list", "tuple", "set", "str", "int", "float", "bool", "bytes")} | {
        ("collections", "defaultdict"), ("collections", "OrderedDict"), ("typing", "Any")}

    def find_class(self, module: str, name: str):
        if (module, name) in self._PLAIN:
            return super().find_class(module, name)
        if module.startswith("omegaconf.") and name[:1].isupper():
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a kept config")


def apply(kept: bytes, overrides: list[str]) -> dict | None:
    """The kept base with ``overrides`` applied by Hydra's own parser and code (what its
    compose does once the defaults list is merged); None for anything it would not take,
    so the caller composes the whole way and reports Hydra's own error."""
    import io

    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from omegaconf import OmegaConf

    from tutorrl.importer.overrides import parse

    try:
        parsed = [parse(o) for o in overrides]  # each text read once per process (overrides.py)
        if any(o.is_sweep_override() or o.is_hydra_override() for o in parsed):
            return None
        cfg = _OmegaConfOnly(io.BytesIO(kept)).load()
        ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
        return OmegaConf.to_container(cfg, resolve=False)
    except Exception:  # noqa: BLE001 - any refusal: the whole compose says why, in Hydra's words
        return None
