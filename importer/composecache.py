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

Where it is kept: the composed config as data (msgpack, which keeps YAML's
integer keys that JSON would turn into strings), never a pickle -- a file in
a cache folder must not be able to name code, and an unpickler that admits
"only OmegaConf" admitted ``type``, ``object`` and antlr4's file streams --
under ``$XDG_CACHE_HOME/tutorrl/composed`` (``~/.cache`` without it), in
folders only the user may enter (0700) and files only the user may read
(0600), keyed by the digest of every config file the compose can read, the
config's name and the OmegaConf and Hydra releases -- so a release, a
checkout or an edited config each get their own. Each entry carries the
sha256 of its data and is read only as this user's regular file, within a
size bound and its digest; any other is composed again, and the import says
so (:data:`SAID`). Building the OmegaConf container from the data costs more
than unpickling it did, and less than the compose it saves. On disk rather than only in the process:
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
import errno
import functools
import hashlib
import os
import stat
from pathlib import Path

# Bumped when what is stored changes shape.
_FORMAT = b"tutorrl composed base 3\n"
# verl's composed trainer config is ~100 kB of msgpack; a file far past that is no entry of ours.
MAX_ENTRY = 32 * 1024 * 1024
# Lines for the user about the cache (an entry that failed its checks), said by `tutorrl import`.
SAID: list[str] = []


def default_cache() -> Path:
    """``$XDG_CACHE_HOME/tutorrl/composed`` where that names an absolute folder (the XDG spec ignores a
    relative one), else ``~/.cache/tutorrl/composed``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "tutorrl" / "composed"


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
    ``compose_whole()``, the first time), as msgpack data; None where it does not compose, is not
    plain data, or its folders are too big to digest (MAX_FILES).
    Kept in ``cache`` and in this process; a cache folder that cannot be written
    costs the next process one compose, never the import."""
    import hydra
    import msgspec
    import omegaconf

    name = config_name.removesuffix(".yaml")
    # The config is OmegaConf's, the overrides' reading Hydra's: a new release of either is a new key.
    versions = f"{name}\0omegaconf {omegaconf.__version__}\0hydra {hydra.__version__}"
    digest = config_digest(versions, folders)
    if digest is None:
        return None
    target = cache / digest / f"{name}.msgpack"
    if target in _KEPT:
        return _KEPT[target]
    data, why = _read_entry(target)
    if data is not None:
        _KEPT[target] = data
        return data
    if why is not None:
        SAID.append(f"the compose cache entry {target} {why}; composed again")
    config = compose_whole()
    if config is None:
        return None
    try:
        data = msgspec.msgpack.encode(config)
    except (TypeError, ValueError, OverflowError):
        return None  # not plain data: composed the whole way each time
    _KEPT[target] = data
    _write_entry(cache, target, data)
    return data


_KEPT: dict[Path, bytes] = {}


def _read_entry(target: Path) -> tuple[bytes | None, str | None]:
    """(data, None) for a good entry; (None, None) where there is none; (None, why) for a bad one."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, "is a symlink; not followed" if exc.errno == errno.ELOOP else f"cannot be read ({exc.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "is not a regular file"
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None, f"is not this user's alone (mode {stat.S_IMODE(st.st_mode):o})"
        if st.st_size > MAX_ENTRY:
            return None, f"is {st.st_size} bytes, over {MAX_ENTRY}"
        chunks, total = [], 0
        while total <= MAX_ENTRY:
            chunk = os.read(fd, min(MAX_ENTRY + 1 - total, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        raw = b"".join(chunks)
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    finally:
        os.close(fd)
    header, sep, rest = raw.partition(b"\n")
    digest, sep2, data = rest.partition(b"\n")
    if not sep or not sep2 or header + b"\n" != _FORMAT or len(raw) > MAX_ENTRY:
        return None, "is not a kept config of this tutorrl"
    if hashlib.sha256(data).hexdigest().encode() != digest:
        return None, "does not match its digest"
    return data, None


def _private_folder(folder: Path) -> None:
    """``folder`` and the folders made on the way, each 0700; an existing one of this user's is made 0700."""
    missing = []
    for path in (folder, *folder.parents):
        if path.is_dir():
            break
        missing.append(path)
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(f"{folder} is not this user's folder")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(folder, 0o700)


def _write_entry(cache: Path, target: Path, data: bytes) -> None:
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        _private_folder(cache)
        _private_folder(target.parent)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(_FORMAT + hashlib.sha256(data).hexdigest().encode() + b"\n" + data)
        os.replace(partial, target)  # whole or absent, for a concurrent import
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def apply(kept: bytes, overrides: list[str]) -> dict | None:
    """The kept base with ``overrides`` applied by Hydra's own parser and code (what its
    compose does once the defaults list is merged); None for anything it would not take,
    so the caller composes the whole way and reports Hydra's own error."""
    import msgspec
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from omegaconf import OmegaConf

    from tutorrl.importer.overrides import parse

    try:
        parsed = [parse(o) for o in overrides]  # each text read once per process (overrides.py)
        if any(o.is_sweep_override() or o.is_hydra_override() for o in parsed):
            return None
        cfg = OmegaConf.create(msgspec.msgpack.decode(kept))
        OmegaConf.set_struct(cfg, True)  # as Hydra leaves its root before applying overrides
        ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
        return OmegaConf.to_container(cfg, resolve=False)
    except Exception:  # noqa: BLE001 - any refusal: the whole compose says why, in Hydra's words
        return None
