"""A :class:`~tutorrl.review.model.Diff` as text (optionally coloured), Markdown or JSON.

Every format says the same things in the same order; only the dress differs,
so a reviewer reading the PR comment sees what the terminal showed.
"""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec

from tutorrl.compiler.bundle import bundle_id
from tutorrl.review.model import Diff, EnvChange, SettingChange

_SIGN = {"added": "+", "removed": "-", "changed": "~"}
_ANSI = {"added": "32", "removed": "31", "changed": "33", "head": "1", "dim": "2"}

NO_KEY = "(not passed to verl)"
# No --config-path: the config comes from verl's own package.
VERL_CONFIGS = "(verl's own configs)"

SECTIONS = (
    ("experiment", "Experiment"),
    ("resources", "Resources"),
    ("reward", "Reward"),
)


def use_color(stream, mode: str = "auto") -> bool:
    """``auto``: a terminal, unless NO_COLOR is set (https://no-color.org)."""
    if mode != "auto":
        return mode == "always"
    if os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


def value(v: Any) -> str:
    """A value as the spec would spell it (TOML-like: strings quoted, booleans lower-case)."""
    if v is None:
        return "(unset)"
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))


def render(diff: Diff, fmt: str, color: bool = False) -> str:
    if fmt == "json":
        return msgspec.json.format(msgspec.json.encode(diff), indent=2).decode() + "\n"
    if fmt == "markdown":
        return _markdown(diff)
    return _text(diff, color)


def summary_line(diff: Diff) -> str:
    if diff.same:
        return (f"no differences: {diff.old.label} and {diff.new.label} are the same launch "
                f"(bundle {bundle_id(diff.new.digest)})")
    return (f"{diff.new.experiment}: {diff.old.label} ({bundle_id(diff.old.digest)}) -> "
            f"{diff.new.label} ({bundle_id(diff.new.digest)})")


def _key_parts(c: SettingChange) -> list[str]:
    """The verl keys of a change: one entry, or old and new when the release moved them."""
    if not c.old_keys and not c.new_keys:
        return []
    if c.old_keys == c.new_keys or not c.old_keys or not c.new_keys:
        return [", ".join(c.new_keys or c.old_keys)]
    return [", ".join(c.old_keys), ", ".join(c.new_keys)]


def _keys(c: SettingChange) -> str:
    return " -> ".join(_key_parts(c))


def _values(c: SettingChange) -> tuple[str, str]:
    return (value(c.old) if c.change != "added" else "", value(c.new) if c.change != "removed" else "")


def _default(c: SettingChange, code=lambda text: text) -> str:
    """What an unset side means: verl's default, which an added setting replaces and a removed one returns to."""
    if c.default is None or c.change == "changed":
        return ""
    return f"{'was' if c.change == 'added' else 'now'} verl's default {code(value(c.default))}"


def _env_line(e: EnvChange) -> str:
    if e.kind == "passthrough":
        what = {"added": "added", "removed": "removed"}[e.change]
        return f"passthrough {e.name} {what} (value read from the submitter's environment, never written)"
    note = f" ({e.note})" if e.note else ""
    if e.change == "changed":
        return f"set {e.name}: {value(e.old)} -> {value(e.new)}{note}"
    return f"set {e.name}={value(e.new if e.change == 'added' else e.old)} {e.change}{note}"


# ---------------------------------------------------------------- text

