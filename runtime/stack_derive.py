"""A stack record for a verl release the package does not hold (``tutorrl keys add``).

What the run preflight checks for a release (runtime/stack.py) is hand-read
from verl's source and resolved with pip for the package's releases. For an
added one only what can be said honestly is derived, and the record says
what it came from:

* the start modules, the replica loader and the compared packages are the
  *base* release's (the newest packaged one before it), each ``verl.*``
  module kept only when the new wheel has its file (a module the wheel lacks
  is dropped and named);
* each engine's pins are the base release's constraints file with verl
  pinned to the new release, every pin checked against the new wheel's own
  ``Requires-Dist`` (its core requirements, ``verl-core`` and the engine's
  extra): a pin the new release no longer accepts is left out (so it is not
  compared) and named, as is a requirement with no pin at all.

Nothing is resolved or installed. ``packaging`` (the ``keys`` extra) reads
the requirements; without it the pins are taken unchecked, and that is said.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from tutorrl.runtime.stack import _data, canonical, constraints_file, public_version, read_constraints


def wheel_requirements(wheel: Path) -> tuple[str, list[str]]:
    """(Version, Requires-Dist lines) of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        name = next((n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if name is None:
            return "", []
        text = zf.read(name).decode("utf-8", "replace")
    head = text.split("\n\n", 1)[0]
    version = next((line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith("Version:")), "")
    requires = [line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith("Requires-Dist:")]
    return version, requires


def _wheel_has_module(names: set[str], module: str) -> bool:
    path = module.replace(".", "/")
    return f"{path}.py" in names or f"{path}/__init__.py" in names


def _applicable(requires: list[str], engine: str):
    """The requirements that bind a job with ``engine``: core, verl-core and the engine's extra.
    None when ``packaging`` is not installed."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return None
    out = []
    for line in requires:
        try:
            req = Requirement(line)
        except Exception:  # noqa: BLE001 - an unparsable line binds nothing we can check
            continue
        if canonical(req.name) == "verl":
            continue
        if req.marker is None or any(req.marker.evaluate({"extra": extra}) for extra in ("", "verl-core", engine)):
            out.append(req)
    return out


def _toml_value(value) -> str:
    # Strings, lists of strings and booleans only: JSON spells them as TOML does.
    return json.dumps(value, ensure_ascii=False)


def derive_stack(release: str, base: str, wheel: Path) -> tuple[dict[str, bytes], list[str], str]:
    """(files of the stacks/ folder, warnings, what the record was derived from) for ``release``."""
    record = _data().get("release", {}).get(base)
    if record is None:
        return {}, [f"no stack record: verl {base} (the base release) has none either; `tutorrl run` checks only "
                    f"verl's version for {release}"], ""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    _, requires = wheel_requirements(wheel)
    warnings: list[str] = []

    def keep(modules: list[str], where: str) -> list[str]:
        out = []
        for module in modules:
            if module.split(".")[0] == "verl" and not _wheel_has_module(names, module):
                warnings.append(f"stack: {module} ({where} of verl {base}) is not in verl {release}'s wheel: "
                                "left out of the start modules the run preflight imports")
                continue
            out.append(module)
        return out

    derived = (f"derived by `tutorrl keys add` from verl {base}'s record (its start modules, each found in "
               f"verl {release}'s wheel; its pins, checked against verl {release}'s Requires-Dist), not read "
               "from verl's source nor resolved with pip")
    lines = [f"# verl {release}: {derived}.", f'[release."{release}"]', f"derived = {_toml_value(derived)}",
             f"base = {_toml_value(base)}",
             f"modules = {_toml_value(keep(list(record.get('modules', [])), 'a start module'))}"]
    replica = str(record.get("replica", ""))
    if replica:
        where = replica.split(":", 1)[0]
        if _wheel_has_module(names, where):
            lines.append(f"replica = {_toml_value(replica)}")
        else:
            warnings.append(f"stack: the rollout replica loader {replica} of verl {base} is not in verl {release}'s "
                            "wheel: the run preflight does not ask the rollout server")
    lines.append(f"key = {_toml_value(list(record.get('key', [])))}")
    if "provides" in record:
        lines.append("provides = { " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in
                                                    sorted(record["provides"].items())) + " }")
    for variant, table in sorted(record.get("variant", {}).items()):
        lines += ["", f'[release."{release}".variant.{variant}]',
                  f"modules = {_toml_value(keep(list(table.get('modules', [])), f'a {variant} module'))}"]
    files: dict[str, bytes] = {}
    for engine, table in sorted(record.get("engine", {}).items()):
        lines += ["", f'[release."{release}".engine.{engine}]', f"key = {_toml_value(list(table.get('key', [])))}"]
        if table.get("modules"):
            lines.append(f"modules = {_toml_value(keep(list(table['modules']), f'a {engine} module'))}")
        if table.get("unresolvable"):
            lines.append(f"unresolvable = {_toml_value(' '.join(str(table['unresolvable']).split()))}")
            continue
        path = constraints_file(base, engine)
        if not path.is_file():
            continue
        pins, python = read_constraints(path)
        pins["verl"] = release
        applicable = _applicable(requires, engine)
        if applicable is None:
            warnings.append(f"stack ({engine}): verl {base}'s pins are taken unchecked (checking them against "
                            f"verl {release}'s Requires-Dist needs `packaging`: pip install 'tutorrl[keys]')")
        for req in applicable or ():
            name = canonical(req.name)
            pin = pins.get(name)
            if pin is None:
                if str(req.specifier):
                    warnings.append(f"stack ({engine}): verl {release} requires {req.name}{req.specifier} and verl {base}'s set pins no "
                                    f"{req.name}: not compared")
                continue
            if str(req.specifier) and not req.specifier.contains(public_version(pin), prereleases=True):
                del pins[name]
                warnings.append(f"stack ({engine}): verl {base}'s pin {req.name}=={pin} is outside verl {release}'s "
                                f"requirement {req.name}{req.specifier}: left out (not compared); resolve the set with pip to pin it")
        head = [f"# verl {release} with {engine}: verl {base}'s set ({path.name}) with verl=={release}, each pin "
                f"checked against verl {release}'s Requires-Dist; not resolved with pip (tutorrl keys add)."]
        if python:
            head.append(f"# python: {python}")
        body = [f"{name}=={version}" for name, version in sorted(pins.items())]
        files[f"verl-{release}-{engine}.txt"] = ("\n".join(head + body) + "\n").encode()
    files[f"verl-{release}.toml"] = ("\n".join(lines) + "\n").encode()
    return files, warnings, derived
