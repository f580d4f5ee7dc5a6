"""The training stack a job's Python needs for a bundle's verl release.

``stacks/stacks.toml`` says, per verl release, which modules verl's trainer
imports as a run starts and which packages matter; ``stacks/verl-<release>-
<engine>.txt`` (written by ``tools/stacks.py``) pins the whole set pip
resolved for each rollout engine. ``probe`` runs in the job's Python and
reports what it has; ``compare`` (pure) turns that into findings that name
what is missing or mismatched and the pip command that fixes it. A release
and engine with no installable set records why (``unresolvable``) instead.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

STACKS = Path(__file__).with_name("stacks")

# Run in the job's Python, by its path (it may have no tutorrl): runtime/job_probe.py's stack role.
PROBE = Path(__file__).with_name("job_probe.py")


@dataclass(frozen=True)
class Stack:
    release: str
    engine: str | None          # None: the spec names no rollout engine
    modules: tuple[str, ...]    # imported in order (the engine's own last)
    replica: str                # "module:function" called with the engine's name, or ""
    key: tuple[str, ...]        # distributions compared with the pins
    pins: dict[str, str]        # every pinned distribution (canonical name -> version)
    provides: dict[str, str]    # import name -> distribution, for messages
    constraints: Path | None    # the pip constraints file, when one is recorded
    resolved_for: str           # the Python the pins were resolved with ("3.11"), or ""
    engine_modules: tuple[str, ...] = ()  # the part of ``modules`` that imports the engine
    unresolvable: str = ""      # why no set is recorded for this release and engine, or ""


def canonical(name: str) -> str:
    """PEP 503 name: what pip and importlib.metadata treat as the same distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def public_version(version: str) -> str:
    """``2.11.0+cu130`` is the 2.11.0 release built for CUDA 13.0: the same pin."""
    return version.split("+", 1)[0]


def _data() -> dict:
    """The packaged records, then each added release's (``tutorrl keys add``), which never
    replaces a packaged one."""
    with open(STACKS / "stacks.toml", "rb") as fh:
        data = tomllib.load(fh)
    records = data.setdefault("release", {})
    for release in _user_releases():
        path = _user_stacks(release) / f"verl-{release}.toml"
        if release in records or not path.is_file():
            continue
        with open(path, "rb") as fh:
            records[release] = tomllib.load(fh).get("release", {}).get(release, {})
    return data


def _user_releases() -> tuple[str, ...]:
    from tutorrl.compiler.release import user_releases

    return user_releases()


def _user_stacks(release: str) -> Path:
    from tutorrl import _overlay

    return Path(_overlay.release_dir(release)) / "stacks"


def constraints_file(release: str, engine: str) -> Path:
    name = f"verl-{release}-{engine}.txt"
    packaged = STACKS / name
    if packaged.is_file() or release not in _user_releases():
        return packaged
    return _user_stacks(release) / name


def read_constraints(path: Path) -> tuple[dict[str, str], str]:
    """(canonical name -> pinned version, the Python it was resolved with)."""
    pins: dict[str, str] = {}
    python = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        found = re.match(r"#\s*python:\s*(\S+)", line)
        if found:
            python = found.group(1)
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonical(name.strip())] = version.strip()
    return pins, python


def releases() -> list[str]:
    return sorted(_data().get("release", {}))


def engines(release: str) -> list[str]:
    return sorted(_data().get("release", {}).get(release, {}).get("engine", {}))


def stack_for(release: str, engine: str | None, variant: str = "fsdp") -> Stack | None:
    """The recorded stack, or None for a release with no record."""
    rel = _data().get("release", {}).get(release)
    if rel is None:
        return None
    modules = list(rel.get("modules", []))
    modules += rel.get("variant", {}).get(variant, {}).get("modules", [])
    key = list(rel.get("key", []))
    pins: dict[str, str] = {}
    constraints = None
    python = ""
    eng = rel.get("engine", {}).get(engine or "")
    engine_modules: list[str] = []
    if eng is not None:
        key += eng.get("key", [])
        # Releases before the rollout replica registry (up to 0.5.0) import
        # the engine in the worker, through verl's own rollout package.
        engine_modules = list(eng.get("modules", []))
        modules += engine_modules
        path = constraints_file(release, str(engine))
        if path.is_file() and not eng.get("unresolvable"):
            constraints = path
            pins, python = read_constraints(path)
    return Stack(release=release, engine=engine if eng is not None else None, modules=tuple(modules),
                 replica=str(rel.get("replica", "")) if eng is not None else "", key=tuple(key), pins=pins,
                 provides={**_data().get("provides", {}), **rel.get("provides", {})}, constraints=constraints,
                 resolved_for=python, engine_modules=tuple(engine_modules),
                 unresolvable=" ".join(str((eng or {}).get("unresolvable", "")).split()))


def unresolvable_note(stack: Stack) -> str:
    """Preflight's note for a release and engine with no installable set."""
    return (f"verl {stack.release} with {stack.engine}: no installable stack is recorded "
            f"(runtime/stacks/stacks.toml): {stack.unresolvable}")


