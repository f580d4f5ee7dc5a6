"""A recipe entry point's code, pinned: the spec's ``[experiment.recipe]`` folder hashed into the bundle.

Recipes (verl-recipe's dapo, ...) are not in verl's wheel: the job imports them
from a folder. The compile records what is portable about that folder -- each
file's sha256 by its path inside it, and their digest; never an absolute path,
an mtime or a file's order on disk -- in the normalised spec, so the bundle's
digest covers the code. launch.sh re-hashes the folder at job start (the same
program, ``launch_program``) and `tutorrl verify` names what changed.
The folder is named by the spec's own path (relative to where tutorrl runs, a
root allowed), as data paths are: the bundle names no machine's folder.
"""

from __future__ import annotations

import hashlib
import os
from typing import Mapping

import msgspec

from tutorrl.errors import Problem, SpecError

# Folders a recipe's code never lives in: git's own and Python's caches.
SKIP_DIRS = {".git", "__pycache__"}


def recipe_files(folder):
    out = {}
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in names:
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(top, name)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            with open(path, "rb") as fh:
                out[rel] = hashlib.sha256(fh.read()).hexdigest()
    return dict(sorted(out.items()))


def recipe_digest(files):
    text = "".join(f"{sha}  {rel}\n" for rel, sha in sorted(files.items()))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# What launch.sh adds after the two functions: the folder and the pinned digest from its
# arguments, exit non-zero on other code.
_CHECK = (
    "import sys",
    "folder, want = sys.argv[1], sys.argv[2]",
    "if not os.path.isdir(folder):",
    '    sys.exit(f"tutorrl: the recipe folder {folder} is absent where the job runs (the spec\'s [experiment.recipe] path)")',
    "got = recipe_digest(recipe_files(folder))",
    "if got != want:",
    '    sys.exit(f"tutorrl: the recipe code in {folder} is not what this bundle was compiled with ({got}, "',
    '             f"the bundle pins {want}); `tutorrl verify` names the changed files")',
)


def launch_program() -> str:
    """What launch.sh runs (``python -c``) with the folder and the pinned digest: :func:`recipe_files` and
    :func:`recipe_digest` by their own source (the job's Python need not have tutorrl), never a copy, so
    the job hashes the folder as the compiler did."""
    from tutorrl.compiler.release.hydra import function_source

    return "\n".join(["", "import hashlib, os", "SKIP_DIRS = {%s}" % ", ".join(f'"{d}"' for d in sorted(SKIP_DIRS)),
                      function_source(recipe_files) + function_source(recipe_digest), *_CHECK, ""])


def folder_of(path: str, roots: Mapping, env: Mapping[str, str]) -> str | None:
    """The folder ``path`` names here: a root from ``env``, else the spec's default; None where it has no value."""
    from tutorrl.compiler.pipeline.roots import expand

    values = {name: env.get(name) or root.default for name, root in roots.items() if env.get(name) or root.default}
    return expand(path, values)


