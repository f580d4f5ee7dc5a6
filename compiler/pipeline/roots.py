"""Roots: folders a spec names by an environment variable of the job.

A spec declares ``[roots] DATA_ROOT = { default = "data" }`` and writes a path
setting as ``"$DATA_ROOT/gsm8k/train.parquet"``. The bundle keeps the *name*
(so it stays reproducible and ``tutorrl diff`` shows what a reviewer reads);
``launch.sh`` puts the job's value in when the job starts, with a program
assembled from :mod:`tutorrl.compiler.release.hydra`'s own quoting functions, so a
value can bring neither shell nor Hydra nor OmegaConf syntax with it. One
bundle then runs on a laptop's embedded head (the default, relative to where
the job runs) and on a cluster (``DATA_ROOT=/shared/data tutorrl run ...``).

Only a setting's own value -- a path, or a list of paths -- may start with a
root, and only at its start (``$NAME`` alone or ``$NAME/...``): a table entry
verl reads whole, an extra override or an environment value would need a
second, less reviewable expansion, so a declared root there is refused.
"""

from __future__ import annotations

import re
from typing import Mapping

# Both need a '$': a spec with none never compiles them (re's cache does, at the first
# string with one; a module-level compile is paid by every cold compile).
ROOT_REF = r"^\$([A-Za-z_][A-Za-z0-9_]*)(?=/|\Z)"
# A declared root written anywhere in a string (for the places that refuse one).
_ANYWHERE = r"\$\{?([A-Za-z_][A-Za-z0-9_]*)"


def reference(value: object) -> tuple[str, str] | None:
    """``("DATA_ROOT", "/gsm8k/train.parquet")`` for ``"$DATA_ROOT/gsm8k/train.parquet"``; None otherwise."""
    if not isinstance(value, str) or not value.startswith("$"):
        return None
    m = re.match(ROOT_REF, value)
    return (m.group(1), value[m.end():]) if m else None


def _written(text: str) -> set[str]:
    """Every name ``text`` writes as ``$NAME`` or ``${NAME}``."""
    return set(re.findall(_ANYWHERE, text)) if "$" in text else set()


def _strings(value: object):
    """Every string in a value (a table's keys too): where a root may be written. One per
    line, so no name runs from one into the next."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)


def references(value: object) -> list[tuple[str, str]]:
    """Every root reference of a setting's value (a string or a list of strings)."""
    items = value if isinstance(value, list) else [value]
    return [ref for ref in map(reference, items) if ref is not None]


def join(root_value: str, rest: str) -> str:
    """The path a reference stands for once the root's value is known."""
    if not rest:
        return root_value
    return root_value.rstrip("/") + rest if root_value.rstrip("/") else rest


def expand(value: str, env: Mapping[str, str]) -> str | None:
    """The path for ``value`` in ``env`` (None where its root has no value); other values as they are."""
    ref = reference(value)
    if ref is None:
        return value
    root_value = env.get(ref[0])
    return join(root_value, ref[1]) if root_value else None


def launch_argument(value: object) -> str:
    """The JSON argument of :func:`launch_program` for one override value."""
    def part(item):
        ref = reference(item)
        return {"root": ref[0], "path": ref[1]} if ref else item

    argument = [part(v) for v in value] if isinstance(value, list) else part(value)
    try:
        return _json_text(argument)
    except TypeError:
        import json

        return json.dumps(argument, sort_keys=True)


# json.dumps' text (sort_keys, ASCII only) of what launch_argument writes -- strings,
# {"path", "root"} tables and lists of them -- without importing json, a large share of
# a cold compile of a spec with roots; tests/compiler/pipeline/test_roots.py holds the two
# equal. Anything else (TypeError) is json's to write.
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def _json_text(value: object) -> str:
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_json_text, value)) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return "{" + ", ".join(f"{_json_string(k)}: {_json_text(value[k])}" for k in sorted(value)) + "}"
    raise TypeError(f"not written here: {type(value).__name__}")


def _json_string(text: str) -> str:
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    out = []
    for c in text:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif " " <= c <= "~":
            out.append(c)
        elif ord(c) > 0xFFFF:  # a surrogate pair, as json writes one
            n = ord(c) - 0x10000
            out.append(f"\\u{0xD800 | n >> 10:04x}\\u{0xDC00 | n & 0x3FF:04x}")
        else:
            out.append(f"\\u{ord(c):04x}")
    return '"' + "".join(out) + '"'


