"""Regenerate runtime/stacks/verl-<release>-<engine>.txt from runtime/stacks/stacks.toml.

    python tools/stacks.py            # resolve every recorded stack with pip and write its constraints file
    python tools/stacks.py --check    # resolve again and report pins that moved (writes nothing)

Needs the package index (pip's own configuration, nothing else): each stack's
`resolve` list is resolved by `pip install --dry-run --ignore-installed
--report`, which installs nothing, so the interpreter this runs under only
decides the Python version and platform the set is resolved for (Linux x86_64
is where verl's GPU wheels exist). Each `refused` requirement set is resolved
too and must still fail, so the recorded reason stays true. The tests read
only the committed files.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACKS = ROOT / "runtime" / "stacks"


def resolve(requirements: list[str]) -> tuple[dict[str, str] | None, str]:
    """({name: version} pip would install, or None; pip's last lines when it fails)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                               "--quiet", "--report", str(report), *requirements],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("WARNING")]
            return None, "\n".join(lines[-8:])
        data = json.loads(report.read_text())
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in data["install"]}, ""


def pip_version() -> str:
    return subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True,
                          text=True).stdout.split()[1]


def render(release: str, engine: str, spec: dict, pins: dict[str, str], when: str, pip: str) -> str:
    why = " ".join(spec.get("why", "").split())
    lines = [
        f"# verl {release} with {engine}: every package pip resolved, for pip's -c.",
        f"# Written by tools/stacks.py on {when} (pip {pip}, {platform.system()} {platform.machine()}); from:",
        *(f"#   {req}" for req in spec["resolve"]),
        f"# python: {sys.version_info.major}.{sys.version_info.minor}",
        "# Why these versions: " + why,
        f"# Install: pip install 'tutorrl[verl,{engine}]' -c runtime/stacks/verl-{release}-{engine}.txt",
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report pins that moved; write nothing")
    args = parser.parse_args(argv)
    data = tomllib.loads((STACKS / "stacks.toml").read_text())
    when, pip = datetime.date.today().isoformat(), pip_version()
    failed = False
    for release, rel in sorted(data["release"].items()):
        for engine, spec in sorted(rel.get("engine", {}).items()):
            for refused in spec.get("refused", []):
                ok, _ = resolve([refused])
                print(f"verl {release} {engine}: {refused!r} {'now RESOLVES: update why/refused' if ok else 'still fails'}")
                failed |= ok is not None
            pins, error = resolve(spec["resolve"])
            target = STACKS / f"verl-{release}-{engine}.txt"
            if pins is None:
                print(f"verl {release} {engine}: does not resolve:\n{error}")
                failed = True
                continue
            if args.check:
                old = pins_of(target.read_text()) if target.exists() else {}
                moved = sorted(set(old.items()) ^ set(pins.items()))
                print(f"verl {release} {engine}: {'up to date' if not moved else f'{len(moved)} pins moved'}")
                failed |= bool(moved)
            else:
                target.write_text(render(release, engine, spec, pins, when, pip))
                print(f"verl {release} {engine}: {len(pins)} packages -> {target.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