def changes(recorded: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """What differs between the pinned files and the folder's: each path, changed, added or removed."""
    out = [f"{rel} changed" for rel in sorted(set(recorded) & set(now)) if recorded[rel] != now[rel]]
    out += [f"{rel} added" for rel in sorted(set(now) - set(recorded))]
    out += [f"{rel} removed" for rel in sorted(set(recorded) - set(now))]
    return out


def pin(spec, entry, env: Mapping[str, str] | None = None):
    """``spec`` with its recipe's files and digest recorded (a :class:`SpecError` at ``experiment.recipe``
    where the entry needs code the spec does not name, or the folder cannot be pinned). A spec that already
    records its files (a bundle's spec.toml, re-derived) keeps them: the folder is checked at run time."""
    recipe = spec.experiment.recipe
    if entry.source != "recipe":
        if recipe is not None:
            raise SpecError([Problem(f"entry point '{entry.name}' ({entry.module}) is in verl's wheel; "
                                     "[experiment.recipe] is for a recipe's code", key="experiment.recipe")])
        return spec
    top = entry.top
    if recipe is None:
        checkout = f"a checkout of {entry.repository}{f' at {entry.commit[:12]}' if entry.commit else ''}"
        raise SpecError([Problem(
            f"entry point '{entry.name}' ({entry.module}) runs a recipe's code from outside verl's wheel; "
            "the spec must say where that code is", key="experiment.entry",
            hint=f"add [experiment.recipe] path = \"<folder>/{top}\" ({checkout}, named {top})"
                 if entry.checkout_is_package else
                 f"add [experiment.recipe] path = \"<checkout>\" ({checkout}, the folder holding {top}/)")])
    if recipe.files or recipe.digest:
        if recipe_digest(dict(recipe.files)) != recipe.digest:
            raise SpecError([Problem("[experiment.recipe] files and digest disagree (written by hand?)",
                                     key="experiment.recipe.digest",
                                     hint="remove digest and files: the compiler writes them from the folder")])
        return spec
    env = os.environ if env is None else env
    folder = folder_of(recipe.path, spec.roots, env)
    if folder is None:
        raise SpecError([Problem(f"{recipe.path!r} starts with a root that has no value here",
                                 key="experiment.recipe.path", hint="set it in this environment or give it a default")])
    where = f"{recipe.path!r}" + (f" ({folder})" if folder != recipe.path else "")
    if not os.path.isdir(folder):
        raise SpecError([Problem(f"the recipe folder {where} is not a folder here", key="experiment.recipe.path",
                                 hint="a relative path is relative to where tutorrl runs, as data paths are")])
    name = os.path.basename(os.path.normpath(os.path.abspath(folder)))
    if entry.checkout_is_package and name != top:
        raise SpecError([Problem(f"the recipe folder {where} is named {name!r}, but {entry.module} is imported "
                                 f"from a folder named {top!r}", key="experiment.recipe.path",
                                 hint=f"clone or link it as .../{top}: launch.sh puts the folder above it on PYTHONPATH")])
    if not entry.checkout_is_package and not os.path.isfile(os.path.join(folder, entry.module_file())):
        raise SpecError([Problem(f"the recipe folder {where} has no {entry.module_file()}: {entry.module} is imported "
                                 f"from the folder holding {top}/", key="experiment.recipe.path",
                                 hint=f"name the checkout of {entry.repository} itself, not a folder inside it: "
                                      "launch.sh puts that folder on PYTHONPATH")])
    if recipe.commit is not None:
        _check_checkout(folder, where, recipe.commit)
    files = recipe_files(folder)
    if not files:
        raise SpecError([Problem(f"the recipe folder {where} holds no files", key="experiment.recipe.path")])
    pinned = msgspec.structs.replace(recipe, files=files, digest=recipe_digest(files))
    return msgspec.structs.replace(spec, experiment=msgspec.structs.replace(spec.experiment, recipe=pinned))


def _check_checkout(folder: str, where: str, commit: str) -> None:
    """The folder is a git work tree at ``commit`` with nothing changed or added (git's own answer)."""
    import subprocess

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if head is None:
        raise SpecError([Problem(f"experiment.recipe.commit is set, but {where} is not a git checkout git can read",
                                 key="experiment.recipe.commit")])
    if head != commit:
        raise SpecError([Problem(f"the recipe checkout {where} is at {head[:12]}, not {commit[:12]}",
                                 key="experiment.recipe.commit", hint=f"git -C {folder} checkout {commit}")])
    dirty = git("status", "--porcelain", "--untracked-files=all", "--", ".")
    if dirty:
        first = dirty.splitlines()[0][3:]
        raise SpecError([Problem(f"the recipe checkout {where} has changes git has not committed ({first}"
                                 f"{' and more' if len(dirty.splitlines()) > 1 else ''})",
                                 key="experiment.recipe.commit", hint="commit or stash them, or drop commit")])
