"""Write (or check) the key sets of entry points whose code is a recipe outside verl's wheel (DAPO, entropy, ...).

    python tools/recipe_keysets.py RECIPE_CHECKOUT [--check] [--wheel-cache DIR] [--entry NAME ...]

RECIPE_CHECKOUT is a folder holding the recipe repository's files at the commit
``compiler/release/keymap/entries.toml`` names for the entry (e.g. ``git -C
verl-recipe archive <commit> dapo | tar -x -C RECIPE_CHECKOUT``); when it is a
git work tree its HEAD must be that commit. For each release the entry lists,
the entry's config is composed from the checkout with that release's wheel's
trainer config as its search path (``keyset_import.compose_entry_keyset``, the
extraction main_ppo's key sets use; an entry with no ``searchpath``, whose
folder holds its own copy of verl's trainer config, from the checkout alone),
and ``keysets/verl-<release>-<variant>@<entry>.json`` is written. An entry whose
config is verl's own trainer config (``trainer_config``) gets main_ppo's key set
of that release and variant, composed the same way, under its name. Only the
key sets are committed, never the recipe's files; without
the checkout this tool refuses to run. Then ``tutorrl keys lock`` and
``tools/built_sections.py`` derive the entry's locks and built files.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec

from tutorrl.compiler.release import keyset_import as ki, load_entries
from tutorrl.compiler.release.keysets import keyset_name


def _head(checkout: Path) -> str | None:
    proc = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", help="the recipe repository's files at the entry's commit")
    parser.add_argument("--entry", action="append", help="entry names (default: every recipe entry)")
    parser.add_argument("--check", action="store_true", help="compare with the committed files; write nothing")
    parser.add_argument("--wheel-cache", help="where the wheels are (default: tutorrl's wheel cache)")
    args = parser.parse_args(argv)
    checkout = Path(args.checkout)
    dest = ki.packaged_keyset_dir()
    entries = [e for e in load_entries().values() if e.source == "recipe" and (not args.entry or e.name in args.entry)]
    stale = []
    for entry in entries:
        missing = [path for path in entry.checkout_files() if not (checkout / path).is_file()]
        if missing:
            print(f"{entry.name}: {checkout} has no {', '.join(missing)}: check out {entry.repository} at "
                  f"{entry.commit}", file=sys.stderr)
            return 2
        head = _head(checkout)
        if head is not None and head != entry.commit:
            print(f"{entry.name}: {checkout} is at {head}, entries.toml pins {entry.commit}", file=sys.stderr)
            return 2
        for release in entry.releases:
            with tempfile.TemporaryDirectory(prefix="tutorrl-recipe-") as tmp:
                if entry.searchpath or entry.trainer_config:
                    # Its config is, or names by its search path, verl's trainer config: the release's wheel's.
                    ki.extract_config(ki.fetch_wheel(release, Path(args.wheel_cache) if args.wheel_cache else None),
                                      Path(tmp))
                for variant in entry.variants:
                    if entry.trainer_config:
                        keyset = msgspec.structs.replace(
                            ki.compose_keyset(Path(tmp) / ki.CONFIG_PREFIX.rstrip("/"), release, variant),
                            entry=entry.name)
                    else:
                        keyset = ki.compose_entry_keyset(Path(tmp), release, variant, entry, checkout)
                    data = ki.encode_keyset(keyset)
                    path = dest / keyset_name(release, variant, entry.name)
                    if path.is_file() and path.read_bytes() == data:
                        continue
                    stale.append(path.name)
                    if not args.check:
                        path.write_bytes(data)
                    print(f"{'stale' if args.check else 'wrote'}  {path.name}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