def _text(diff: Diff, color: bool) -> str:
    def paint(text: str, what: str) -> str:
        return f"\x1b[{_ANSI[what]}m{text}\x1b[0m" if color else text

    if diff.same:
        return summary_line(diff) + "\n"
    out = [paint(summary_line(diff), "head")]

    def section(title: str, lines: list[tuple[str, str]]) -> None:
        if lines:
            out.append("")
            out.append(paint(title, "head"))
            out.extend("  " + paint(f"{_SIGN[kind]} {text}", kind) for kind, text in lines)

    for attr, title in SECTIONS:
        lines = []
        for c in getattr(diff, attr):
            old, new = _values(c)
            text = f"{c.setting}: {old} -> {new}" if c.change == "changed" else f"{c.setting}: {old or new} {c.change}"
            where = _keys(c)
            extra = "; ".join(x for x in (f"verl: {where}" if where else "", _default(c), c.note) if x)
            lines.append((c.change, text + (f"   [{extra}]" if extra else "")))
        section(title, lines)
    section("Environment", [(e.change, _env_line(e)) for e in diff.environment])
    if diff.release is not None:
        section("verl release", _release_lines(diff))
    section("Extra overrides ([verl] extra_overrides)", [(o.change, o.text) for o in diff.extra_overrides])
    section("Unread overrides ([verl] unread_overrides: passed as written, never read by the release)",
            [(o.change, o.text) for o in diff.unread_overrides])
    section("Spec fields that reach no verl key",
            [(c.change, f"{c.setting}: {value(c.old)} -> {value(c.new)}") for c in diff.spec_only])
    if diff.file_diffs:
        out.append("")
        out.append(paint(f"Only the files differ ({', '.join(diff.files)}): nothing above explains it, "
                         "so the bundles were likely written by different tutorrl releases.", "head"))
        for text in diff.file_diffs.values():
            out.append(text)
    return "\n".join(out) + "\n"


def _moves(diff: Diff) -> list[tuple[str, str, str, str]]:
    """(setting, old keys, new keys, note) per move; the entries of a table (such
    as the reward kwargs), which move together, collapse into one ``table.*`` row."""
    r = diff.release
    assert r is not None
    rows: list[tuple[str, str, str, str]] = []
    tables: dict[tuple, list[str]] = {}
    for m in r.moved:
        note = f"value spelled {m.old_spelling} -> {m.new_spelling}" if m.old_spelling != m.new_spelling else ""
        name = m.setting.removeprefix(m.table + ".")
        if m.table and m.old_keys and m.new_keys and all(
                k.endswith("." + name) for k in (*m.old_keys, *m.new_keys)):
            pattern = (m.table, tuple(k[: -len(name)] + "*" for k in m.old_keys),
                       tuple(k[: -len(name)] + "*" for k in m.new_keys), note)
            tables.setdefault(pattern, []).append(name)
            continue
        rows.append((m.setting, ", ".join(m.old_keys) or NO_KEY, ", ".join(m.new_keys) or NO_KEY, note))
    for (table, old, new, note), names in tables.items():
        label = f"{table}.{names[0]}" if len(names) == 1 else f"{table}.* ({', '.join(names)})"
        rows.append((label, ", ".join(old), ", ".join(new), note))
    return rows


MAIN_PPO = "verl.trainer.main_ppo"


def _release_lines(diff: Diff) -> list[tuple[str, str]]:
    r = diff.release
    assert r is not None
    lines: list[tuple[str, str]] = []
    if (r.old, r.old_variant) != (r.new, r.new_variant):
        lines.append(("changed", f"verl {r.old} ({r.old_variant}) -> verl {r.new} ({r.new_variant})"))
    if r.old_entry != r.new_entry:
        lines.append(("changed", f"entry point: python -m {r.old_entry or MAIN_PPO} -> python -m {r.new_entry or MAIN_PPO}"))
    if r.old_config != r.new_config:
        lines.append(("changed", f"config: --config-name {r.old_config or '?'} -> {r.new_config or '?'}"))
    if r.old_config_path != r.new_config_path:
        old, new = (f"--config-path {p}" if p else VERL_CONFIGS for p in (r.old_config_path, r.new_config_path))
        lines.append(("changed", f"config folder: {old} -> {new}"))
    if r.old_select != r.new_select:
        lines.append(("changed", f"config selection: {' '.join(r.old_select) or '(none)'} -> "
                                 f"{' '.join(r.new_select) or '(none)'}"))
    for setting, old, new, note in _moves(diff):
        lines.append(("changed", f"moved {setting}: {old} -> {new}" + (f" ({note})" if note else "")))
    lines += [("changed", f"{u}: release not in this tutorrl's key map; its verl keys are not shown")
              for u in r.unmapped]
    return lines


# ---------------------------------------------------------------- markdown

