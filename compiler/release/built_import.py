"""Read out of a verl wheel which config sections verl builds into dataclasses, and their fields.

From 0.6.0 verl turns ``actor_rollout_ref.actor``, ``rollout``, ``critic`` and
more into dataclasses (``omega_conf_to_dataclass``: ``hydra.utils.instantiate``
of the section's ``_target_``, or ``OmegaConf.structured`` of an explicit
class), and before that the ``profiler`` sections. A dataclass takes only the
fields it declares: a ``+`` key under such a section that is not one of them
makes verl fail when it builds the section (``TypeError: unexpected keyword
argument``, or OmegaConf's ``ConfigKeyError``). This module derives, per
release and variant, what :mod:`tutorrl.compiler.release.built` answers from:

1. *roots*: every ``omega_conf_to_dataclass(ARG ...)`` call in the wheel whose
   argument is a config path (``config.critic``, ``self.config.actor``,
   ``config.get("profiler")``), matched to the sections of the release's key
   set that end with that path; ``read_by`` records the call;
2. *nested* sections: every ``_target_`` section under a root, which
   ``instantiate`` builds recursively;
3. each section's class, found by name in the wheel's source, and its
   constructor fields, read from the class bodies (``ast``, no import: the
   wheels of 0.6.0 to 0.7.0 do not import with this environment's
   transformers), bases first, without ``ClassVar`` and ``init=False`` fields.

Pure standard library plus the committed key sets; run by ``tools/built_sections.py``.
"""

from __future__ import annotations

import ast
import json
import re
import zipfile
from pathlib import Path

from tutorrl.compiler.release.built import SCHEMA
from tutorrl.compiler.release.keysets import VARIANTS, load_keyset

_TARGET = "._target_"


class _Class:
    def __init__(self, name: str, module: str, node: ast.ClassDef):
        self.name, self.module, self.node = name, module, node
        self.is_dataclass = any(_decorator_name(d) == "dataclass" for d in node.decorator_list)
        self.bases = [b for b in (_last_name(base) for base in node.bases) if b]

    def own_fields(self) -> list[str]:
        out = []
        for stmt in self.node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            text = ast.unparse(stmt.annotation)
            if "ClassVar" in text or text.endswith("KW_ONLY"):
                continue
            if isinstance(stmt.value, ast.Call) and _last_name(stmt.value.func) == "field" and any(
                    k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in stmt.value.keywords):
                continue
            out.append(stmt.target.id)
        return out


def _decorator_name(node: ast.expr) -> str | None:
    return _last_name(node.func if isinstance(node, ast.Call) else node)


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _last_name(node.value)
    return None