def launch_program() -> str:
    """Python run by launch.sh: ``argv = [key, JSON value]`` -> prints ``key=<Hydra value>``.

    The quoting is :mod:`tutorrl.compiler.release.hydra`'s own code, never a copy; a
    root with no value in the job's environment stops the launch (exit 3).
    """
    from tutorrl.compiler.release import render_value
    from tutorrl.compiler.release.hydra import launch_prelude

    return "\n".join([
        "import json, math, os, re, sys",
        *launch_prelude(render_value, join),
        "key, raw = sys.argv[1:]",
        "def part(item):",
        "    if isinstance(item, str):",
        "        return item",
        "    value = os.environ.get(item['root'], '')",
        "    if not value:",
        "        sys.exit('tutorrl: root %s (the spec\\'s [roots]) is not set in the job environment; %s needs it'"
        " % (item['root'], key.lstrip('+')))",
        "    return join(value, item['path'])",
        "value = json.loads(raw)",
        "value = [part(v) for v in value] if isinstance(value, list) else part(value)",
        "print('%s=%s' % (key, render_value(value)))",
        "",
    ])


def findings(spec, resolved, lock) -> list:
    """Compile-time checks of the spec's roots against where they are used."""
    from tutorrl.compiler.pipeline import rules
    from tutorrl.errors import Finding

    out: list[Finding] = []
    declared = set(spec.roots)
    for name in spec.roots:
        key = f"roots.{name}"
        if name.startswith(rules.RESERVED_ENV_PREFIX):
            out.append(Finding(key, f"{rules.RESERVED_ENV_PREFIX}* names are set by tutorrl itself"))
        elif rules.bash_changes(name):
            out.append(Finding(key, f"{name} is a variable bash sets or changes itself; it cannot name a folder",
                               "choose another name, e.g. DATA_ROOT"))
        elif rules.takes_over(name):
            out.append(Finding(key, f"{name} changes how the launch itself runs; it cannot name a folder",
                               "choose another name, e.g. DATA_ROOT"))
        elif rules.looks_secret(name):
            # The same rule as [env] set: a root's value is put into the launch
            # (run --dry-run prints it; runs/*/verl-config.yaml records it).
            out.append(Finding(key, f"{name} looks like a secret; a root's value is written into verl's config "
                               "and the run's record", "a root names a folder (e.g. MODEL_ROOT); pass secrets "
                               "with env.passthrough"))
        if name in spec.env.set or name in spec.env.passthrough:
            out.append(Finding(key, f"{name} is both a root and in [env]", "keep it in one place: [roots] for a folder"))
    used: set[str] = set()
    recipe = spec.experiment.recipe
    ref = reference(recipe.path) if recipe is not None else None
    if ref is not None:
        # launch.sh puts the root's value into the recipe folder's path (assemble._recipe_lines).
        used.add(ref[0])
    for o in resolved.overrides:
        target = lock.targets.get(o.setting)
        table = target is not None and target.kind == "table"
        if o.raw is None and not table and isinstance(o.value, (str, list)):
            for name, _ in references(o.value):
                if name in declared:
                    used.add(name)
                else:
                    out.append(Finding(o.setting, f"${name} is not a root of this spec: verl receives the text "
                                       f"\"${name}\" literally", f"declare it: [roots] {name} = {{}}", "warning"))
            continue
        if not declared:
            continue
        text = o.raw if o.raw is not None else "\n".join(_strings(o.value))
        for name in sorted(_written(text) & declared):
            where = "a raw override ([verl] extra_overrides or unread_overrides)" if o.raw is not None \
                else "a table entry verl reads whole"
            out.append(Finding(o.setting, f"root ${name} is used in {where}; roots are put in only where a "
                               "setting's own value starts with one",
                               "write the path in a path setting, or the literal value here"))
    for name, value in spec.env.set.items():
        for root in sorted(_written(value) & declared):
            out.append(Finding(f"env.set.{name}", f"root ${root} is used in an environment value, which is literal"))
    for name in sorted(declared - used):
        if not any(f.key.startswith(f"roots.{name}") for f in out):
            out.append(Finding(f"roots.{name}", f"root {name} is declared but no setting starts with ${name}",
                               None, "warning"))
    return out
