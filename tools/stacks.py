"""Regenerate runtime/stacks/verl-<release>-<engine>.txt from runtime/stacks/stacks.toml.

    python tools/stacks.py                  # resolve every recorded stack with pip and write its constraints file
    python tools/stacks.py --check          # resolve again and report pins that moved (writes nothing)
    python tools/stacks.py --only 0.8.0     # one release (repeatable)
    python tools/stacks.py --only 0.5.0 --engine hf   # one engine of it (repeatable)

Needs the package index (pip's own configuration, except find-links, below):
each stack's `resolve` list is resolved by `pip install --dry-run
--ignore-installed --report`, which installs nothing, so the interpreter this
runs under only decides the Python version and platform the set is resolved
for (Linux x86_64 is where verl's GPU wheels exist). find-links is pointed at
an empty folder: a local wheel folder holds builds for the machine at hand
(a CPU torch, `2.13.0+cpu`, which pip prefers to the index's 2.13.0), not
what a training machine installs; a pin with a local version label is refused
all the same. Each `refused` requirement set is resolved too and must still
fail, so the recorded reason stays true; an engine recorded `unresolvable`
gets no file (a stale one is removed). The tests read only the committed files.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACKS = ROOT / "runtime" / "stacks"


def resolve(requirements: list[str]) -> tuple[dict[str, str] | None, str]:
    """({name: version} pip would install, or None; pip's reason when it fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        links = Path(tmp) / "no-links"
        links.mkdir()
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                               "--report", str(report), *requirements],
                              capture_output=True, text=True, env={**os.environ, "PIP_FIND_LINKS": str(links)})
        if proc.returncode != 0:
            return None, reason(proc.stdout + "\n" + proc.stderr)
        data = json.loads(report.read_text())
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in data["install"]}, ""


def reason(output: str) -> str:
    """pip's conflict explanation (or its last error lines), without the download chatter."""
    lines = [ln.rstrip() for ln in output.splitlines()]
    keep = [ln for ln in lines if ln.startswith(("ERROR", "The conflict is caused by", "    "))
            and "Location" not in ln and "━" not in ln]
    return "\n".join(keep[-16:]) or "\n".join(lines[-8:])


def pip_version() -> str:
    return subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True,
                          text=True).stdout.split()[1]


def newest_release() -> str:
    """The verl release pyproject's [verl] extra pins: installed through tutorrl's extras."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["verl"]
    return next(r.split("==", 1)[1] for r in extra if r.startswith("verl=="))


def install_line(release: str, engine: str) -> str:
    path = f"runtime/stacks/verl-{release}-{engine}.txt"
    if release == newest_release():
        return f"pip install 'tutorrl[verl,{engine}]' -c {path}"
    return f"pip install -r {path}"


def render(release: str, engine: str, spec: dict, pins: dict[str, str], when: str, pip: str) -> str:
    why = " ".join(spec.get("why", "").split())
    lines = [
        f"# verl {release} with {engine}: every package pip resolved, for pip's -c (or -r).",
        f"# Written by tools/stacks.py on {when} (pip {pip}, {platform.system()} {platform.machine()}); from:",
        *(f"#   {req}" for req in spec["resolve"]),
        f"# python: {sys.version_info.major}.{sys.version_info.minor}",
        "# Why these versions: " + why,
        f"# Install: {install_line(release, engine)}",
        "",
    ]
    lines += [f"{name}=={pins[name]}" for name in sorted(pins, key=str.lower)]
    return "\n".join(lines) + "\n"


def pins_of(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name] = version
    return out


def work(release: str, engine: str, spec: dict) -> dict:
    """Every resolution one release and engine needs (run in a thread: pip is its own process)."""
    refused = {req: resolve([req])[0] is not None for req in spec.get("refused", [])}
    if spec.get("unresolvable"):
        return {"refused": refused, "pins": None, "error": ""}
    pins, error = resolve(spec["resolve"])
    return {"refused": refused, "pins": pins, "error": error}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report pins that moved; write nothing")
    parser.add_argument("--only", action="append", metavar="RELEASE", help="only this verl release (repeatable)")
    parser.add_argument("--engine", action="append", metavar="ENGINE", help="only this rollout engine (repeatable)")
    parser.add_argument("--jobs", type=int, default=3, help="resolutions run at once (default 3)")
    args = parser.parse_args(argv)
    data = tomllib.loads((STACKS / "stacks.toml").read_text())
    when, pip = datetime.date.today().isoformat(), pip_version()
    todo = [(release, engine, spec) for release, rel in sorted(data["release"].items())
            if not args.only or release in args.only
            for engine, spec in sorted(rel.get("engine", {}).items())
            if not args.engine or engine in args.engine]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda item: work(*item), todo))
    failed = False
    for (release, engine, spec), result in zip(todo, results):
        head = f"verl {release} {engine}"
        for req, ok in result["refused"].items():
            print(f"{head}: {req!r} {'now RESOLVES: update why/refused' if ok else 'still fails'}")
            failed |= ok
        target = STACKS / f"verl-{release}-{engine}.txt"
        if spec.get("unresolvable"):
            print(f"{head}: recorded unresolvable; no constraints file")
            if target.exists() and not args.check:
                target.unlink()
            continue
        pins = result["pins"]
        if pins is None:
            print(f"{head}: does not resolve:\n{result['error']}")
            failed = True
            continue
        local = sorted(f"{n}=={v}" for n, v in pins.items() if "+" in v)
        if local:
            print(f"{head}: local builds in the set ({', '.join(local)}): not what the index serves")
            failed = True
            continue
        if args.check:
            old = pins_of(target.read_text()) if target.exists() else {}
            moved = sorted(set(old.items()) ^ set(pins.items()))
            print(f"{head}: {'up to date' if not moved else f'{len(moved)} pins moved'}")
            failed |= bool(moved)
        else:
            target.write_text(render(release, engine, spec, pins, when, pip))
            print(f"{head}: {len(pins)} packages -> {target.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