def _code(text: str) -> str:
    """An inline code span that survives backticks and table pipes."""
    if not text:
        return ""
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _table(rows: list[list[str]], head: list[str]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _markdown(diff: Diff) -> str:
    if diff.same:
        return f"**tutorrl diff**: {_md_escape(summary_line(diff))}\n"
    o, n = diff.old, diff.new
    out = [f"### tutorrl diff: {_code(n.experiment)}", "",
           f"{_code(o.label)} ({_code(bundle_id(o.digest))}) → {_code(n.label)} ({_code(bundle_id(n.digest))})"]

    def block(title: str, lines: list[str]) -> None:
        if lines:
            out.extend(["", f"**{title}**", "", *lines])

    for attr, title in SECTIONS:
        changes = getattr(diff, attr)
        rows = []
        for c in changes:
            old, new = _values(c)
            rows.append([_SIGN[c.change], _code(c.setting), _code(old), _code(new),
                         " → ".join(_code(k) for k in _key_parts(c)),
                         "; ".join(x for x in (_default(c, _code), _md_escape(c.note)) if x)])
        if rows:
            block(title, _table(rows, ["", "setting", "old", "new", "verl key", "note"]))
    block("Environment", [f"- {_SIGN[e.change]} {_md_env(e)}" for e in diff.environment])
    if diff.release is not None:
        block("verl release", _md_release(diff))
    block("Extra overrides", [f"- {_SIGN[x.change]} {_code(x.text)}" for x in diff.extra_overrides])
    block("Unread overrides (passed as written, never read by the release)",
          [f"- {_SIGN[x.change]} {_code(x.text)}" for x in diff.unread_overrides])
    block("Spec fields that reach no verl key",
          [f"- {_SIGN[c.change]} {_code(c.setting)}: {_code(value(c.old))} → {_code(value(c.new))}"
           for c in diff.spec_only])
    if diff.file_diffs:
        lines = [f"Only the files differ ({', '.join(_code(f) for f in diff.files)}); "
                 "the bundles were likely written by different tutorrl releases."]
        for name, text in diff.file_diffs.items():
            fence = "````" if "```" in text else "```"
            lines += ["", f"<details><summary>{name}</summary>", "", f"{fence}diff", text, fence, "", "</details>"]
        block("Files", lines)
    return "\n".join(out) + "\n"


def _md_release(diff: Diff) -> list[str]:
    r = diff.release
    assert r is not None
    lines: list[str] = []
    if (r.old, r.old_variant) != (r.new, r.new_variant):
        lines.append(f"- ~ verl {_code(r.old)} ({r.old_variant}) → verl {_code(r.new)} ({r.new_variant})")
    if r.old_entry != r.new_entry:
        lines.append(f"- ~ entry point: {_code('python -m ' + (r.old_entry or MAIN_PPO))} → "
                     f"{_code('python -m ' + (r.new_entry or MAIN_PPO))}")
    if r.old_config != r.new_config:
        lines.append(f"- ~ config: {_code('--config-name ' + r.old_config)} → {_code('--config-name ' + r.new_config)}")
    if r.old_config_path != r.new_config_path:
        old, new = (_code(f"--config-path {p}") if p else VERL_CONFIGS for p in (r.old_config_path, r.new_config_path))
        lines.append(f"- ~ config folder: {old} → {new}")
    if r.old_select != r.new_select:
        lines.append(f"- ~ config selection: {_code(' '.join(r.old_select)) or '(none)'} → "
                     f"{_code(' '.join(r.new_select)) or '(none)'}")
    lines += [f"- ~ {_md_escape(u)}: release not in this tutorrl's key map; its verl keys are not shown"
              for u in r.unmapped]
    if r.moved:
        rows = [[_code(setting), _code(old), _code(new), _md_escape(note.replace(" -> ", " → "))]
                for setting, old, new, note in _moves(diff)]
        lines += ["", f"{len(r.moved)} setting{'s' if len(r.moved) != 1 else ''} moved to other verl keys:", "",
                  *_table(rows, ["setting", "old verl key", "new verl key", "note"])]
    return lines


def _md_env(e: EnvChange) -> str:
    if e.kind == "passthrough":
        return f"passthrough {_code(e.name)} {e.change} (value read at run time, never written)"
    note = f" ({_md_escape(e.note)})" if e.note else ""
    if e.change == "changed":
        return f"set {_code(e.name)}: {_code(value(e.old))} → {_code(value(e.new))}{note}"
    v = e.new if e.change == "added" else e.old
    return f"set {_code(e.name + '=' + value(v))} {e.change}{note}"


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#"})


def _md_escape(text: str) -> str:
    return text.translate(_MD_SPECIAL)

