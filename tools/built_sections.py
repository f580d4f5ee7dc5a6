"""Write (or check) compiler/release/built/: the config sections each verl release builds into dataclasses.

    python tools/built_sections.py [--check] [--wheel-cache DIR] [RELEASE ...]

Each release's wheel comes from the wheel cache (``tutorrl keys import``'s,
downloaded with pip when missing); see :mod:`tutorrl.compiler.release.built_import`.
A release whose wheel builds no section gets no file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tutorrl.compiler.release import fetch_wheel, packaged_releases
from tutorrl.compiler.release.built import built_path
from tutorrl.compiler.release.built_import import derive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="*", help="releases (default: every one the package holds)")
    parser.add_argument("--check", action="store_true", help="compare with the committed files; write nothing")
    parser.add_argument("--wheel-cache", help="where the wheels are (default: tutorrl's wheel cache)")
    args = parser.parse_args(argv)
    stale = []
    for release in args.releases or packaged_releases():
        wheel = fetch_wheel(release, Path(args.wheel_cache) if args.wheel_cache else None)
        for name, data in derive(release, wheel).items():
            variant, _, entry = name.rsplit("-", 1)[1].removesuffix(".json").partition("@")
            path = Path(built_path(release, variant, entry or "ppo"))
            empty = b'"sections": {\n  }' in data
            old = path.read_bytes() if path.exists() else None
            if old == (None if empty else data):
                continue
            stale.append(path.name)
            if not args.check:
                if empty:
                    path.unlink()
                else:
                    path.parent.mkdir(exist_ok=True)
                    path.write_bytes(data)
            print(f"{'stale' if args.check else 'wrote'}  {path.name}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