def probe(python: str, stack: Stack, *, env: dict[str, str] | None = None, cwd=None,
          timeout: float = 300.0) -> dict:
    """What ``python`` has of ``stack``; {"failed": reason} when it cannot be asked."""
    ask = {"packages": list(stack.key), "modules": list(stack.modules), "replica": stack.replica,
           "engine": stack.engine}
    try:
        proc = subprocess.run([python, str(PROBE), "stack", json.dumps(ask)], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except FileNotFoundError:
        return {"failed": f"the job's Python {python} does not exist"}
    except subprocess.TimeoutExpired:
        return {"failed": f"importing verl's trainer modules with {python} took longer than {timeout:g} s"}
    try:
        return json.loads(proc.stdout.decode("utf-8", "replace"))
    except ValueError:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return {"failed": f"{python} could not be asked (exit {proc.returncode}: {tail[0]})"}


def install_command(python: str, stack: Stack) -> str:
    """The whole recorded set as requirements: the job's Python need not have
    tutorrl itself (TUTORRL_PYTHON may name another environment)."""
    if stack.constraints is not None:
        return f"{python} -m pip install -r {stack.constraints}"
    if stack.unresolvable:
        return f"no installable stack is recorded for verl {stack.release} with {stack.engine} ({stack.unresolvable})"
    return f"{python} -m pip install 'verl=={stack.release}'"


def _failure_text(module: str, failure: dict, stack: Stack) -> str:
    if failure.get("kind") == "missing":
        name = failure["name"]
        top = name.split(".")[0]
        dist = stack.provides.get(top, top)
        pin = stack.pins.get(canonical(dist))
        wanted = f"{dist}=={pin}" if pin else dist
        if top == module.split(".")[0]:
            return f"{module} (not installed: {wanted})"
        return f"{module} (needs {name!r}, not installed: {wanted})"
    where = f" at {failure['where']}" if failure.get("where") else ""
    return f"{module} (importing it raised {failure.get('error')}{where})"


def _label(stack: Stack) -> str:
    return f"verl {stack.release}'s training stack" + (f" with {stack.engine}" if stack.engine else "")


def _fix(stack: Stack, python: str) -> str:
    fix = install_command(python, stack)
    return fix if stack.unresolvable else f"install it: {fix}"


def _failures(stack: Stack, found: dict) -> list[tuple[str, dict]]:
    """(what, failure) for each start module or rollout server that did not import,
    a missing engine named as the engine rather than in verl's words."""
    engine_missing = stack.engine is not None and found.get("versions", {}).get(stack.engine, "") is None
    missing_engine = {"kind": "missing", "name": stack.engine}
    # verl's rollout package raises its own error (PackageNotFoundError, a
    # version check) when the engine is absent: name the engine instead.
    failures = [(m, missing_engine if engine_missing and m in stack.engine_modules and f.get("kind") != "missing"
                 else f)
                for m, f in found.get("modules", {}).items() if f]
    replica = found.get("replica")
    if replica:
        if replica.get("kind") != "missing" and engine_missing:
            # verl reports a missing vLLM as an unsupported version "None":
            # say what is missing, not verl's words for it.
            replica = missing_engine
        failures.append((f"the {stack.engine} rollout server", replica))
    return failures


def compare(stack: Stack, found: dict, python: str) -> list[str]:
    """What keeps verl's trainer from starting, one line each, in ``found`` (the
    probe's answer): a start module or the rollout server that does not import.
    A run with any of these fails only after Ray, the workers and the model are up."""
    label = _label(stack)
    if "failed" in found:
        return [f"{label}: {found['failed']}"]
    failures = _failures(stack, found)
    if not failures:
        return []
    broken = [_failure_text(m, failure, stack) for m, failure in failures]
    return [f"{label}: the job's Python ({python}) cannot import what verl's trainer imports as a run "
            f"starts: {'; '.join(broken)}; {_fix(stack, python)}"]


def differences(stack: Stack, found: dict, python: str) -> list[str]:
    """Where the job's Python differs from the recorded set. Said, not refused:
    the recorded set is one resolution known to install and start, not the only
    one verl accepts (a cluster image's own torch build, a newer transformers
    within verl's range)."""
    if "failed" in found:
        return []
    # What compare already names as missing is not said again as a version.
    named = {canonical(stack.provides.get(f["name"].split(".")[0], f["name"].split(".")[0]))
             for _, f in _failures(stack, found) if f.get("kind") == "missing"}
    differs = []
    for name in stack.key:
        want = stack.pins.get(canonical(name))
        have = found.get("versions", {}).get(name)
        if want is None or canonical(name) == "verl":  # verl's own release is check_verl's finding
            continue
        if have is None and canonical(name) not in named:
            differs.append(f"{name} is not installed (the stack pins {want})")
        elif have is not None and public_version(have) != want:
            differs.append(f"{name} {have} (the stack pins {want})")
    if not differs:
        return []
    resolved = f", resolved for Python {stack.resolved_for}" if stack.resolved_for else ""
    return [f"{_label(stack)}: the job's Python ({python}) differs from the recorded stack "
            f"({stack.constraints.name if stack.constraints else 'no constraints file'}{resolved}): "
            f"{', '.join(differs)}; the recorded set: {install_command(python, stack)}"]
