"""Config sections a verl release builds into dataclasses, and the fields each takes.

Data: ``built/verl-<release>-<variant>.json``, derived from the release's wheel
by :mod:`tutorrl.compiler.release.built_import` (``tools/built_sections.py``)
and checked against the wheels by the test suite. A dataclass refuses a field
it does not declare, so a ``+`` key that lands there makes verl fail when it
builds the section; a key under a field that is a plain dict (``engine_kwargs``,
``override_config``) is the dict's business, not the class's.

On the compile path only when an ``extra_overrides`` entry appends a key the
release's yaml does not declare; standard library and msgspec only.
"""

from __future__ import annotations

import functools
import os

import msgspec

from tutorrl import _overlay
from tutorrl.compiler.release import added

SCHEMA = "tutorrl.built/1"
_DIR = os.path.join(os.path.dirname(__file__), "built")


class Section(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    # "class" is a keyword: the JSON name is kept, the attribute is cls.
    cls: str = msgspec.field(name="class")
    fields: tuple[str, ...] = ()
    # A root: the call that builds it. A nested section: the root it is built within.
    read_by: str = ""
    within: str = ""

    @property
    def name(self) -> str:
        return self.cls.rsplit(".", 1)[-1]


class Built(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    schema: str
    release: str
    variant: str
    sections: dict[str, Section]

    def owner(self, key: str) -> tuple[str, Section] | None:
        """The innermost built section ``key`` lies under, with it."""
        best = None
        for section, info in self.sections.items():
            if key.startswith(section + ".") and (best is None or len(section) > len(best[0])):
                best = (section, info)
        return best

    def refusal(self, key: str) -> tuple[str, Section, str] | None:
        """(section, its class, the field name) when ``key`` names a field the class does not declare."""
        found = self.owner(key)
        if found is None:
            return None
        section, info = found
        name = key[len(section) + 1:].split(".", 1)[0]
        return None if name in info.fields else (section, info, name)


def built_path(release: str, variant: str, entry: str = "ppo") -> str:
    """``built/verl-R-V.json``; another entry point's ``built/verl-R-V@entry.json``."""
    return os.path.join(_DIR, f"verl-{release}-{variant}{'' if entry == 'ppo' else '@' + entry}.json")


@functools.cache
def load_built(release: str, variant: str, entry: str = "ppo") -> Built:
    """The release's built sections for an entry point (none for a release with no file: it builds
    nothing), the package's or, for a release `tutorrl keys add` added, the data folder's."""
    name = os.path.basename(built_path(release, variant, entry))
    path = _overlay.find(_DIR, "built", name, release, added.is_user_release(release))
    if path is None:
        return Built(SCHEMA, release, variant, {})
    with open(path, "rb") as fh:
        return msgspec.json.decode(fh.read(), type=Built)
