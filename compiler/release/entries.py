"""verl's entry points: which module a launch starts, and where its Hydra config is.

Data: ``keymap/entries.toml``. ``ppo`` (``verl.trainer.main_ppo``) is the
default and takes its config from the key map's variant timeline; every other
entry (``fully_async``, ``one_step_off``, ...) has, per release it exists at
and per variant, its own key set composed from its own config
(``keysets/verl-<release>-<variant>@<entry>.json``), its own dataclass fields
(``built/``) and its own lock (``keymap/lock/``), so a spec of that entry is
checked against what that entry's Hydra composes.

On the compile path: standard library, msgspec and tutorrl's TOML reader only.
"""

# No `from __future__ import annotations`: msgspec would evaluate each field's
# type from a string on every compile, which reads this file's entries.
import functools
import os
from typing import Literal

import msgspec

from tutorrl import _toml

DEFAULT = "ppo"
SCHEMA = "tutorrl.entries/1"
_FILE = os.path.join(os.path.dirname(__file__), "keymap", "entries.toml")


class Moved(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A key (or a prefix of keys) the entry's launches set that its pinned code reads under ``to``: one its
    config once had, or a spelling its own launches used that no config declared (``why`` says which)."""

    to: str
    why: str
    # Values the old code derived itself and the new config takes as keys, each written where the launch
    # moves a key and sets none of them: {key: override value (an interpolation of what the old code read)}.
    adds: dict[str, str] = {}


class EntryPoint(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One entry point (a table of ``entries.toml``)."""

    module: str
    source: str = "wheel"
    # source = "recipe": where its code is, and the commit its key sets were composed from.
    repository: str = ""
    commit: str = ""
    # source = "recipe": what the checkout the spec names is to the module. "parent": the module's top package
    # itself (recipe.dapo.main_dapo: a folder named `recipe`), so the folder above it is the import root;
    # "checkout": the folder holding the top package (rep_exp.main_rep_exp: rep_exp/ inside it), so the checkout
    # itself is, whatever its name. config_dir is inside the checkout either way.
    import_root: Literal["parent", "checkout"] = "parent"
    config_dir: str = ""
    config: dict[str, str] = {}
    searchpath: tuple[str, ...] = ()
    releases: tuple[str, ...] = ()
    # Keys its config declares (from main_ppo's) that its own trainer never reads: {key: why}. A spec setting
    # that writes one is refused for this entry (rules.py), where main_ppo would act on it.
    never_reads: dict[str, str] = {}
    # Releases whose key sets exist (its config composes there) but where its module stops at import,
    # measured with the real `python -m <module> --cfg job`: {release: why}. A spec of it there is refused.
    stops: dict[str, str] = {}
    # Keys its own config moved after its launches were written (the recipe's history), by old key or prefix:
    # the import carries an override to the new key, the compiler's refusal of the old key names it.
    moved: dict[str, Moved] = {}
    # Its Hydra config is verl's own trainer config (main_ppo's, chosen per variant by the key map as
    # main_ppo's is), read in a verl source tree beside the recipe: launch.sh passes the installed
    # wheel's verl/trainer/config as --config-path, so its key sets are main_ppo's.
    trainer_config: bool = False
    name: str = ""

    @property
    def default(self) -> bool:
        return self.name == DEFAULT

    @property
    def variants(self) -> tuple[str, ...]:
        """The variants the entry has a config for (``ppo``: both; a recipe may ship one, e.g. FSDP only)."""
        return ("fsdp", "megatron") if self.default or self.trainer_config else tuple(v for v in ("fsdp", "megatron") if v in self.config)

    def exists_at(self, release: str, variant: str | None = None) -> bool:
        """Whether the release ships this entry (``ppo``: every release tutorrl supports), and where
        ``variant`` is given, with a config for it."""
        return self.default or (release in self.releases and (variant is None or variant in self.variants))

    def runs_at(self, release: str) -> bool:
        """Whether the entry's module starts at ``release`` (it exists there and does not stop at import)."""
        return self.exists_at(release) and release not in self.stops

    def moved_key(self, key: str) -> tuple[str, Moved] | None:
        """Where this entry's config reads ``key`` now, if its config moved it (the longest old prefix wins)."""
        for old in sorted(self.moved, key=len, reverse=True):
            if key == old or key.startswith(old + "."):
                return self.moved[old].to + key[len(old):], self.moved[old]
        return None

    @property
    def top(self) -> str:
        """The module's top package (``recipe`` for recipe.dapo.main_dapo)."""
        return self.module.split(".")[0]

    @property
    def checkout_is_package(self) -> bool:
        """Whether a recipe's checkout is its module's top package (named after it, the folder above it on
        PYTHONPATH), rather than the folder holding it (the checkout itself on PYTHONPATH)."""
        return self.import_root == "parent"

    def module_dir(self) -> str:
        """The module's folder inside a recipe checkout (``dapo`` for recipe.dapo.main_dapo, ``rep_exp`` for
        rep_exp.main_rep_exp); inside the wheel for verl's own (``verl/experimental/...``)."""
        parts = self.module.split(".")[:-1]
        return "/".join(parts[1:] if self.source == "recipe" and self.checkout_is_package else parts)

    def module_file(self) -> str:
        """The module's file, where :meth:`module_dir` is."""
        return "/".join(p for p in (self.module_dir(), self.module.split(".")[-1] + ".py") if p)

    def checkout_files(self) -> list[str]:
        """What a recipe's checkout must hold for its launches to compose, by path inside it: its config per
        variant, or, for an entry reading verl's own trainer config (``trainer_config``), its module's file."""
        if self.trainer_config:
            return [self.module_file()]
        return ["/".join(p for p in (self.config_dir, f"{self.config_name(v)}.yaml") if p) for v in self.variants]

    def config_name(self, variant: str) -> str:
        return self.config[variant]

    def hydra_args(self) -> list[str]:
        """What the launch adds for Hydra to find the config this entry's yaml names (empty for ``ppo``)."""
        if not self.searchpath:
            return []
        return [f"hydra.searchpath=[{','.join(self.searchpath)}]"]


class NotEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A module a recipe's launches start that is not an entry point (a ``not_entry`` table)."""

    why: str
    # Releases where its code starts (the real `python -m <module> --cfg job`); empty where it stops at every one.
    starts: tuple[str, ...] = ()


class _Entries(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    schema: str
    entry: dict[str, EntryPoint]
    # Modules a recipe's launches start that are not entries, each with why (measured: no config of its own, or
    # its code stops at import at every release tried).
    not_entry: dict[str, NotEntry] = {}


@functools.cache
def _load() -> _Entries:
    with open(_FILE, encoding="utf-8") as fh:
        return msgspec.convert(_toml.loads(fh.read()), _Entries)


@functools.cache
def load_entries() -> dict[str, EntryPoint]:
    """Every known entry point by name, ``ppo`` first."""
    return {name: msgspec.structs.replace(e, name=name) for name, e in _load().entry.items()}


def not_entry(module: str) -> NotEntry | None:
    """Why a module recipes launch is not an entry point (entries.toml's ``not_entry``); None if none is recorded."""
    return _load().not_entry.get(module)


# ppo's own table of entries.toml, the one entry a compile of a main_ppo spec (most of
# them) asks for: answered without reading the file. test_entries holds the two equal.
_PPO = EntryPoint(module="verl.trainer.main_ppo", name=DEFAULT)


def find_entry(text: str | None) -> EntryPoint | None:
    """The entry ``text`` names (a name of ``entries.toml``, or its module); unset is ``ppo``."""
    if text is None or text == DEFAULT:
        return _PPO
    entries = load_entries()
    if text in entries:
        return entries[text]
    return next((e for e in entries.values() if e.module == text), None)


def suffix(entry: str) -> str:
    """What an entry adds to a data file's name: ``""`` for ``ppo`` (its files keep their names), else ``@name``."""
    return "" if entry == DEFAULT else f"@{entry}"