class WheelSource:
    """The ``verl/**/*.py`` of one wheel (tests excluded), parsed on demand: a file is parsed
    only when it calls ``omega_conf_to_dataclass`` or defines a class asked for."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self._trees: dict[str, ast.Module] = {}
        self._classes: dict[str, list[_Class]] = {}

    def tree(self, path: str) -> ast.Module:
        if path not in self._trees:
            self._trees[path] = ast.parse(self.files[path], filename=path)
        return self._trees[path]

    def classes(self, name: str) -> list[_Class]:
        if name not in self._classes:
            pattern = re.compile(rf"^\s*class {re.escape(name)}\b", re.MULTILINE)
            found = []
            for path, text in sorted(self.files.items()):
                if pattern.search(text):
                    module = path[:-3].replace("/", ".").removesuffix(".__init__")
                    found += [_Class(name, module, node) for node in ast.walk(self.tree(path))
                              if isinstance(node, ast.ClassDef) and node.name == name]
            self._classes[name] = found
        return self._classes[name]

    @classmethod
    def from_wheel(cls, wheel: Path) -> "WheelSource":
        with zipfile.ZipFile(wheel) as zf:
            files = {n: zf.read(n).decode("utf-8") for n in zf.namelist()
                     if n.startswith("verl/") and n.endswith(".py") and "/tests/" not in n}
        return cls(files)

    def find_class(self, name: str, near: str = "verl") -> _Class | None:
        """The class ``name``, preferring the one defined under module ``near`` (a ``_target_``'s package)."""
        found = self.classes(name)
        if not found:
            return None
        return sorted(found, key=lambda c: (not c.module.startswith(near), len(c.module), c.module))[0]

    def fields(self, cls: _Class) -> list[str] | None:
        """The keyword arguments the class's constructor takes, or None when it is no dataclass."""
        order: list[str] = []
        seen: set[int] = set()

        def walk(c: _Class) -> bool:
            if id(c) in seen:
                return c.is_dataclass
            seen.add(id(c))
            any_dc = False
            for base in c.bases:
                b = self.find_class(base, c.module.rpartition(".")[0])
                if b is not None and walk(b):
                    any_dc = True
            if c.is_dataclass:
                for name in c.own_fields():
                    if name not in order:
                        order.append(name)
            return c.is_dataclass or any_dc

        return sorted(order) if walk(cls) and cls.is_dataclass else None

    def build_calls(self, variant: str) -> list[tuple[str, str, str, str, str | None]]:
        """(config path, file, enclosing function, argument as written, class named by ``dataclass_type``).

        The path is absolute (``actor_rollout_ref.actor``): inside a worker
        class ``config`` is the worker's own section, so its prefix is added;
        elsewhere (the trainer, ``validate_config``) ``config`` is the whole
        config. Other trainers' entry points (SFT) are not the PPO launch's,
        nor the other variant's workers; ``experimental/`` calls come last.
        """
        out = []
        other = "megatron_workers.py" if variant == "fsdp" else "fsdp_workers.py"
        for path in sorted(self.files, key=lambda p: ("/experimental/" in p, p)):
            name = path.rsplit("/", 1)[-1]
            if name.startswith("sft_trainer") or name == other or "omega_conf_to_dataclass(" not in self.files[path]:
                continue
            for owner, func in _functions(self.tree(path)):
                prefix = next((p for word, p in _WORKERS if word in owner), "")
                for node in ast.walk(func):
                    if not (isinstance(node, ast.Call) and _last_name(node.func) == "omega_conf_to_dataclass"
                            and node.args):
                        continue
                    chain = _config_path(node.args[0])
                    if not chain:
                        continue
                    typ = node.args[1] if len(node.args) > 1 else next(
                        (k.value for k in node.keywords if k.arg == "dataclass_type"), None)
                    out.append((f"{prefix}.{chain}" if prefix else chain, path, func.name,
                                ast.unparse(node.args[0]), _last_name(typ) if typ is not None else None))
        return out


# Worker classes and the section their ``config`` is (fsdp_workers/megatron_workers/engine_workers).
_WORKERS = (("ActorRollout", "actor_rollout_ref"), ("Critic", "critic"), ("RewardModel", "reward_model"))


def _functions(tree: ast.Module):
    """(enclosing class name or '', function) for every function of a module, methods included."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield "", node
        elif isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node.name, item


def _config_path(node: ast.expr) -> str | None:
    """``config.a.b`` / ``self.config.a`` / ``config.get("a", {})`` -> ``"a.b"``; anything else None."""
    if isinstance(node, ast.Name):
        return "" if node.id == "config" else None
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr == "config":
            return ""
        head = _config_path(node.value)
        return None if head is None else (f"{head}.{node.attr}" if head else node.attr)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        head = _config_path(node.func.value)
        name = node.args[0].value
        return None if head is None else (f"{head}.{name}" if head else name)
    return None


def built_sections(source: WheelSource, keyset) -> dict[str, dict]:
    """Section -> {class, fields, read_by | within} for one key set of the wheel's release."""
    targets = {k[:-len(_TARGET)]: info.default for k, info in keyset.keys.items() if k.endswith(_TARGET)}
    prefixes = {k.rsplit(".", i)[0] for k in keyset.keys for i in range(1, k.count(".") + 1)}
    roots: dict[str, tuple[str, str]] = {}  # section -> (class name, read_by)
    for chain, path, func, arg, typ in source.build_calls(keyset.variant):
        if chain not in prefixes or chain in roots:
            continue
        name = typ or (targets[chain].rsplit(".", 1)[-1] if chain in targets else None)
        if name is not None:
            roots[chain] = (name, f"{path}: {func}: omega_conf_to_dataclass({arg}" + (", ...)" if typ else ")"))
    out: dict[str, dict] = {}

    def add(section: str, name: str, near: str, why: dict) -> None:
        cls = source.find_class(name, near)
        fields = source.fields(cls) if cls is not None else None
        if fields is not None:
            out[section] = {"class": f"{cls.module}.{cls.name}", "fields": fields, **why}

    # A root inside another root is built with it (instantiate recurses): keep the outer one.
    roots = {s: r for s, r in roots.items() if not any(s.startswith(o + ".") for o in roots)}
    for section, (name, read_by) in sorted(roots.items()):
        near = targets.get(section, "verl").rpartition(".")[0]
        add(section, name, near, {"read_by": read_by})
    for section, target in sorted(targets.items()):
        root = next((r for r in sorted(roots, key=len) if section.startswith(r + ".")), None)
        if root is not None and section not in out and root in out:
            add(section, target.rsplit(".", 1)[-1], target.rpartition(".")[0], {"within": root})
    return dict(sorted(out.items()))


def encode_built(release: str, variant: str, sections: dict[str, dict]) -> bytes:
    """Stable JSON, one section per line."""
    head = {"schema": SCHEMA, "release": release, "variant": variant}
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()] + ['  "sections": {']
    items = sorted(sections.items())
    for i, (section, info) in enumerate(items):
        lines.append(f"    {json.dumps(section)}: {json.dumps(info, sort_keys=True)}"
                     + ("," if i < len(items) - 1 else ""))
    lines += ["  }", "}"]
    return ("\n".join(lines) + "\n").encode()


def derive(release: str, wheel: Path) -> dict[str, bytes]:
    """``{file name: bytes}`` of both variants' built-section files for ``release``: main_ppo's, and each
    other entry point's at the releases it exists (from that entry's own key set: the same reading of
    the wheel, matched to the sections its config has)."""
    from tutorrl.compiler.release.entries import load_entries, suffix

    source = WheelSource.from_wheel(wheel)
    return {f"verl-{release}-{variant}{suffix(entry.name)}.json":
            encode_built(release, variant, built_sections(source, load_keyset(release, variant, entry.name)))
            for entry in load_entries().values() for variant in VARIANTS if entry.exists_at(release, variant)}

