"""A recipe entry's launch (DAPO, entropy) for the import: where its code and config are.

A recipe is outside verl's wheel: its Hydra config sits beside its module in a
verl-recipe checkout, so the round trip composes it from the checkout the user
names (``tutorrl import --recipe PATH``), and the spec names that checkout in
``[experiment.recipe]`` (pinned at compile, as a spec author writes it). The
entry's ``import_root`` says what the checkout is to its module: its top package
(``recipe``, named so) or the folder holding it (``rep_exp/``).
"""

from __future__ import annotations

import os

from tutorrl.errors import RefusedError


def recipe_folder(entry_name: str, given: str | None, source: str) -> str:
    """The absolute checkout a recipe entry's launch composes from; "" for an entry in verl's wheel.
    Refused, naming the module and what to give, without one, or with a folder that cannot be it."""
    from tutorrl.compiler.release import find_entry

    entry = find_entry(entry_name)
    if entry is None or entry.source != "recipe":
        return ""
    top = entry.top
    where = f"a checkout of {entry.repository}" + (f" at {entry.commit[:12]}" if entry.commit else "")
    layout = f"named {top!r}" if entry.checkout_is_package else f"holding {top}/ (the checkout itself, any name)"
    if not given:
        raise RefusedError(f"{source}: the launch starts {entry.module} (the recipe entry point '{entry.name}'), "
                           f"whose code and Hydra config are outside verl's wheel: give --recipe PATH, {where} "
                           f"{layout}")
    folder = os.path.abspath(given)
    if entry.checkout_is_package:
        if os.path.basename(os.path.normpath(folder)) != top:
            raise RefusedError(f"--recipe {given}: {entry.module} is imported from a folder named {top!r} (launch.sh "
                               f"puts the folder above it on PYTHONPATH); clone or link {where} as .../{top}")
    elif not os.path.isfile(os.path.join(folder, entry.module_file())):
        raise RefusedError(f"--recipe {given}: no {entry.module_file()} there: {entry.module} is imported from the "
                           f"folder holding {top}/ (launch.sh puts that folder itself on PYTHONPATH); give {where}, "
                           f"not a folder inside it")
    missing = [path for path in entry.checkout_files() if not os.path.isfile(os.path.join(folder, path))]
    if missing:
        raise RefusedError(f"--recipe {given}: no {', '.join(missing)} there ({entry.name}'s "
                           f"{'module' if entry.trainer_config else 'config'}); "
                           f"give {where}")
    return folder
